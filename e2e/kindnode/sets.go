// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package kindnode

import (
	"context"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// versionFlags give a module build the version a release build reports (kubeadm, kubelet and
// kube-apiserver compare theirs).
const versionFlags = "-ldflags=-X k8s.io/component-base/version.gitVersion=v" + controlplane.KubernetesVersion +
	" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"

// kubeBinaries are the node's Kubernetes binaries and the control plane's images' binaries.
var kubeBinaries = []string{"kubeadm", "kubectl", "kubelet", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kube-proxy"}

// KubeSet is kubeadm, kubectl and the Kubernetes components at the release's version, built from
// tools/kind (tools/controlplane's versions: only the link step differs from its build).
var KubeSet = controlplane.Set{
	Name: "kind-k8s-v" + controlplane.KubernetesVersion, Modules: []string{"tools/kind"}, Binaries: kubeBinaries,
	Build: func(ctx context.Context, b *controlplane.Builder) error {
		args := []string{"build", "-trimpath", versionFlags, "-o", b.Out + "/"}
		for _, name := range kubeBinaries {
			args = append(args, "k8s.io/kubernetes/cmd/"+name)
		}
		return b.Go(ctx, "kubeadm, kubectl, kubelet, kube-apiserver, kube-controller-manager, kube-scheduler, kube-proxy", "tools/kind", nil, args...)
	},
}

// ExtrasSet is CoreDNS (the version kubeadm deploys, with the plugins tools/coredns/main.go names)
// and crictl (which `kind load` asks for image IDs), each from a module of its own.
var ExtrasSet = controlplane.Set{
	Name: "kind-extras", Modules: []string{"tools/coredns", "tools/crictl"}, Sources: []string{"tools/coredns/main.go"},
	Binaries: []string{"coredns", "crictl"},
	Build: func(ctx context.Context, b *controlplane.Builder) error {
		if err := b.Go(ctx, "coredns", "tools/coredns", nil, "build", "-trimpath", "-o", b.Path("coredns"), "."); err != nil {
			return err
		}
		return b.Go(ctx, "crictl", "tools/crictl", nil, "build", "-trimpath", "-o", b.Path("crictl"), "sigs.k8s.io/cri-tools/cmd/crictl")
	},
}
