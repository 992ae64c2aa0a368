// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config holds the pattern's manifests (FS), which controller-gen generates from the
// markers (webhook), and declares them (Pattern): the binary and any composition of patterns
// (app.Compose) render exactly what was generated.
package config

import (
	"embed"

	"github.com/kpatterns/kpatterns/dbpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/app"
)

// FS holds webhook/ and policy/ (the rules as an admission policy, written by hand).
//
//go:embed webhook policy
var FS embed.FS

// Pattern is what `manifests` and `install` render (and app.Compose composes).
var Pattern = app.Pattern{Name: webhook.Name, Config: FS,
	AdmissionOnly: true}
