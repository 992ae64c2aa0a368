// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	"github.com/kpatterns/kpatterns/shared/digest"
)

func TestConditional(t *testing.T) {
	ns := envconf.RandomName("conditional", 16)
	key := client.ObjectKey{Namespace: ns, Name: "profile"}
	// readyOn waits for the profile to be Ready on a case, and returns the digest it rolled out.
	readyOn := func(ctx context.Context, t *testing.T, c client.Client, matched string) string {
		t.Helper()
		p := &v1alpha1.ConfigProfile{}
		waitFor(t, "Ready on case "+matched, func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, key, p); err != nil {
				return false, err
			}
			return p.Status.MatchedCase == matched && p.Status.ObservedGeneration == p.Generation &&
				meta.IsStatusConditionTrue(p.Status.Conditions, "Ready"), nil
		})
		return p.Status.ConfigDigest
	}
	replicaSets := func(ctx context.Context, t *testing.T, c client.Client) map[string]string {
		t.Helper()
		list := &appsv1.ReplicaSetList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": key.Name}); err != nil {
			t.Fatal(err)
		}
		digests := map[string]string{}
		for _, rs := range list.Items {
			digests[rs.Name] = rs.Spec.Template.Annotations[digest.Annotation]
		}
		return digests
	}

	f := withPattern(features.New("conditional"), "conditional", ns).
		Assess("a case switch rolls the Pods: a new ReplicaSet with the new digest", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			p := &v1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns},
				Spec: v1alpha1.ConfigProfileSpec{Image: "nginx:1.27", Environment: "staging"}}
			if err := c.Create(ctx, p); err != nil {
				t.Fatal(err)
			}
			first := readyOn(ctx, t, c, "default")
			if rs := replicaSets(ctx, t, c); len(rs) != 1 {
				t.Fatalf("ReplicaSets %v, want one", rs)
			}
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := c.Get(ctx, key, p); err != nil {
					return err
				}
				p.Spec.Environment = "production"
				return c.Update(ctx, p)
			})
			if err != nil {
				t.Fatal(err)
			}
			second := readyOn(ctx, t, c, "production")
			if second == first {
				t.Fatal("the digest did not change with the case")
			}
			rs := replicaSets(ctx, t, c)
			found := map[string]bool{}
			for _, d := range rs {
				found[d] = true
			}
			if len(rs) != 2 || !found[first] || !found[second] {
				t.Fatalf("ReplicaSets %v, want one per digest (%s, %s)", rs, first, second)
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
