// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command dbpolicy validates another operator's Database objects at admission, from the request's
// old and new objects alone: storage only grows, the engine is immutable, the version never goes
// back, and the required fields are there.
package main

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kpatterns/kpatterns/dbpolicy/config"
	"github.com/kpatterns/kpatterns/dbpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/app"
)

func main() { app.Main(config.Pattern, run) }

// run is `dbpolicy run`: the manager, its admission webhooks, served until SIGTERM.
func run(ctx context.Context, cfg *rest.Config, o app.RunOptions) error {
	opts, err := app.ManagerOptions(config.Pattern, o) // leader election, metrics, probes, webhook server: the flags
	if err != nil {
		return err
	}
	mgr, err := newManager(cfg, opts)
	if err != nil {
		return err
	}
	if err := webhook.Setup(mgr); err != nil {
		return err
	}
	// In the cluster (run --certs=self): the serving certificate and the webhooks' caBundle,
	// created and renewed by cert-controller; the webhook server starts once they are in place.
	if err := app.AddCertRotator(mgr, config.Pattern, o); err != nil {
		return err
	}
	return app.Start(ctx, mgr)
}

// newManager builds dbpolicy's manager from opts: its probes.
func newManager(cfg *rest.Config, opts ctrl.Options) (manager.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	return mgr, app.AddProbes(mgr, opts)
}
