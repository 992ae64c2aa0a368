// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests: a real kube-apiserver and etcd (envtest), the generated RBAC installed, and
// the mirror's manager running as its ServiceAccount. envtest runs no garbage collector: deletion
// of a deleted source's child is covered by the e2e suite on the full local cluster.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/mirror/config"
	"github.com/kpatterns/kpatterns/mirror/controller"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, NewManager: newManager, Setup: controller.Setup}, func(e *testenv.Env) { env = e })
}

// setup starts the mirror and returns a fresh namespace and the manager.
func setup(t *testing.T) (string, manager.Manager) {
	t.Helper()
	return env.Namespace(t), env.Manager(t)
}

func source(ns, name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{controller.Label: controller.Source}},
		Data:       data,
	}
}

func getCM(ns, name string) (*corev1.ConfigMap, error) {
	cm := &corev1.ConfigMap{}
	return cm, env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm)
}

// waitData waits until the live ConfigMap ns/name holds exactly data and binaryData.
func waitData(t *testing.T, ns, name string, data map[string]string, binary map[string][]byte) *corev1.ConfigMap {
	t.Helper()
	var cm *corev1.ConfigMap
	testenv.Eventually(t, "child "+name, func() (err error) {
		if cm, err = getCM(ns, name); err != nil {
			return err
		}
		if d := cmp.Diff(data, cm.Data) + cmp.Diff(binary, cm.BinaryData); d != "" {
			return fmt.Errorf("data differs (-want +got):\n%s", d)
		}
		return nil
	})
	return cm
}

// waitCached waits until the manager's cache holds ns/name at resourceVersion rv (rv "": holds
// nothing), so a forced reconcile reads what the API server has.
func waitCached(t *testing.T, mgr manager.Manager, ns, name, rv string) {
	t.Helper()
	testenv.WaitCached(t, mgr.GetClient(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv}})
}

func reconciler(mgr manager.Manager) *controller.Reconciler {
	return &controller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder("mirror-test")}
}

func TestChildMirrorsSourceAndFollowsKeyRemoval(t *testing.T) {
	ns, mgr := setup(t)
	ctx := context.Background()
	src := source(ns, "app", map[string]string{"a": "1", "b": "2"})
	src.BinaryData = map[string][]byte{"bin": {0, 1, 2}}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	child := waitData(t, ns, "app-mirror", src.Data, src.BinaryData)
	owner := metav1.GetControllerOf(child)
	if owner == nil || owner.UID != src.UID || owner.Kind != "ConfigMap" || !*owner.BlockOwnerDeletion {
		t.Fatalf("child's controller reference = %+v, want the source %s", owner, src.UID)
	}
	if child.Labels[controller.Label] != controller.Child {
		t.Fatalf("child labels = %v", child.Labels)
	}

	// Removing a key and the binary data from the source removes them from the child.
	src.Data = map[string]string{"b": "3"}
	src.BinaryData = nil
	if err := env.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitData(t, ns, "app-mirror", map[string]string{"b": "3"}, nil)

	// An unlabelled ConfigMap gets no child.
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	if _, err := reconciler(mgr).Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "plain"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := getCM(ns, "plain-mirror"); !apierrors.IsNotFound(err) {
		t.Fatalf("plain-mirror: err = %v, want NotFound", err)
	}
}

func TestConvergedMirrorGetsNoWrite(t *testing.T) {
	ns, mgr := setup(t)
	ctx := context.Background()
	src := source(ns, "calm", map[string]string{"k": "v"})
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	child := waitData(t, ns, "calm-mirror", src.Data, nil)
	waitCached(t, mgr, ns, "calm-mirror", child.ResourceVersion)
	waitCached(t, mgr, ns, "calm", src.ResourceVersion)

	// An update with unchanged content would not move the resourceVersion (the API server skips
	// no-op writes), so the requests themselves are counted too.
	r := reconciler(mgr)
	writes := testenv.CountWrites(mgr.GetClient())
	r.Client = writes
	for range 5 {
		if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(src)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.N(); n != 0 {
		t.Fatalf("%d write requests while re-reconciling a converged mirror, want 0", n)
	}
	after, err := getCM(ns, "calm-mirror")
	if err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != child.ResourceVersion {
		t.Fatalf("child resourceVersion %s -> %s: a converged mirror was written", child.ResourceVersion, after.ResourceVersion)
	}
	srcAfter, err := getCM(ns, "calm")
	if err != nil {
		t.Fatal(err)
	}
	if srcAfter.ResourceVersion != src.ResourceVersion {
		t.Fatalf("source resourceVersion %s -> %s: the source was written", src.ResourceVersion, srcAfter.ResourceVersion)
	}
}

func TestWatchNamespacesLimitsTheCache(t *testing.T) {
	watched, other := env.Namespace(t), env.Namespace(t)
	mgr := env.Manager(t, watched)
	ctx := context.Background()
	for _, ns := range []string{other, watched} {
		if err := env.Client.Create(ctx, source(ns, "scoped", map[string]string{"k": "v"})); err != nil {
			t.Fatal(err)
		}
	}
	waitData(t, watched, "scoped-mirror", map[string]string{"k": "v"}, nil)
	// The cache holds nothing of the other namespace: a read there fails rather than answering.
	if err := mgr.GetClient().Get(ctx, client.ObjectKey{Namespace: other, Name: "scoped"}, &corev1.ConfigMap{}); err == nil {
		t.Fatalf("the cache served a ConfigMap of unwatched namespace %s", other)
	}
	if _, err := getCM(other, "scoped-mirror"); !apierrors.IsNotFound(err) {
		t.Fatalf("child in the unwatched namespace: err = %v, want NotFound", err)
	}
}

func TestLabelRemovalDeletesOwnedChild(t *testing.T) {
	ns, _ := setup(t)
	ctx := context.Background()
	src := source(ns, "gone", map[string]string{"k": "v"})
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitData(t, ns, "gone-mirror", src.Data, nil)
	delete(src.Labels, controller.Label)
	if err := env.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "child deleted", func() error {
		if _, err := getCM(ns, "gone-mirror"); !apierrors.IsNotFound(err) {
			return fmt.Errorf("child still there (err %v)", err)
		}
		return nil
	})
}

// A deleted source's child is the garbage collector's: the controller must not delete it itself
// (envtest has no garbage collector, so the child stays).
func TestDeletedSourceLeavesChildToGarbageCollector(t *testing.T) {
	ns, mgr := setup(t)
	ctx := context.Background()
	src := source(ns, "del", map[string]string{"k": "v"})
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	child := waitData(t, ns, "del-mirror", src.Data, nil)
	if err := env.Client.Delete(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitCached(t, mgr, ns, "del", "")
	if _, err := reconciler(mgr).Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(src)}); err != nil {
		t.Fatal(err)
	}
	after, err := getCM(ns, "del-mirror")
	if err != nil {
		t.Fatalf("child of a deleted source: %v (want it left for the garbage collector)", err)
	}
	if after.ResourceVersion != child.ResourceVersion {
		t.Fatalf("child written after its source was deleted")
	}
}

func TestForeignChildIsReportedNotTouched(t *testing.T) {
	for _, labelled := range []bool{false, true} {
		t.Run(fmt.Sprintf("labelled=%v", labelled), func(t *testing.T) {
			ns, mgr := setup(t)
			ctx := context.Background()
			foreign := &corev1.ConfigMap{
				ObjectMeta: metav1.ObjectMeta{Name: "web-mirror", Namespace: ns},
				Data:       map[string]string{"mine": "yes"},
			}
			if labelled { // in the mirror's cache, but not owned
				foreign.Labels = map[string]string{controller.Label: controller.Child}
			}
			if err := env.Client.Create(ctx, foreign); err != nil {
				t.Fatal(err)
			}
			src := source(ns, "web", map[string]string{"k": "v"})
			if err := env.Client.Create(ctx, src); err != nil {
				t.Fatal(err)
			}
			testenv.Eventually(t, "ChildConflict event", func() error {
				list := &eventsv1.EventList{}
				if err := env.Client.List(ctx, list, client.InNamespace(ns)); err != nil {
					return err
				}
				for _, e := range list.Items {
					if e.Reason == controller.ReasonChildConflict && e.Regarding.UID == src.UID && e.Type == corev1.EventTypeWarning &&
						strings.Contains(e.Note, "web-mirror") {
						return nil
					}
				}
				return fmt.Errorf("no Warning %s event about the source in %d events", controller.ReasonChildConflict, len(list.Items))
			})
			after, err := getCM(ns, "web-mirror")
			if err != nil {
				t.Fatal(err)
			}
			if after.ResourceVersion != foreign.ResourceVersion || len(after.OwnerReferences) != 0 {
				t.Fatalf("foreign ConfigMap was changed: %+v", after)
			}
			// Removing the source's label must not delete the foreign object either.
			delete(src.Labels, controller.Label)
			if err := env.Client.Update(ctx, src); err != nil {
				t.Fatal(err)
			}
			waitCached(t, mgr, ns, "web", "")
			if _, err := reconciler(mgr).Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(src)}); err != nil {
				t.Fatal(err)
			}
			if _, err := getCM(ns, "web-mirror"); err != nil {
				t.Fatalf("foreign ConfigMap deleted: %v", err)
			}
		})
	}
}

// raceClient makes another writer change the child between the reconciler's read and its write.
type raceClient struct {
	client.Client
	race func(ctx context.Context) error
	hits atomic.Int32
}

func (c *raceClient) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	if c.hits.Add(1) == 1 {
		if err := c.race(ctx); err != nil {
			return err
		}
	}
	return c.Client.Update(ctx, obj, opts...)
}

// The reconciler is driven by hand here (the manager runs no controller), so the staged race is
// the only other writer.
func TestConcurrentUpdateConflictsInsteadOfOverwriting(t *testing.T) {
	ns, mgr := env.Namespace(t), env.IdleManager(t)
	ctx := context.Background()
	src := source(ns, "race", map[string]string{"k": "v1"})
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitCached(t, mgr, ns, "race", src.ResourceVersion)
	r := reconciler(mgr)
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(src)}
	if _, err := r.Reconcile(testenv.Bounded(t), req); err != nil {
		t.Fatal(err)
	}
	child := waitData(t, ns, "race-mirror", src.Data, nil)
	waitCached(t, mgr, ns, "race-mirror", child.ResourceVersion)

	src.Data = map[string]string{"k": "v2"}
	if err := env.Client.Update(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitCached(t, mgr, ns, "race", src.ResourceVersion)
	var raced *corev1.ConfigMap
	rc := &raceClient{Client: mgr.GetClient(), race: func(ctx context.Context) error {
		c, err := getCM(ns, "race-mirror")
		if err != nil {
			return err
		}
		c.Annotations = map[string]string{"edited-by": "someone-else"}
		raced = c
		return env.Client.Update(ctx, c)
	}}
	racing := *r
	racing.Client = rc
	_, err := racing.Reconcile(testenv.Bounded(t), req)
	if raced == nil {
		t.Fatal("the reconciler made no update, so no race was staged")
	}
	if !apierrors.IsConflict(errors.Unwrap(err)) {
		t.Fatalf("Reconcile err = %v, want a conflict", err)
	}
	if c, _ := getCM(ns, "race-mirror"); c.Data["k"] != "v1" || c.ResourceVersion != raced.ResourceVersion {
		t.Fatalf("child after the conflict = %v at %s, want the other writer's version %s", c.Data, c.ResourceVersion, raced.ResourceVersion)
	}
	// The retry (as the queue would run it) reads the other writer's version and converges on it.
	waitCached(t, mgr, ns, "race-mirror", raced.ResourceVersion)
	if _, err := r.Reconcile(testenv.Bounded(t), req); err != nil {
		t.Fatal(err)
	}
	final := waitData(t, ns, "race-mirror", map[string]string{"k": "v2"}, nil)
	if final.Annotations["edited-by"] != "someone-else" {
		t.Fatalf("the concurrent write was overwritten: annotations %v", final.Annotations)
	}
}
