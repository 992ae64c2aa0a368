// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/kpatterns/kpatterns/e2e/kindnode"
	"github.com/kpatterns/kpatterns/e2e/registry"
)

// pulledPattern is the pattern whose image the registry check pushes: built by e2e/cmd/image
// into an OCI layout on kind and the real node alike (mirror's, on kind, comes from the Dockerfile).
const pulledPattern = "summary"

// pulledFromRegistry pushes pulledPattern's image (distinctImage) to a registry served on
// this machine, as go tool task registry:up serves it, under a tag no node holds, and runs it as
// a Pod: the node pulls it — the local cluster's real node from localhost, kind's node through
// the hosts.toml registry.ConfigureKind writes, as for registry:up.
func pulledFromRegistry(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	addrs := []string{fmt.Sprintf("127.0.0.1:%d", port)}
	var gateway string
	if kindRun {
		if gateway, err = kindnode.Gateway(ctx, os.Environ()); err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, fmt.Sprintf("%s:%d", gateway, port))
	}
	srv, err := registry.Start(t.TempDir(), addrs...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	if kindRun {
		if err := registry.ConfigureKind(ctx, os.Environ(), clusterName, gateway, port); err != nil {
			t.Fatal(err)
		}
	}
	ref := fmt.Sprintf("localhost:%d/kpatterns/%s:%s", port, pulledPattern, envconf.RandomName("pull", 10))
	img, err := distinctImage(filepath.Join(bins, "images", pulledPattern), ref)
	if err != nil {
		t.Fatal(err)
	}
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.Write(tag, img, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	c := clientFor(t, cfg)
	// In the operator namespace (Pod Security "restricted"), whose Pods run on the node that runs
	// containers, not on kwok's.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pulled", Namespace: deployedNamespace}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: pulledPattern, Image: ref, ImagePullPolicy: corev1.PullAlways, Args: []string{"manifests"},
			SecurityContext: &corev1.SecurityContext{RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532), AllowPrivilegeEscalation: ptr.To(false),
				Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}}}},
	}}
	if err := c.Create(ctx, pod); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Delete(context.Background(), pod) }()
	waitFor(t, "the Pod of "+ref+" succeeded", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(pod), pod); err != nil {
			return false, err
		}
		if pod.Status.Phase == corev1.PodFailed {
			return false, fmt.Errorf("the Pod failed: %+v", pod.Status.ContainerStatuses)
		}
		return pod.Status.Phase == corev1.PodSucceeded, nil
	})
}

// distinctImage is this machine's platform image of the OCI layout at dir with a label naming ref
// added to its config: another image ID than the one loaded for the deploy tier, so the kubelet's
// image garbage collection of the pulled image (unused once its Pod is gone) cannot remove that
// one with it.
func distinctImage(dir, ref string) (v1.Image, error) {
	idx, err := layout.ImageIndexFromPath(dir)
	if err != nil {
		return nil, err
	}
	m, err := idx.IndexManifest()
	if err != nil {
		return nil, err
	}
	for _, d := range m.Manifests {
		if d.Platform == nil || d.Platform.OS != "linux" || d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		img, err := idx.Image(d.Digest)
		if err != nil {
			return nil, err
		}
		cf, err := img.ConfigFile()
		if err != nil {
			return nil, err
		}
		cf = cf.DeepCopy()
		if cf.Config.Labels == nil {
			cf.Config.Labels = map[string]string{}
		}
		cf.Config.Labels["dev.kpatterns.e2e.pulled"] = ref
		return mutate.ConfigFile(img, cf)
	}
	return nil, fmt.Errorf("%s holds no linux/%s image", dir, runtime.GOARCH)
}
