// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command deploypolicy enforces a namespace's Deployment policy at admission: a defaulted team
// label, a replica ceiling (also on /scale), an immutable team label and delete protection.
package main

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kpatterns/kpatterns/deploypolicy/config"
	"github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/app"
)

func main() { app.Main(config.Pattern, run) }

// run is `deploypolicy run`: the manager, its admission webhooks, served until SIGTERM.
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

// newManager builds deploypolicy's manager from opts: its probes.
func newManager(cfg *rest.Config, opts ctrl.Options) (manager.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return nil, err
	}
	return mgr, app.AddProbes(mgr, opts)
}
