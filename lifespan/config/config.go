// Package config declares the pattern (Pattern) and holds its generated manifests (FS) —
// controller-gen writes them from the markers: crd, rbac — so the binary and any composition of
// patterns (app.Compose) use exactly what was generated.
package config

import (
	"embed"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	"github.com/kpatterns/kpatterns/lifespan/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

// FS holds crd/, rbac/.
//
//go:embed crd rbac
var FS embed.FS

// Pattern declares the pattern to shared/app: its main.go runs it, and app.Compose composes it.
var Pattern = New()

// New declares the pattern with a Lifespan of its own: a test runs several replicas in one process.
func New() app.Pattern {
	l := &controller.Lifespan{}
	return app.Pattern{
		Name:        controller.Name,
		Config:      FS,
		AddToScheme: v1alpha1.AddToScheme,
		Cache:       controller.Cache,
		RunFlags:    l.BindFlags,
		Setup:       func(mgr ctrl.Manager) error { return l.Setup(mgr, app.OperatorNamespace()) },
		Hooks:       app.Hooks{Started: l.Started, Acquired: l.Acquired, LeaderExit: l.LeaderExit, Exit: l.Exit},
	}
}
