// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/kpatterns/kpatterns/e2e/kindnode"
	"github.com/kpatterns/kpatterns/e2e/registry"
)

// pulledFromRegistry pushes mirror's image (the deploy tier's OCI layout) to a registry served on
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
	idx, err := layout.ImageIndexFromPath(filepath.Join(bins, "images", "mirror"))
	if err != nil {
		t.Fatal(err)
	}
	ref := fmt.Sprintf("localhost:%d/kpatterns/mirror:%s", port, envconf.RandomName("pull", 10))
	tag, err := name.NewTag(ref)
	if err != nil {
		t.Fatal(err)
	}
	if err := remote.WriteIndex(tag, idx, remote.WithContext(ctx)); err != nil {
		t.Fatal(err)
	}
	c := clientFor(t, cfg)
	// In the operator namespace (Pod Security "restricted"), whose Pods run on the node that runs
	// containers, not on kwok's.
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pulled", Namespace: deployedNamespace}, Spec: corev1.PodSpec{
		RestartPolicy: corev1.RestartPolicyNever,
		Containers: []corev1.Container{{Name: "mirror", Image: ref, ImagePullPolicy: corev1.PullAlways, Args: []string{"manifests"},
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
