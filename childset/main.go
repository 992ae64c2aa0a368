// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command childset reconciles Bundles: one ConfigMap per entry, and guarded pruning of the
// ConfigMaps of entries that left the spec.
package main

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	"github.com/kpatterns/kpatterns/childset/config"
	"github.com/kpatterns/kpatterns/childset/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

func main() { app.Main(config.Pattern, run) }

// run is `childset run`: the manager, its controller, served until SIGTERM.
func run(ctx context.Context, cfg *rest.Config, o app.RunOptions) error {
	opts, err := app.ManagerOptions(config.Pattern, o) // leader election, metrics, probes: the flags
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, opts)
	if err != nil {
		return err
	}
	if err := controller.Setup(mgr); err != nil {
		return err
	}
	return app.Start(ctx, mgr)
}

// newManager builds childset's manager from opts: its scheme, its cache scope and its probes.
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
