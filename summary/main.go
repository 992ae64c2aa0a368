// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command summary reports on existing Pods: a Workload's status counts the Pods its selector
// matches, by phase and readiness. It never writes a Pod.
package main

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	"github.com/kpatterns/kpatterns/summary/config"
	"github.com/kpatterns/kpatterns/summary/controller"
)

func main() { app.Main(config.Pattern, run) }

// run is `summary run`: the manager, its controller, served until SIGTERM.
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

// newManager builds summary's manager from opts: its scheme, its cache scope and its probes.
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
