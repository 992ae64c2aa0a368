// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command lifespan makes the process and leadership lifetime hooks observable: a Heartbeat of
// leadership terms, an Event per hook, and an Observed Event per version of each labelled
// ConfigMap. See README.md.
package main

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	"github.com/kpatterns/kpatterns/lifespan/config"
	"github.com/kpatterns/kpatterns/lifespan/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

// lifespan is the pattern: its flags of run (--heartbeat-interval), controller and hooks.
var lifespan = &controller.Lifespan{}

func main() { app.Main(config.Pattern, run, lifespan.BindFlags) }

// run is `lifespan run`: the manager, the heartbeat and the observe controller, served with the
// pattern's lifetime hooks until SIGTERM.
func run(ctx context.Context, cfg *rest.Config, o app.RunOptions) error {
	opts, err := app.ManagerOptions(config.Pattern, o) // leader election, metrics, probes: the flags
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, opts)
	if err != nil {
		return err
	}
	if err := lifespan.Setup(mgr, o.Namespace); err != nil {
		return err
	}
	return app.Serve(ctx, mgr, config.Pattern, o, lifespan.Hooks())
}

// newManager builds the pattern's manager from opts: its scheme, its cache scope and its probes.
func newManager(cfg *rest.Config, opts ctrl.Options) (manager.Manager, error) {
	scheme, err := app.NewScheme(v1alpha1.AddToScheme)
	if err != nil {
		return nil, err
	}
	opts.Scheme = scheme
	controller.CacheOptions(&opts.Cache)
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	return mgr, app.AddProbes(mgr, opts)
}
