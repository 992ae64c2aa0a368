// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"io"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/dbpolicy/thirdparty"
	"github.com/kpatterns/kpatterns/dbpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// installDatabaseCRD installs the Database CRD as its own operator would (dbpolicy never does)
// and waits until it is served.
func installDatabaseCRD(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	t.Helper()
	crd, err := thirdparty.DatabaseCRD()
	if err != nil {
		t.Fatal(err)
	}
	installCRD(ctx, t, cfg, crd, webhook.DatabaseGVK.GroupVersion().WithKind("DatabaseList"))
}

// installCRD installs another project's CRD and waits until its kind (list: its list's kind) is
// served.
func installCRD(ctx context.Context, t *testing.T, cfg *envconf.Config, crd client.Object, list schema.GroupVersionKind) {
	t.Helper()
	if err := app.Install(ctx, cfg.Client().RESTConfig(), []client.Object{crd}, io.Discard); err != nil {
		t.Fatal(err)
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(list)
	waitFor(t, "the "+list.Kind+" kind is served", func(ctx context.Context) (bool, error) {
		c, err := client.New(cfg.Client().RESTConfig(), client.Options{}) // a new client discovers the new kind
		if err != nil {
			return false, err
		}
		return c.List(ctx, l) == nil, nil
	})
}

// TestDBPolicy: another operator's Database, validated by dbpolicy (as its ServiceAccount, which
// has no RBAC at all) through the cluster's kube-apiserver from the request's old and new objects.
func TestDBPolicy(t *testing.T) {
	const ns = "e2e-dbpolicy"
	orders := func(storage int64, engine string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
			"engine": engine, "version": "16.2", "storageGiB": storage, "replicas": int64(2)}}} // replicas: unknown to dbpolicy
		u.SetGroupVersionKind(webhook.DatabaseGVK)
		u.SetNamespace(ns)
		u.SetName("orders")
		return u
	}
	update := func(ctx context.Context, t *testing.T, cfg *envconf.Config, storage int64, engine string) error {
		c := clientFor(t, cfg)
		db := orders(0, "")
		if err := c.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
			t.Fatal(err)
		}
		want := orders(storage, engine)
		want.SetResourceVersion(db.GetResourceVersion())
		return c.Update(ctx, want)
	}
	f := features.New("dbpolicy").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			installDatabaseCRD(ctx, t, cfg)
			return ctx
		})
	f = withPattern(f, "dbpolicy", ns).
		Assess("a Database without its storage size is denied; a complete one is created", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			incomplete := orders(0, "postgres")
			unstructured.RemoveNestedField(incomplete.Object, "spec", "storageGiB")
			testenv.Denied(t, c.Create(ctx, incomplete), "spec.storageGiB: Required value")
			if err := c.Create(ctx, orders(20, "postgres")); err != nil {
				t.Fatal(err)
			}
			return ctx
		}).
		Assess("a storage shrink is denied, a grow allowed", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			testenv.Denied(t, update(ctx, t, cfg, 10, "postgres"), "database storage cannot shrink from 20 to 10 GiB")
			if err := update(ctx, t, cfg, 40, "postgres"); err != nil {
				t.Fatalf("grow: %v", err)
			}
			return ctx
		}).
		Assess("the engine cannot change", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			testenv.Denied(t, update(ctx, t, cfg, 40, "mysql"), `the engine is immutable: was "postgres", asked for "mysql"`)
			return ctx
		})
	testEnv.Test(t, f.Feature())
}
