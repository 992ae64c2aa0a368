// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package crictl pins crictl (cri-tools) for the kind node image: kind's image loading asks it
// for image IDs. A module of its own, so its dependencies do not move the control plane's.
package crictl

import _ "sigs.k8s.io/cri-tools/cmd/crictl"
