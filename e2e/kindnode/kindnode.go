// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kindnode builds a kind node image for the control plane's Kubernetes version where
// kindest/node cannot be pulled, from Debian's packages and Go modules alone, laid out as kind's
// images/base and pkg/build/nodeimage lay it out:
//
//   - a Debian root filesystem (debootstrap, systemd) with kind's base files (its entrypoint,
//     systemd units, containerd and kubelet configuration), read from the kind module in the Go
//     module cache;
//   - containerd, runc and the CNI plugins of the local cluster's real node, crictl, and kubeadm,
//     kubelet and kubectl at the release's version;
//   - every image `kubeadm config images list` names (kube-apiserver, kube-controller-manager,
//     kube-scheduler, kube-proxy, etcd, CoreDNS, pause), made here from binaries built from their
//     modules and imported into the node's containerd, as kind preloads them. Build fails if one
//     is missing: kind would start a node that cannot run its control plane.
//
// Its network is the CNI bridge plugin with the pod range of kind's one node (kindnetd is not
// served as a Go module), written in the image; /kind/manifests/default-cni.yaml says so.
package kindnode

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// Repository is where the built images are tagged: Repository:v<version>-<key>.
const Repository = "kpatterns/kind-node"

// Release is the kindest/node image a user's machine pulls for this version.
const Release = "kindest/node:v" + controlplane.KubernetesVersion

// layout changes the key of every cached image when this builder changes what it writes.
const layout = "4"

// Build returns a node image in the Docker engine that env reaches (docker's environment),
// building it if this version is not there yet. root is the repository root.
func Build(ctx context.Context, root string, env []string) (string, error) {
	bins := map[string]string{}
	for _, s := range []controlplane.Set{localcluster.ControlPlane, localcluster.NodeSet, KubeSet, ExtrasSet} {
		dir, err := controlplane.EnsureSet(ctx, s)
		if err != nil {
			return "", err
		}
		for _, b := range s.Binaries {
			if _, ok := bins[b]; !ok {
				bins[b] = filepath.Join(dir, b)
			}
		}
	}
	base, err := baseRootfs(ctx)
	if err != nil {
		return "", err
	}
	kindDir, err := moduleDir(ctx, root, "sigs.k8s.io/kind")
	if err != nil {
		return "", err
	}
	h := sha256.New()
	_, _ = fmt.Fprintln(h, layout, base, kindDir)
	for _, k := range sortedKeys(bins) {
		_, _ = fmt.Fprintln(h, k, bins[k]) // each set's directory is named after its versions
	}
	tag := fmt.Sprintf("%s:v%s-%s", Repository, controlplane.KubernetesVersion, hex.EncodeToString(h.Sum(nil))[:12])
	if docker(ctx, env, "image", "inspect", tag) == nil {
		return tag, nil
	}
	start := time.Now()
	_, _ = fmt.Fprintf(controlplane.Progress, "kindnode: building %s once for this version\n", tag)
	work, err := os.MkdirTemp("", "kpatterns-kindnode-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(work) }()
	rootfs := filepath.Join(work, "rootfs")
	if err := os.Mkdir(rootfs, 0o755); err != nil {
		return "", err
	}
	if err := run(ctx, "tar", "--numeric-owner", "-C", rootfs, "-xf", base); err != nil {
		return "", err
	}
	if err := layoutBase(ctx, rootfs, filepath.Join(kindDir, "images", "base", "files")); err != nil {
		return "", err
	}
	if err := installBinaries(ctx, rootfs, bins); err != nil {
		return "", err
	}
	required, err := preloadImages(ctx, root, work, rootfs, base, bins)
	if err != nil {
		return "", err
	}
	_, _ = fmt.Fprintf(controlplane.Progress, "kindnode: %d images preloaded: %s\n", len(required), strings.Join(required, ", "))
	if err := load(ctx, env, work, rootfs, tag); err != nil {
		return "", err
	}
	_, _ = fmt.Fprintf(controlplane.Progress, "kindnode: %s built in %s\n", tag, time.Since(start).Round(time.Second))
	return tag, nil
}

// layoutBase does what kind's images/base Dockerfile does to the Debian base: its files, the
// units it enables and the ones it removes, and the directories kubeadm expects.
func layoutBase(ctx context.Context, rootfs, files string) error {
	copies := []struct {
		from, to string
		mode     os.FileMode
	}{
		{"usr/local/bin", "usr/local/bin", 0o755},
		{"kind", "kind", 0o644},
		{"kind/bin", "kind/bin", 0o755},
		{"etc", "etc", 0o644},
	}
	for _, c := range copies {
		if err := copyTree(filepath.Join(files, c.from), filepath.Join(rootfs, c.to), c.mode); err != nil {
			return err
		}
	}
	script := `set -e
find /lib/systemd/system/sysinit.target.wants/ -name systemd-tmpfiles-setup.service -delete
rm -f /lib/systemd/system/multi-user.target.wants/* /etc/systemd/system/*.wants/* /lib/systemd/system/local-fs.target.wants/* \
  /lib/systemd/system/sockets.target.wants/*udev* /lib/systemd/system/sockets.target.wants/*initctl* /lib/systemd/system/basic.target.wants/*
echo ReadKMsg=no >> /etc/systemd/journald.conf
systemctl enable kubelet.service containerd.service undo-mount-hacks.service
systemctl mask systemd-binfmt.service
mkdir -p /etc/kubernetes/manifests /opt/cni/bin /etc/cni/net.d /kind/manifests
`
	return run(ctx, "chroot", rootfs, "/bin/sh", "-c", script)
}

// installBinaries puts each binary where kind's images put it, and writes the files derived from
// them: containerd's base runtime spec (`ctr oci spec`, as kind's Dockerfile makes it), the
// version, the network.
func installBinaries(ctx context.Context, rootfs string, bins map[string]string) error {
	places := map[string]string{
		"containerd": "usr/local/bin", "containerd-shim-runc-v2": "usr/local/bin", "ctr": "usr/local/bin", "crictl": "usr/local/bin",
		"runc": "usr/local/sbin", "kubeadm": "usr/bin", "kubelet": "usr/bin", "kubectl": "usr/bin",
		"bridge": "opt/cni/bin", "host-local": "opt/cni/bin", "loopback": "opt/cni/bin", "portmap": "opt/cni/bin",
	}
	for name, dir := range places {
		if err := copyFile(bins[name], filepath.Join(rootfs, dir, name), 0o755); err != nil {
			return err
		}
	}
	spec, err := exec.CommandContext(ctx, bins["ctr"], "oci", "spec").Output()
	if err != nil {
		return fmt.Errorf("ctr oci spec: %w", err)
	}
	if spec, err = criBaseSpec(spec); err != nil {
		return err
	}
	files := map[string]string{
		"etc/containerd/cri-base.json":        string(spec),
		"kind/version":                        "v" + controlplane.KubernetesVersion,
		"etc/cni/net.d/10-kpatterns.conflist": cniConfig,
		"kind/manifests/default-cni.yaml":     placeholder("default-cni", "the node's network is the CNI bridge in /etc/cni/net.d of the image (one node; kindnetd is not built here)"),
		"kind/manifests/default-storage.yaml": placeholder("default-storage", "no default StorageClass: local-path-provisioner is not built here"),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(rootfs, name), []byte(content), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// criBaseSpec is kind's edit of `ctr oci spec`: product files mounted by a createContainer hook,
// no rlimits.
func criBaseSpec(spec []byte) ([]byte, error) {
	var doc map[string]any
	if err := json.Unmarshal(spec, &doc); err != nil {
		return nil, fmt.Errorf("ctr oci spec: %w", err)
	}
	hooks, _ := doc["hooks"].(map[string]any)
	if hooks == nil {
		hooks = map[string]any{}
	}
	create, _ := hooks["createContainer"].([]any)
	hooks["createContainer"] = append(create, map[string]any{"path": "/kind/bin/mount-product-files.sh"})
	doc["hooks"] = hooks
	if p, ok := doc["process"].(map[string]any); ok {
		delete(p, "rlimits")
	}
	return json.MarshalIndent(doc, "", "  ")
}

// cniConfig is the one node's network: kind's pod subnet's first /24, which the node controller
// gives kind's single node; what leaves the pod range is masqueraded to the node's address (as
// kindnetd does), so the host answers a Pod through the node.
const cniConfig = `{
  "cniVersion": "1.0.0",
  "name": "kpatterns",
  "plugins": [
    {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": true, "hairpinMode": true,
     "ipam": {"type": "host-local", "ranges": [[{"subnet": "10.244.0.0/24"}]], "routes": [{"dst": "0.0.0.0/0"}]}},
    {"type": "portmap", "capabilities": {"portMappings": true}}
  ]
}
`

// placeholder is a manifest kind applies where it expects its default network or storage: a
// ConfigMap in kube-system that says what this image does instead.
func placeholder(name, note string) string {
	return fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: kpatterns-%s\n  namespace: kube-system\ndata:\n  note: %q\n", name, note)
}

// moduleDir is a module's directory in the module cache, as the tools module requires it.
func moduleDir(ctx context.Context, root, module string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Dir}}", module)
	cmd.Dir = filepath.Join(root, "tools")
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go list -m %s: %w", module, err)
	}
	return strings.TrimSpace(string(out)), nil
}

func docker(ctx context.Context, env []string, args ...string) error {
	_, err := dockerd.Docker(ctx, env, args...)
	return err
}
