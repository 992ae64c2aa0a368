// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command widget reconciles Widgets: one custom resource managing a ConfigMap, a Deployment and a
// Service through stages, with automatic status.
package main

import (
	"context"

	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	"github.com/kpatterns/kpatterns/widget/config"
	"github.com/kpatterns/kpatterns/widget/controller"
)

func main() { app.Main(config.Pattern, run) }

// run is `widget run`: the manager, its controller and its admission webhooks, served until SIGTERM.
func run(ctx context.Context, cfg *rest.Config, o app.RunOptions) error {
	opts, err := app.ManagerOptions(config.Pattern, o) // leader election, metrics, probes, webhook server: the flags
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
	if o.ServesWebhooks() { // not with --admission=policy: admission policies enforce the rules
		if err := controller.SetupWebhooks(mgr); err != nil {
			return err
		}
	}
	// In the cluster (run --certs=self): the serving certificate and the webhooks' caBundle,
	// created and renewed by cert-controller; the webhook server starts once they are in place.
	if err := app.AddCertRotator(mgr, config.Pattern, o); err != nil {
		return err
	}
	return app.Start(ctx, mgr)
}

// newManager builds widget's manager from opts: its scheme, its cache scope and its probes.
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

// setup registers the controller and the admission webhooks of Widgets.
func setup(mgr manager.Manager) error {
	if err := controller.Setup(mgr); err != nil {
		return err
	}
	return controller.SetupWebhooks(mgr)
}
