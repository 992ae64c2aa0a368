// Package config holds the pattern's generated manifests — controller-gen writes them from the
// markers: rbac, webhook — embedded, so the binary and any composition of patterns
// (app.Compose) carry exactly what was generated.
package config

import "embed"

// FS holds rbac/, webhook/.
//
//go:embed rbac webhook
var FS embed.FS
