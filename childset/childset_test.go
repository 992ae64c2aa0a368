// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests: a real kube-apiserver and etcd (envtest), the generated CRD and RBAC
// installed, the childset manager running as its ServiceAccount. envtest runs no garbage
// collector: a Bundle's deletion taking its children is covered by the e2e suite.

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	"github.com/kpatterns/kpatterns/childset/config"
	"github.com/kpatterns/kpatterns/childset/controller"
	"github.com/kpatterns/kpatterns/shared/stages"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, AddToScheme: v1alpha1.AddToScheme, NewManager: newManager, Setup: controller.Setup}, func(e *testenv.Env) { env = e })
}

func bundle(ns, name string, entries map[string]string) *v1alpha1.Bundle {
	return &v1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.BundleSpec{Entries: entries}}
}

// childKeys lists the keys of the Bundle's children (live), as their annotations record them.
func childKeys(t *testing.T, b *v1alpha1.Bundle) []string {
	t.Helper()
	list := &corev1.ConfigMapList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(b.Namespace), client.MatchingLabels{controller.BundleUIDLabel: string(b.UID)}); err != nil {
		t.Fatal(err)
	}
	var keys []string
	for _, cm := range list.Items {
		keys = append(keys, cm.Annotations[controller.KeyAnnotation])
	}
	slices.Sort(keys)
	return keys
}

func waitKeys(t *testing.T, b *v1alpha1.Bundle, want ...string) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("children %v", want), func() error {
		if got := childKeys(t, b); !slices.Equal(got, want) {
			return fmt.Errorf("children for keys %v", got)
		}
		return nil
	})
}

// setEntries replaces the Bundle's entries, reading it again when the controller's status write
// got in between (a conflict).
func setEntries(t *testing.T, b *v1alpha1.Bundle, entries map[string]string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(b), b); err != nil {
			return err
		}
		b.Spec.Entries = entries
		return env.Client.Update(context.Background(), b)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestOneConfigMapPerEntryAndPruning(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	b := bundle(ns, "app", map[string]string{"a": "1", "B_key.v2": "2", "c": "3"})
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	env.WaitCondition(t, b, "Ready", metav1.ConditionTrue, stages.ReasonReady)
	if b.Status.DesiredChildren != 3 || b.Status.ReadyChildren != 3 {
		t.Errorf("status = %+v, want 3/3", b.Status)
	}
	waitKeys(t, b, "B_key.v2", "a", "c")
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: controller.ChildName(b, "B_key.v2")}, cm); err != nil {
		t.Fatal(err)
	}
	if cm.Data["B_key.v2"] != "2" || len(cm.Data) != 1 || metav1.GetControllerOf(cm).UID != b.UID {
		t.Errorf("child = %v owned by %v", cm.Data, metav1.GetControllerOf(cm))
	}

	setEntries(t, b, map[string]string{"a": "1", "c": "30"})
	waitKeys(t, b, "a", "c")
	env.WaitCondition(t, b, "Ready", metav1.ConditionTrue, stages.ReasonReady)
	if b.Status.DesiredChildren != 2 || b.Status.ReadyChildren != 2 {
		t.Errorf("status = %+v, want 2/2", b.Status)
	}
	testenv.Eventually(t, "entry c updated", func() error {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: controller.ChildName(b, "c")}, cm); err != nil {
			return err
		}
		if cm.Data["c"] != "30" {
			return fmt.Errorf("data = %v", cm.Data)
		}
		return nil
	})
}

// A ConfigMap carrying the Bundle's labels (copied, say) but not controlled by it is never
// deleted: the Prune condition says so, with one Warning event.
func TestForeignLabelledConfigMapIsKept(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	b := bundle(ns, "app", map[string]string{"a": "1"})
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	env.WaitCondition(t, b, "Ready", metav1.ConditionTrue, stages.ReasonReady)
	copied := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "copied", Namespace: ns, Labels: map[string]string{
		controller.BundleUIDLabel: string(b.UID), stages.ManagedByLabel: "kpatterns-childset"}}}
	if err := env.Client.Create(ctx, copied); err != nil {
		t.Fatal(err)
	}
	setEntries(t, b, map[string]string{"a": "1", "b": "2"}) // a reconcile that lists the copy
	c := env.WaitCondition(t, b, "PruneReady", metav1.ConditionFalse, stages.ReasonNotOwned)
	if !strings.Contains(c.Message, "ConfigMap copied exists and is not controlled by this object") {
		t.Errorf("PruneReady message = %q", c.Message)
	}
	env.WaitForEvent(t, ns, "app", corev1.EventTypeWarning, stages.ReasonNotOwned, "")
	setEntries(t, b, map[string]string{"b": "2"})
	waitKeys(t, b, "", "b") // the copy (no key annotation) and b's child
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(copied), copied); err != nil {
		t.Fatalf("the foreign ConfigMap: %v", err)
	}
	warnings := 0
	for _, ev := range env.Events(t, ns, "app") {
		if ev.Reason == stages.ReasonNotOwned {
			warnings += int(max(ev.Count, 1))
		}
	}
	if warnings != 1 {
		t.Errorf("%d NotOwned warnings, want 1 (on the transition only)", warnings)
	}
}

// hookedDelete runs before once, just before the first delete request goes out: what happens
// between the reconciler's cache read and its delete.
type hookedDelete struct {
	client.Client
	before func(client.Object)
}

func (h *hookedDelete) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	if f := h.before; f != nil {
		h.before = nil
		f(obj)
	}
	return h.Client.Delete(ctx, obj, opts...)
}

// A child re-created (a new UID, not controlled by the Bundle) between the cache read and the
// delete is not deleted: the UID precondition fails, the live re-read shows a foreign object.
func TestChildRecreatedBeforeTheDeleteIsKept(t *testing.T) {
	ns := env.Namespace(t)
	mgr := env.IdleManager(t, func(mgr manager.Manager) error {
		return controller.SetupIndexes(context.Background(), mgr.GetFieldIndexer())
	})
	ctx := context.Background()
	r, err := controller.NewReconciler(mgr)
	if err != nil {
		t.Fatal(err)
	}
	b := bundle(ns, "app", map[string]string{"a": "1", "b": "2"})
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)}
	testenv.WaitCached(t, mgr.GetClient(), b)
	if _, err := r.Reconcile(testenv.Bounded(t), req); err != nil {
		t.Fatal(err)
	}
	setEntries(t, b, map[string]string{"a": "1"})
	testenv.WaitCached(t, mgr.GetClient(), b)
	old := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: controller.ChildName(b, "b")}, old); err != nil {
		t.Fatal(err)
	}
	testenv.WaitCached(t, mgr.GetClient(), old)
	var recreatedUID string
	r.Client = &hookedDelete{Client: mgr.GetClient(), before: func(obj client.Object) {
		if err := env.Client.Delete(ctx, old); err != nil {
			t.Error(err)
		}
		again := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: old.Name, Namespace: ns, Labels: old.Labels}, Data: map[string]string{"someone": "else"}}
		if err := env.Client.Create(ctx, again); err != nil {
			t.Error(err)
		}
		recreatedUID = string(again.UID)
	}}
	if _, err := r.Reconcile(testenv.Bounded(t), req); err != nil {
		t.Fatal(err)
	}
	now := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(old), now); err != nil {
		t.Fatalf("the re-created ConfigMap was deleted: %v", err)
	}
	if string(now.UID) != recreatedUID || now.UID == old.UID {
		t.Errorf("UID %s, want the re-created %s", now.UID, recreatedUID)
	}
	if err := env.Client.Get(ctx, req.NamespacedName, b); err != nil {
		t.Fatal(err)
	}
	if c := meta.FindStatusCondition(b.Status.Conditions, "PruneReady"); c == nil || c.Reason != stages.ReasonNotOwned {
		t.Errorf("PruneReady = %+v, want NotOwned", c)
	}
}

func TestInvalidSpecsAreRejectedByTheAPIServer(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	tooMany := map[string]string{}
	for i := range 101 {
		tooMany[fmt.Sprintf("k%d", i)] = "v"
	}
	for name, tc := range map[string]struct {
		b    *v1alpha1.Bundle
		says string
	}{
		"a key with a slash": {bundle(ns, "slash", map[string]string{"a/b": "1"}), "entry keys must be valid ConfigMap keys"},
		"a key too long":     {bundle(ns, "long", map[string]string{strings.Repeat("k", 254): "1"}), "entry keys must be valid ConfigMap keys"},
		"101 entries":        {bundle(ns, "many", tooMany), "must have at most 100 items"},
		"a name too long":    {bundle(ns, strings.Repeat("n", 237), nil), "a Bundle's name is at most 236 characters"},
	} {
		err := env.Client.Create(ctx, tc.b)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want Invalid saying %q", name, err, tc.says)
		}
	}
}

func TestNoWriteWhenConverged(t *testing.T) {
	ns := env.Namespace(t)
	mgr := env.Manager(t)
	ctx := context.Background()
	b := bundle(ns, "calm", map[string]string{"a": "1", "b": "2"})
	if err := env.Client.Create(ctx, b); err != nil {
		t.Fatal(err)
	}
	env.WaitCondition(t, b, "Ready", metav1.ConditionTrue, stages.ReasonReady)
	testenv.WaitCached(t, mgr.GetClient(), b)
	rvs := map[string]string{}
	for key := range maps.Keys(b.Spec.Entries) {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: controller.ChildName(b, key)}, cm); err != nil {
			t.Fatal(err)
		}
		testenv.WaitCached(t, mgr.GetClient(), cm)
		rvs[cm.Name] = cm.ResourceVersion
	}
	r, err := controller.NewReconciler(mgr)
	if err != nil {
		t.Fatal(err)
	}
	writes := testenv.CountWrites(mgr.GetClient())
	r.Client = writes
	for range 3 {
		if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(b)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.N(); n != 0 {
		t.Errorf("%d write requests re-reconciling a converged Bundle, want 0", n)
	}
	for name, rv := range rvs {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil || cm.ResourceVersion != rv {
			t.Errorf("ConfigMap %s was written (%v)", name, err)
		}
	}
}
