// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command reloader rolls opted-in Deployments, StatefulSets, DaemonSets and CronJobs (and, with
// --with argo-rollouts, Argo Rollouts) when the data of a ConfigMap or Secret they reference changes;
// with --with namespace-selector, only in the namespaces whose labels match --namespace-selector.
package main

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kpatterns/kpatterns/reloader/config"
	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

func main() {
	// The reloader's own flags of run (--coalesce-window), filled when the command line is parsed.
	options := controller.Options{CoalesceWindow: controller.DefaultCoalesceWindow}
	app.Main(config.Pattern, func(ctx context.Context, cfg *rest.Config, o app.RunOptions) error {
		return run(ctx, cfg, o, options)
	}, options.BindFlags)
}

// run is `reloader run`: the manager and the reloader's controllers, served until SIGTERM.
func run(ctx context.Context, cfg *rest.Config, o app.RunOptions, options controller.Options) error {
	if err := options.Enable(o.With); err != nil { // before anything starts
		return err
	}
	opts, err := app.ManagerOptions(config.Pattern, o) // leader election, metrics, probes: the flags
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, opts)
	if err != nil {
		return err
	}
	options.WatchNamespaces, options.Namespace = o.WatchNamespaces, o.Namespace // its own cache watches what the manager's does; its key is in its namespace
	if err := controller.Setup(mgr, options); err != nil {
		return err
	}
	return app.Start(ctx, mgr)
}

// newManager builds the reloader's manager from opts, with its scheme (Rollouts known) and its
// probes. The manager's cache holds nothing of the reloader's: its projections live in a cache of
// its own (controller.Setup), so a composition never shares an informer with it.
func newManager(cfg *rest.Config, opts ctrl.Options) (manager.Manager, error) {
	scheme, err := app.NewScheme(controller.AddToScheme)
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
