// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command multi runs the mirror, reloader and summary controllers in one process: one manager
// (one cache, one client, one metrics endpoint, one Lease), each controller with its own name,
// queue, rate limiter and metrics. Its manifests are the union of the three patterns' generated
// files (app.Compose); their cache scopes are merged kind by kind (app.MergeCache).
package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	mirrorconfig "github.com/kpatterns/kpatterns/mirror/config"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	reloaderconfig "github.com/kpatterns/kpatterns/reloader/config"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	summaryconfig "github.com/kpatterns/kpatterns/summary/config"
	summary "github.com/kpatterns/kpatterns/summary/controller"
)

// Name is the composition's name: its ServiceAccount, ClusterRole and Lease.
const Name = "multi"

func main() {
	p, err := app.Compose(Name, mirrorconfig.Pattern, reloaderconfig.Pattern, summaryconfig.Pattern)
	if err != nil {
		fmt.Fprintln(os.Stderr, "multi:", err)
		os.Exit(1)
	}
	// The reloader's flags of run (--coalesce-window), filled when the command line is parsed.
	ro := reloader.Options{CoalesceWindow: reloader.DefaultCoalesceWindow}
	app.Main(p, func(ctx context.Context, cfg *rest.Config, o app.RunOptions) error { return run(ctx, p, cfg, o, ro) }, ro.BindFlags)
}

// run is `multi run`: one manager and the three patterns' controllers, served until SIGTERM.
func run(ctx context.Context, p app.Pattern, cfg *rest.Config, o app.RunOptions, ro reloader.Options) error {
	opts, err := app.ManagerOptions(p, o) // leader election, metrics, probes: the flags
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, opts)
	if err != nil {
		return err
	}
	ro.WatchNamespaces, ro.Namespace = o.WatchNamespaces, o.Namespace
	if err := ro.Enable(o.With); err != nil { // a composition has no features: --namespace-selector is refused
		return err
	}
	if err := setup(mgr, ro); err != nil {
		return err
	}
	return app.Start(ctx, mgr)
}

// newManager builds the composition's manager from opts: the members' schemes, their cache
// scopes merged (the reloader keeps a cache of its own), its probes.
func newManager(cfg *rest.Config, opts ctrl.Options) (manager.Manager, error) {
	scheme, err := app.NewScheme(summaryv1alpha1.AddToScheme)
	if err != nil {
		return nil, err
	}
	opts.Scheme = scheme
	if err := app.MergeCache(&opts.Cache, app.CacheScope{Name: mirror.Name, Options: mirror.CacheOptions},
		app.CacheScope{Name: summary.Name, Options: summary.CacheOptions}); err != nil {
		return nil, err
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	return mgr, app.AddProbes(mgr, opts)
}

// setup registers every member's controllers.
func setup(mgr manager.Manager, ro reloader.Options) error {
	if err := mirror.Setup(mgr); err != nil {
		return fmt.Errorf("%s: %w", mirror.Name, err)
	}
	if err := reloader.Setup(mgr, ro); err != nil {
		return fmt.Errorf("%s: %w", reloader.Name, err)
	}
	if err := summary.Setup(mgr); err != nil {
		return fmt.Errorf("%s: %w", summary.Name, err)
	}
	return nil
}
