// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	"github.com/kpatterns/kpatterns/childset/controller"
)

// TestChildSet: a Bundle's ConfigMaps follow its entries (pruned as the ServiceAccount, with
// delete on configmaps and nothing more), and the cluster's garbage collector removes them with it.
func TestChildSet(t *testing.T) {
	const ns = "e2e-childset"
	b := &v1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns},
		Spec: v1alpha1.BundleSpec{Entries: map[string]string{"log.level": "info", "FEATURE_X": "on", "region": "eu"}}}
	keys := func(ctx context.Context, c client.Client) ([]string, error) {
		list := &corev1.ConfigMapList{}
		if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{controller.BundleUIDLabel: string(b.UID)}); err != nil {
			return nil, err
		}
		var out []string
		for _, cm := range list.Items {
			out = append(out, cm.Annotations[controller.KeyAnnotation])
		}
		slices.Sort(out)
		return out, nil
	}
	waitKeys := func(t *testing.T, c client.Client, want ...string) {
		waitFor(t, fmt.Sprintf("children for %v", want), func(ctx context.Context) (bool, error) {
			got, err := keys(ctx, c)
			return slices.Equal(got, want), err
		})
	}
	f := withPattern(features.New("childset"), "childset", ns).
		Assess("one ConfigMap per entry; removing an entry prunes its ConfigMap", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := c.Create(ctx, b); err != nil {
				t.Fatal(err)
			}
			waitKeys(t, c, "FEATURE_X", "log.level", "region")
			err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
				if err := c.Get(ctx, client.ObjectKeyFromObject(b), b); err != nil {
					return err
				}
				delete(b.Spec.Entries, "FEATURE_X")
				return c.Update(ctx, b)
			})
			if err != nil {
				t.Fatal(err)
			}
			waitKeys(t, c, "log.level", "region")
			return ctx
		}).
		Assess("deleting the Bundle garbage-collects its ConfigMaps", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := c.Delete(ctx, b); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the Bundle gone", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(b), &v1alpha1.Bundle{})
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			})
			waitKeys(t, c)
			return ctx
		})
	testEnv.Test(t, f.Feature())
}
