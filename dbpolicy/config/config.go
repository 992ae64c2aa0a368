// Package config declares the pattern (Pattern) and holds its generated manifests (FS) —
// controller-gen writes them from the markers: webhook — so the binary and any composition of
// patterns (app.Compose) use exactly what was generated.
package config

import (
	"embed"

	"github.com/kpatterns/kpatterns/dbpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/app"
)

// FS holds webhook/.
//
//go:embed webhook
var FS embed.FS

// Pattern declares the pattern to shared/app: its main.go runs it, and app.Compose composes it.
var Pattern = app.Pattern{
	Name:          webhook.Name,
	Config:        FS,
	Webhooks:      webhook.Setup,
	AdmissionOnly: true,
}
