// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command sharding runs mirror's controller on several active replicas at once: each replica is a
// member of a ring and mirrors the sources of the hash ranges it holds.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kpatterns/kpatterns/sharding/config"
	"github.com/kpatterns/kpatterns/sharding/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/shard"
)

// flags are sharding's own flags of run.
type flags struct {
	mode   string
	member string
}

func (f *flags) bind(fs *flag.FlagSet) {
	host, _ := os.Hostname() // in a Pod: the Pod's name
	fs.StringVar(&f.mode, "sharding", string(shard.Server), "how a replica's cache holds only its share: server (the API server filters by hash range; feature gate ShardedListAndWatch) or label (a leader-elected sharder labels each source with its range once; any cluster)")
	fs.StringVar(&f.member, "member", host, "this replica's name in the ring, unique among the replicas (default: the host name, in a Pod its name)")
}

func main() {
	var f flags // filled when the command line is parsed
	app.Main(config.Pattern, func(ctx context.Context, cfg *rest.Config, o app.RunOptions) error { return run(ctx, cfg, o, f) }, f.bind)
}

// run is `sharding run`: the manager (leader election for the coordinator, metrics, probes) and
// the ring's member, served until SIGTERM.
func run(ctx context.Context, cfg *rest.Config, o app.RunOptions, f flags) error {
	if !o.LeaderElect {
		return fmt.Errorf("sharding needs --leader-elect: the leader assigns the ranges")
	}
	opts, err := app.ManagerOptions(config.Pattern, o) // leader election, metrics, probes: the flags
	if err != nil {
		return err
	}
	so := controller.Options(f.member, o.Namespace, shard.Mode(f.mode), opts)
	shard.CacheOptions(so, &opts.Cache)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	if err := app.AddProbes(mgr, opts); err != nil {
		return err
	}
	if err := shard.Setup(mgr, so); err != nil {
		return err
	}
	return app.Start(ctx, mgr)
}
