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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/summary/api/v1alpha1"
)

func TestSummary(t *testing.T) {
	ns := envconf.RandomName("summary", 16)
	key := client.ObjectKey{Namespace: ns, Name: "web"}
	summarized := func(t *testing.T, c client.Client, n int32) {
		t.Helper()
		w := &v1alpha1.Workload{}
		waitFor(t, "a summary of the Pods", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, key, w); err != nil {
				return false, err
			}
			return w.Status.Total == n && w.Status.Ready == n && w.Status.Phases.Running == n &&
				meta.IsStatusConditionTrue(w.Status.Conditions, "Ready"), nil
		})
	}
	f := withPattern(features.New("summary"), "summary", ns).
		Assess("a Workload over a Deployment's Pods reports them Running and Ready and follows a scale change", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			d := deploymentUsing(ns, "web", "none", false)
			d.Spec.Template.Spec.Containers[0].EnvFrom = nil
			d.Spec.Replicas = ptr.To[int32](2)
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, &v1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns},
				Spec: v1alpha1.WorkloadSpec{Selector: map[string]string{"app": "web"}}}); err != nil {
				t.Fatal(err)
			}
			summarized(t, c, 2)
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
					return err
				}
				d.Spec.Replicas = ptr.To[int32](3)
				return c.Update(ctx, d)
			})
			if err != nil {
				t.Fatal(err)
			}
			summarized(t, c, 3)
			if err := c.Get(ctx, client.ObjectKeyFromObject(d), &appsv1.Deployment{}); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
