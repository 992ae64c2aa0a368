// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// TestPodSecurityRestricted installs every pattern's Deployment (`install --image`) into a
// namespace that enforces the Pod Security "restricted" profile and checks, through the real API
// server's PodSecurity admission, that the ReplicaSet controller's Pods are admitted: each
// ReplicaSet has its Pod and no FailedCreate event exists. The webhook patterns' configurations
// are deleted right after install (nothing serves them here). Installing into another namespace
// re-points the patterns' cluster-scoped bindings there, so the teardown installs every pattern
// back into the operator namespace: the tests after this one find the cluster as before it.
// Local cluster only: kwok runs the Pods, so no image needs to exist.
func TestPodSecurityRestricted(t *testing.T) {
	if kindRun {
		t.Skip("the local cluster's kwok runs the Pods without pulling images")
	}
	const ns = "e2e-restricted"
	f := features.New("pod security").
		Assess("every pattern's Pods are admitted under restricted", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns, Labels: map[string]string{
				"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}})
			if err != nil {
				t.Fatal(err)
			}
			for _, p := range patterns {
				cmd := command(ctx, root, filepath.Join(bins, p), "install", "--image", image(p))
				cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile(), "KPATTERNS_NAMESPACE="+ns)
				if err := cmd.Run(); err != nil {
					t.Fatalf("%s install --image: %v", p, err)
				}
				removeWebhooks(ctx, t, cfg, p)
			}
			waitFor(t, "a Pod for every pattern's Deployment", func(ctx context.Context) (bool, error) {
				if refused := refusedPods(ctx, t, c, ns); refused != "" {
					return false, errors.New(refused)
				}
				list := &appsv1.ReplicaSetList{}
				if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
					return false, err
				}
				if len(list.Items) < len(patterns) {
					return false, nil
				}
				return !slices.ContainsFunc(list.Items, func(rs appsv1.ReplicaSet) bool { return rs.Status.Replicas < *rs.Spec.Replicas }), nil
			})
			if refused := refusedPods(ctx, t, c, ns); refused != "" {
				t.Error(refused)
			}
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			t.Logf("%d Pods of %d patterns admitted under restricted", len(pods.Items), len(patterns))
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			for _, p := range patterns {
				installPattern(ctx, t, cfg, p)
				removeWebhooks(ctx, t, cfg, p)
			}
			return ctx
		})
	testEnv.Test(t, f.Feature())
}

// refusedPods describes the FailedCreate events of ns ("" if none).
func refusedPods(ctx context.Context, t *testing.T, c client.Client, ns string) string {
	t.Helper()
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, e := range events.Items {
		if e.Reason == "FailedCreate" || strings.Contains(e.Message, "violates PodSecurity") {
			refused = append(refused, e.InvolvedObject.Name+": "+e.Message)
		}
	}
	return strings.Join(refused, "\n")
}
