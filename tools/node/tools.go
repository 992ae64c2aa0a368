// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package node pins the local cluster's real node: containerd v2 (with its runc shim and ctr),
// runc, and the CNI plugins it uses. kubelet and kube-proxy come from tools/controlplane, the
// control plane's own Kubernetes version. e2e/localcluster builds them once per version.
package node

import (
	_ "github.com/containerd/containerd/v2/cmd/containerd"
	_ "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2"
	_ "github.com/containerd/containerd/v2/cmd/ctr"
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
	_ "github.com/opencontainers/runc"
)
