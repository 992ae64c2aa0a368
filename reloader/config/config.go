// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config holds the pattern's manifests (FS), which controller-gen generates from the
// markers (rbac), and declares them (Pattern): the binary and any composition of patterns
// (app.Compose) render exactly what was generated.
package config

import (
	"embed"

	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

// FS holds rbac/: role.yaml (generated) and features.yaml (the rules of --with argo-rollouts and
// --with namespace-selector, written by hand).
//
//go:embed rbac
var FS embed.FS

// Pattern is what `manifests` and `install` render (and app.Compose composes).
var Pattern = app.Pattern{Name: controller.Name, Config: FS, Features: []app.Feature{controller.ArgoRolloutsFeature, controller.NamespaceSelectorFeature}}
