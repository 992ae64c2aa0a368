// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command finalizers keeps a database and a login role in a PostgreSQL server per
// PostgresDatabase, through a finalizer, with drift repair and an orphan sweep.
package main

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/config"
	"github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/app"
)

// options are the pattern's own flags of run (--sweep-interval).
var options controller.Options

func main() { app.Main(config.Pattern, run, options.BindFlags) }

// run is `finalizers run`: the manager and the controller over PostgreSQL, served until SIGTERM.
func run(ctx context.Context, cfg *rest.Config, o app.RunOptions) error {
	opts, err := app.ManagerOptions(config.Pattern, o) // leader election, metrics, probes: the flags
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, opts)
	if err != nil {
		return err
	}
	pg := provider.NewPostgres() // connections are opened per server, from each object's Secret
	defer pg.Close()
	own := options
	own.Namespace = o.Namespace // PostgresServers' Secrets are read from here only
	if err := controller.Setup(mgr, pg, own); err != nil {
		return err
	}
	return app.Start(ctx, mgr)
}

// newManager builds the pattern's manager from opts: its scheme and its probes.
func newManager(cfg *rest.Config, opts ctrl.Options) (manager.Manager, error) {
	scheme, err := app.NewScheme(v1alpha1.AddToScheme)
	if err != nil {
		return nil, err
	}
	opts.Scheme = scheme
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	return mgr, app.AddProbes(mgr, opts)
}
