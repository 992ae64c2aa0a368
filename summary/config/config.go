// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config holds the pattern's manifests (FS), which controller-gen generates from the
// markers (crd, rbac), and declares them (Pattern): the binary and any composition of patterns
// (app.Compose) render exactly what was generated.
package config

import (
	"embed"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/summary/controller"
)

// FS holds crd/ and rbac/ (generated) and samples/ (an object of each kind, as the demo applies it).
//
//go:embed crd rbac samples
var FS embed.FS

// Pattern is what `manifests` and `install` render (and app.Compose composes).
var Pattern = app.Pattern{Name: controller.Name, Config: FS}
