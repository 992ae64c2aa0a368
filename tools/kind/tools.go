// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build tools

// Package kind pins the Kubernetes binaries of a kind node image: tools/controlplane's imports and
// versions (so the packages they share are compiled once, and reused from the build cache) plus
// kubeadm and kubectl. e2e/kindnode builds them.
package kind

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
	_ "k8s.io/kubernetes/cmd/kubeadm"
	_ "k8s.io/kubernetes/cmd/kubectl"
	_ "k8s.io/kubernetes/cmd/kubelet"
	_ "sigs.k8s.io/kwok/cmd/kwok"
)
