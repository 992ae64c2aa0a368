// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package coredns pins CoreDNS at the version kubeadm deploys for the control plane's Kubernetes
// version (`kubeadm config images list`), for the kind node image. A module of its own, so its
// dependencies do not move the control plane's.
package coredns

import _ "github.com/coredns/coredns"
