// Package config declares the pattern (Pattern) and holds its generated manifests (FS) —
// controller-gen writes them from the markers: rbac — so the binary and any composition of
// patterns (app.Compose) use exactly what was generated.
package config

import (
	"embed"

	ctrl "sigs.k8s.io/controller-runtime"

	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

// FS holds rbac/.
//
//go:embed rbac
var FS embed.FS

// opts are the pattern's own flags of run.
var opts = controller.Options{CoalesceWindow: controller.DefaultCoalesceWindow}

// Pattern declares the pattern to shared/app: its main.go runs it, and app.Compose composes it.
// The reloader caches nothing in the manager's cache: its projections live in its own
// (controller.Setup), so a composition never shares an informer with it.
var Pattern = app.Pattern{
	Name:     controller.Name,
	Config:   FS,
	RunFlags: opts.BindFlags,
	Setup: func(mgr ctrl.Manager) error {
		_, err := controller.Setup(mgr, opts)
		return err
	},
}
