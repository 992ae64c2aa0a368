// Package config holds the pattern's generated manifests — controller-gen writes them from the
// markers: crd, rbac — embedded, so the binary and any composition of patterns
// (app.Compose) carry exactly what was generated.
package config

import "embed"

// FS holds crd/, rbac/.
//
//go:embed crd rbac
var FS embed.FS
