// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/kpatterns/kpatterns/e2e/assets"
	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// ControlPlane is the control plane's set, downloaded where it can be: etcd and kube-apiserver
// from setup-envtest's index (as integration tests get them), kube-controller-manager,
// kube-scheduler and kwok from their projects' releases (Releases); built from Go modules where a
// download fails.
var ControlPlane = func() controlplane.Set {
	s := controlplane.ControlPlane
	s.Download = func(ctx context.Context, b *controlplane.Builder) error {
		if err := assets.EnvtestInto(ctx, b.Out); err != nil {
			return err
		}
		return fetchReleases(ctx, b, s.Binaries)
	}
	return s
}()

// Kwok is kwok alone (what a kind cluster runs beside its nodes), downloaded from kwok's release
// where it can be.
var Kwok = func() controlplane.Set {
	s := controlplane.Kwok
	s.Download = func(ctx context.Context, b *controlplane.Builder) error { return fetchReleases(ctx, b, s.Binaries) }
	return s
}()

// fetchReleases downloads into b.Out the release files (Releases) that hold any of binaries.
func fetchReleases(ctx context.Context, b *controlplane.Builder, binaries []string) error {
	all, err := Releases(b.Root)
	if err != nil {
		return err
	}
	var want []assets.Asset
	for _, a := range all {
		for _, name := range binaries {
			if _, ok := a.Binaries[name]; ok {
				want = append(want, a)
				break
			}
		}
	}
	return assets.FetchReleases(ctx, b.Out, want...)
}

// Releases are the released files of what the control plane's set and the node's set hold beside
// setup-envtest's binaries, at the versions the build modules under root pin: Kubernetes'
// binaries from dl.k8s.io, kwok, containerd, runc and the CNI plugins from their GitHub releases.
// Each has its SHA-256 checked but kwok's, which kwok does not publish.
func Releases(root string) ([]assets.Asset, error) {
	var err error
	v := map[string]string{}
	for _, m := range []struct{ module, path string }{
		{"tools/controlplane", "sigs.k8s.io/kwok"},
		{"tools/node", "github.com/containerd/containerd/v2"},
		{"tools/node", "github.com/opencontainers/runc"},
		{"tools/node", "github.com/containernetworking/plugins"},
	} {
		if v[m.path], err = moduleVersion(filepath.Join(root, m.module, "go.mod"), m.path); err != nil {
			return nil, err
		}
	}
	arch := runtime.GOARCH
	k8s := func(name string) assets.Asset {
		u := fmt.Sprintf("%s/release/v%s/bin/linux/%s/%s", assets.KubernetesReleases, controlplane.KubernetesVersion, arch, name)
		return assets.Asset{URL: u, Sum: u + ".sha256", Binaries: map[string]string{name: ""}}
	}
	gh := func(repo, version, file string) string {
		return fmt.Sprintf("%s/%s/releases/download/%s/%s", assets.GitHub, repo, version, file)
	}
	kwok, runc := v["sigs.k8s.io/kwok"], v["github.com/opencontainers/runc"]
	containerd, cni := v["github.com/containerd/containerd/v2"], v["github.com/containernetworking/plugins"]
	containerdTar := gh("containerd/containerd", containerd, fmt.Sprintf("containerd-static-%s-linux-%s.tar.gz", strings.TrimPrefix(containerd, "v"), arch))
	cniTar := gh("containernetworking/plugins", cni, fmt.Sprintf("cni-plugins-linux-%s-%s.tgz", arch, cni))
	return []assets.Asset{
		k8s("kube-controller-manager"), k8s("kube-scheduler"), k8s("kubelet"), k8s("kube-proxy"),
		{URL: gh("kubernetes-sigs/kwok", kwok, "kwok-linux-"+arch), Binaries: map[string]string{"kwok": ""}},
		{URL: containerdTar, Sum: containerdTar + ".sha256sum",
			Binaries: map[string]string{"containerd": "bin/containerd", "containerd-shim-runc-v2": "bin/containerd-shim-runc-v2", "ctr": "bin/ctr"}},
		{URL: gh("opencontainers/runc", runc, "runc."+arch), Sum: gh("opencontainers/runc", runc, "runc.sha256sum"),
			Binaries: map[string]string{"runc": ""}},
		{URL: cniTar, Sum: cniTar + ".sha256",
			Binaries: map[string]string{"bridge": "bridge", "host-local": "host-local", "loopback": "loopback", "portmap": "portmap"}},
	}, nil
}

// moduleVersion is the version the go.mod at path requires of module.
func moduleVersion(gomod, module string) (string, error) {
	b, err := os.ReadFile(gomod)
	if err != nil {
		return "", err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		f := strings.Fields(strings.TrimPrefix(strings.TrimSpace(line), "require "))
		if len(f) >= 2 && f[0] == module {
			return f[1], nil
		}
	}
	return "", fmt.Errorf("%s requires no %s", gomod, module)
}
