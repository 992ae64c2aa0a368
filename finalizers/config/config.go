// Package config declares the pattern (Pattern) and holds its generated manifests (FS) —
// controller-gen writes them from the markers: crd, rbac — so the binary and any composition of
// patterns (app.Compose) use exactly what was generated.
package config

import (
	"embed"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/app"
)

// FS holds crd/, rbac/.
//
//go:embed crd rbac
var FS embed.FS

// opts are the pattern's own flags of run.
var opts controller.Options

// Pattern declares the pattern to shared/app: its main.go runs it, and app.Compose composes it.
var Pattern = app.Pattern{
	Name:        controller.Name,
	Config:      FS,
	AddToScheme: v1alpha1.AddToScheme,
	RunFlags:    opts.BindFlags,
	Setup: func(mgr ctrl.Manager) error {
		demo := provider.NewDemo(opts.Demo) // a durable adapter goes here
		if err := controller.RegisterDemoMetrics(demo); err != nil {
			return err
		}
		return controller.Setup(mgr, demo, opts)
	},
}
