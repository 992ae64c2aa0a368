// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

// Helpers every feature of the suite shares.

import (
	"context"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	childsetv1alpha1 "github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	conditionalv1alpha1 "github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	finalizersv1alpha1 "github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	lifespanv1alpha1 "github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	"github.com/kpatterns/kpatterns/shared/app"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	widgetv1alpha1 "github.com/kpatterns/kpatterns/widget/api/v1alpha1"
)

// scheme knows client-go's types and every pattern's custom resources.
var scheme = func() *runtime.Scheme {
	s, err := app.NewScheme(widgetv1alpha1.AddToScheme, conditionalv1alpha1.AddToScheme, summaryv1alpha1.AddToScheme,
		childsetv1alpha1.AddToScheme, finalizersv1alpha1.AddToScheme, lifespanv1alpha1.AddToScheme)
	utilruntime.Must(err)
	return s
}()

// clientFor returns an admin controller-runtime client for the suite's cluster.
func clientFor(t testing.TB, cfg *envconf.Config) client.Client {
	t.Helper()
	c, err := client.New(cfg.Client().RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// waitFor polls cond until it is true; the deadline only bounds a hung test.
// testNamespace is a namespace for a test's workloads: its Pods run on kwok's node.
func testNamespace(name string) *corev1.Namespace {
	return localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}})
}

func waitFor(t *testing.T, what string, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := wait.For(cond, wait.WithTimeout(2*time.Minute), wait.WithInterval(200*time.Millisecond)); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

type stopKey struct{ pattern string }

// withPattern runs a pattern (with runArgs added to its run command) for one feature and a
// namespace of its own.
func withPattern(b *features.FeatureBuilder, pattern, ns string, runArgs ...string) *features.FeatureBuilder {
	return b.
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if err := clientFor(t, cfg).Create(ctx, testNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			return context.WithValue(ctx, stopKey{pattern}, runPattern(ctx, t, cfg, pattern, runArgs...))
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			removeWebhooks(ctx, t, cfg, pattern)
			if stop, ok := ctx.Value(stopKey{pattern}).(func()); ok {
				stop()
			}
			_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			return ctx
		})
}

// removeWebhooks deletes a webhook pattern's configurations. Call it while the pattern still
// serves: a webhook that no longer answers would refuse the namespace's deletion and later
// features' writes (failurePolicy: Fail).
func removeWebhooks(ctx context.Context, t testing.TB, cfg *envconf.Config, pattern string) {
	t.Helper()
	if !webhookPatterns[pattern] {
		return
	}
	c := clientFor(t, cfg)
	meta := metav1.ObjectMeta{Name: "kpatterns-" + pattern}
	for _, o := range []client.Object{&admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: meta},
		&admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: meta}} {
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			t.Error(err)
		}
	}
}

// setKey sets one key of a ConfigMap's data, read again and retried on a conflict.
func setKey(ctx context.Context, t testing.TB, c client.Client, ns, name, key, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			return err
		}
		if cm.Data == nil {
			cm.Data = map[string]string{}
		}
		cm.Data[key] = value
		return c.Update(ctx, cm)
	})
	if err != nil {
		t.Fatal(err)
	}
}
