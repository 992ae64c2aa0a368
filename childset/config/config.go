// Package config declares the pattern (Pattern) and holds its generated manifests (FS) —
// controller-gen writes them from the markers: crd, rbac — so the binary and any composition of
// patterns (app.Compose) use exactly what was generated.
package config

import (
	"embed"

	"github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	"github.com/kpatterns/kpatterns/childset/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

// FS holds crd/, rbac/.
//
//go:embed crd rbac
var FS embed.FS

// Pattern declares the pattern to shared/app: its main.go runs it, and app.Compose composes it.
var Pattern = app.Pattern{
	Name:        controller.Name,
	Config:      FS,
	AddToScheme: v1alpha1.AddToScheme,
	Cache:       controller.CacheOptions,
	Setup:       controller.Setup,
}
