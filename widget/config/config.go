// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config holds the pattern's manifests (FS), which controller-gen generates from the
// markers (crd, rbac, webhook), and declares them (Pattern): the binary and any composition of patterns
// (app.Compose) render exactly what was generated.
package config

import (
	"embed"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/widget/controller"
)

// FS holds crd/, rbac/, webhook/ (generated), policy/ (the admission rules as admission policies,
// written by hand) and samples/ (a Widget, as the demo applies it).
//
//go:embed crd rbac webhook policy samples
var FS embed.FS

// Pattern is what `manifests` and `install` render (and app.Compose composes).
var Pattern = app.Pattern{Name: controller.Name, Config: FS}
