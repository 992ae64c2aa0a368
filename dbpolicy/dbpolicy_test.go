// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests through a real kube-apiserver (envtest). The Database CRD is installed as a
// fixture, as another operator would install it; the pattern's own manifests have no CRD and no
// RBAC. Its manager serves the webhook as its ServiceAccount — which may read nothing at all — and
// every request goes through the API server's admission chain.

import (
	"context"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/dbpolicy/config"
	"github.com/kpatterns/kpatterns/dbpolicy/thirdparty"
	"github.com/kpatterns/kpatterns/dbpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	crd, err := thirdparty.DatabaseCRD()
	if err != nil {
		panic(err)
	}
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, NewManager: newManager, Setup: webhook.Setup}, func(e *testenv.Env) { env = e }, crd)
}

// database is another operator's object, built without its Go types.
func database(ns, name string, spec map[string]any) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{"spec": spec}}
	u.SetGroupVersionKind(webhook.DatabaseGVK)
	u.SetNamespace(ns)
	u.SetName(name)
	return u
}

// setSpec re-reads the Database, sets spec fields and updates it (the old object of the request
// is what the API server has stored).
func setSpec(ctx context.Context, db *unstructured.Unstructured, fields map[string]any) error {
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		return err
	}
	for k, v := range fields {
		if err := unstructured.SetNestedField(db.Object, v, "spec", k); err != nil {
			return err
		}
	}
	return env.Client.Update(ctx, db)
}

func TestCreateRequiresEngineVersionAndStorage(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	testenv.Denied(t, env.Client.Create(ctx, database(ns, "empty", map[string]any{})),
		"spec.engine: Required value", "spec.version: Required value", "spec.storageGiB: Required value")
	testenv.Denied(t, env.Client.Create(ctx, database(ns, "bad", map[string]any{"engine": "postgres", "version": "latest", "storageGiB": int64(0)})),
		`spec.version: Invalid value: "latest": must be a version like 16.2`, "spec.storageGiB: Invalid value: 0: must be positive")
	if err := env.Client.Create(ctx, database(ns, "ok", map[string]any{"engine": "postgres", "version": "16.2", "storageGiB": int64(20)})); err != nil {
		t.Fatalf("a complete Database: %v", err)
	}
}

func TestUpdateComparesOldAndNew(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	db := database(ns, "orders", map[string]any{"engine": "postgres", "version": "16.2", "storageGiB": int64(20)})
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatal(err)
	}
	testenv.Denied(t, setSpec(ctx, db, map[string]any{"storageGiB": int64(10)}), "database storage cannot shrink from 20 to 10 GiB")
	testenv.Denied(t, setSpec(ctx, db, map[string]any{"engine": "mysql"}), `the engine is immutable: was "postgres", asked for "mysql"`)
	testenv.Denied(t, setSpec(ctx, db, map[string]any{"version": "15.6"}), "the version cannot be downgraded from 16.2 to 15.6")
	testenv.Denied(t, setSpec(ctx, db, map[string]any{"version": "16.1.9"}), "the version cannot be downgraded from 16.2 to 16.1.9")
	if err := setSpec(ctx, db, map[string]any{"storageGiB": int64(50), "version": "16.4"}); err != nil {
		t.Fatalf("grow and upgrade: %v", err)
	}
	if err := setSpec(ctx, db, map[string]any{"storageGiB": int64(50)}); err != nil { // equal is no shrink
		t.Fatalf("unchanged storage: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := unstructured.NestedInt64(db.Object, "spec", "storageGiB"); got != 50 {
		t.Errorf("storageGiB = %d, want 50 (the denied updates left nothing behind)", got)
	}
}

// The other operator's schema has fields this pattern has never heard of: they decode and are
// kept, and the rules still apply.
func TestUnknownFieldsDecodeAndAreKept(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	db := database(ns, "extra", map[string]any{"engine": "postgres", "version": "16.2", "storageGiB": int64(20),
		"backup": map[string]any{"schedule": "@daily", "retainDays": int64(7)}, "replicas": int64(3)})
	if err := env.Client.Create(ctx, db); err != nil {
		t.Fatalf("a Database with fields unknown to the policy: %v", err)
	}
	if _, found, _ := unstructured.NestedString(db.Object, "spec", "backup", "schedule"); !found {
		t.Errorf("spec.backup was dropped: %v", db.Object["spec"])
	}
	testenv.Denied(t, setSpec(ctx, db, map[string]any{"storageGiB": int64(5), "replicas": int64(5)}), "cannot shrink from 20 to 5 GiB")
}

// The operator's own namespace is never sent to the webhook (namespaceSelector), so a broken
// webhook cannot block its own repair.
func TestOperatorNamespaceIsNotGoverned(t *testing.T) {
	env.Manager(t)
	db := database(testenv.Namespace, "ungoverned", map[string]any{})
	if err := env.Client.Create(context.Background(), db); err != nil {
		t.Fatalf("a Database in the operator's namespace: %v", err)
	}
}
