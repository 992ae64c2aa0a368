// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package config holds the pattern's manifests: mirror's (it runs mirror's controller) and its
// own RBAC rule, which controller-gen generates from the markers (rbac), composed (Pattern).
package config

import (
	"embed"

	mirrorconfig "github.com/kpatterns/kpatterns/mirror/config"
	"github.com/kpatterns/kpatterns/sharding/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

// FS holds rbac/: the sharder's rule.
//
//go:embed rbac
var FS embed.FS

// Own is the pattern's own files; Pattern is what `manifests` and `install` render: mirror's
// rules and the sharder's in one ClusterRole.
var (
	Own     = app.Pattern{Name: controller.Name, Config: FS}
	Pattern = func() app.Pattern {
		p, err := app.Compose(controller.Name, mirrorconfig.Pattern, Own)
		if err != nil {
			panic(err) // constant input: neither serves webhooks
		}
		return p
	}()
)
