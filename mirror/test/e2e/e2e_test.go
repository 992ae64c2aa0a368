// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

//go:build e2e

// Package e2e runs this pattern on kind as a user deploys it (go tool task e2e): its image built
// and loaded, its manifests installed, its Pod Available, its /metrics served to an authorized
// scraper, and its job done: a labelled ConfigMap mirrored, an update followed, the child removed
// with its source. See shared/kindtest for the environment variables that choose the cluster.
package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/klient/wait"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/mirror/controller"
	"github.com/kpatterns/kpatterns/shared/kindtest"
)

var (
	suite   *kindtest.Suite
	testEnv env.Environment
)

func TestMain(m *testing.M) {
	var err error
	if suite, err = kindtest.New(controller.Name, "../.."); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testEnv = suite.Environment()
	os.Exit(testEnv.Run(m))
}

func TestPattern(t *testing.T) {
	ns := envconf.RandomName("e2e", 10)
	f := features.New(controller.Name).
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if err := cfg.Client().Resources().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("its /metrics is served to an authorized ServiceAccount", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			body, err := suite.Metrics(ctx, cfg)
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(body, "controller_runtime_reconcile_total") {
				t.Errorf("/metrics has no controller_runtime_reconcile_total:\n%.2000s", body)
			}
			return ctx
		}).
		Assess("a labelled ConfigMap is mirrored, followed and cleaned up", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c, err := client.New(cfg.Client().RESTConfig(), client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns,
				Labels: map[string]string{controller.Label: controller.Source}}, Data: map[string]string{"greeting": "hello"}}
			if err := c.Create(ctx, src); err != nil {
				t.Fatal(err)
			}
			child := client.ObjectKey{Namespace: ns, Name: src.Name + controller.Suffix}
			mirrored := func(want map[string]string) func(context.Context) (bool, error) {
				return func(ctx context.Context) (bool, error) {
					cm := &corev1.ConfigMap{}
					err := c.Get(ctx, child, cm)
					return err == nil && maps.Equal(cm.Data, want), client.IgnoreNotFound(err)
				}
			}
			until := func(what string, cond func(context.Context) (bool, error)) {
				t.Helper()
				if err := wait.For(cond, wait.WithTimeout(2*time.Minute), wait.WithInterval(time.Second)); err != nil {
					t.Fatalf("%s: %v", what, err)
				}
			}
			until("the child with the source's data", mirrored(src.Data))
			src.Data = map[string]string{"greeting": "hi"}
			if err := c.Update(ctx, src); err != nil {
				t.Fatal(err)
			}
			until("the child following the update", mirrored(src.Data))
			if err := c.Delete(ctx, src); err != nil {
				t.Fatal(err)
			}
			until("the child gone with its source", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, child, &corev1.ConfigMap{})
				return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
			})
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			suite.DumpOnFailure(ctx, t, cfg)
			_ = cfg.Client().Resources().Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
