// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package kindnode

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"sigs.k8s.io/kind/pkg/apis/config/defaults"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// ImageEnv names a node image to use as it is.
const ImageEnv = "KPATTERNS_KIND_IMAGE"

// Image returns the node image for a kind cluster: $KPATTERNS_KIND_IMAGE; else kind's own
// default (kindest/node) where it is present or the registry can be reached; else one built here
// (Build), cached in the engine by version. No pull is tried where the registry's name does not
// even resolve.
func Image(ctx context.Context, root string, env []string) (string, error) {
	if img := os.Getenv(ImageEnv); img != "" {
		return img, nil
	}
	release := defaults.Image
	if docker(ctx, env, "image", "inspect", release) == nil {
		return release, nil
	}
	if registryResolves(ctx) {
		if err := docker(ctx, env, "pull", release); err == nil {
			return release, nil
		} else {
			_, _ = fmt.Fprintf(controlplane.Progress, "kind: %v; building a node image here instead\n", err)
		}
	}
	return Build(ctx, root, env)
}

func registryResolves(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	_, err := net.DefaultResolver.LookupHost(ctx, "registry-1.docker.io")
	return err == nil
}

// Config is the kind cluster configuration for this machine: one control-plane node, the
// feature gate the sharding pattern's server mode needs and kube-apiserver calling webhooks at
// their Pods' addresses (--enable-aggregator-routing), the admission plugins
// localcluster.OnFakeNode needs, all as on the local cluster, a kubelet
// that syncs every 10 s (a Secret's new certificate reaches its volume within seconds, as on
// the local cluster's real node, not a minute); on a host with cgroup v1, the kubelet told to run
// there (Kubernetes 1.35+ refuses by default); where the host's capability bounding set lacks
// CAP_SYS_RESOURCE (as in the engine's capruntime), the node's containerd told not to lower its
// containers' OOM score below its own; and containerd's registry hosts read from
// /etc/containerd/certs.d (a local registry: registry.ConfigureKind).
func Config() (string, error) {
	var b strings.Builder
	b.WriteString("kind: Cluster\napiVersion: kind.x-k8s.io/v1alpha4\nnodes:\n- role: control-plane\n")
	b.WriteString("featureGates:\n  ShardedListAndWatch: true\n")
	b.WriteString("kubeadmConfigPatchesJSON6902:\n- group: kubeadm.k8s.io\n  version: v1beta4\n  kind: ClusterConfiguration\n" +
		"  patch: |\n    - op: add\n      path: /apiServer/extraArgs/-\n      value: {name: enable-aggregator-routing, value: \"true\"}\n" +
		"    - op: add\n      path: /apiServer/extraArgs/-\n      value: {name: enable-admission-plugins, value: \"NodeRestriction," + localcluster.AdmissionPlugins + "\"}\n")
	b.WriteString("kubeadmConfigPatches:\n- |\n  kind: KubeletConfiguration\n  syncFrequency: 10s\n")
	if _, err := os.Stat("/sys/fs/cgroup/cgroup.controllers"); os.IsNotExist(err) {
		b.WriteString("  failCgroupV1: false\n")
	}
	missing, err := dockerd.MissingCaps()
	if err != nil {
		return "", err
	}
	b.WriteString("containerdConfigPatches:\n- |\n")
	if missing["CAP_SYS_RESOURCE"] {
		b.WriteString("  [plugins.\"io.containerd.grpc.v1.cri\"]\n    restrict_oom_score_adj = true\n")
	}
	// Registry hosts from certs.d, where registry.ConfigureKind writes the local registry's.
	b.WriteString("  [plugins.\"io.containerd.grpc.v1.cri\".registry]\n    config_path = \"/etc/containerd/certs.d\"\n")
	return b.String(), nil
}

// Gateway is the IPv4 gateway of kind's Docker network: this machine's address as kind's nodes
// and Pods reach it (to serve webhooks, a PostgreSQL, a registry from here). env is the Docker
// client's environment (DOCKER_HOST).
func Gateway(ctx context.Context, env []string) (string, error) {
	gw, err := dockerd.Docker(ctx, env, "network", "inspect", "kind", "--format", "{{range .IPAM.Config}}{{.Gateway}} {{end}}")
	if err != nil {
		return "", err
	}
	for _, ip := range strings.Fields(gw) {
		if !strings.Contains(ip, ":") {
			return ip, nil
		}
	}
	return "", fmt.Errorf("kind's Docker network has no IPv4 gateway (%q)", gw)
}

// Binary builds kind (the tools module's version) into the cache and returns its path.
func Binary(ctx context.Context, root string) (string, error) {
	dir, err := controlplane.CacheDir("bin")
	if err != nil {
		return "", err
	}
	version, err := exec.CommandContext(ctx, "go", "list", "-C", filepath.Join(root, "tools"), "-m", "-f", "{{.Version}}", "sigs.k8s.io/kind").Output()
	if err != nil {
		return "", fmt.Errorf("kind's version in tools/go.mod: %w", err)
	}
	out := filepath.Join(dir, "kind-"+strings.TrimSpace(string(version)))
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "sigs.k8s.io/kind")
	cmd.Dir = filepath.Join(root, "tools")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building kind: %w: %s", err, b)
	}
	return out, nil
}

// PodAndServiceRanges are kind's defaults: its pod subnet and its Service range.
var PodAndServiceRanges = []string{"10.244.0.0/16", "10.96.0.0/16"}

// RouteThroughNode routes this machine's own traffic to the kind cluster's Pod and Service
// ranges through its node (named as docker names the container), as the local cluster routes its
// Pods' range through the real node's link: a test that dials a Pod's address reaches it, and
// nothing sent to those ranges follows the default route off the machine. The returned function
// removes the routes.
func RouteThroughNode(ctx context.Context, env []string, node string) (func() error, error) {
	cmd := exec.CommandContext(ctx, "docker", "inspect", "--format", "{{range .NetworkSettings.Networks}}{{.IPAddress}} {{end}}", node)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("docker inspect %s: %w", node, err)
	}
	fields := strings.Fields(string(out))
	if len(fields) == 0 {
		return nil, fmt.Errorf("%s has no address", node)
	}
	var added []string
	undo := func() error {
		var errs []error
		for _, r := range added {
			if err := run(context.Background(), "ip", "route", "del", r); err != nil {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for _, r := range PodAndServiceRanges {
		if err := run(ctx, "ip", "route", "replace", r, "via", fields[0]); err != nil {
			return nil, errors.Join(err, undo())
		}
		added = append(added, r)
	}
	return undo, nil
}
