// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests: a real kube-apiserver and etcd (envtest), the generated CRD and RBAC
// installed, the controller running as its ServiceAccount against a demo provider that each test
// owns — it stands for the external system, so it outlives a manager (a restart) and the test can
// inspect it, fail it and tamper with it.

import (
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/config"
	"github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	p := testenv.Pattern{Pattern: config.Pattern, AddToScheme: v1alpha1.AddToScheme, NewManager: newManager, Setup: func(mgr manager.Manager) error {
		return controller.Setup(mgr, provider.NewDemo(provider.DemoOptions{}), controller.Options{RepairInterval: time.Minute})
	}}
	testenv.Main(m, p, func(e *testenv.Env) { env = e })
}

func record(ns, name, value string) *v1alpha1.ExternalRecord {
	return &v1alpha1.ExternalRecord{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: v1alpha1.ExternalRecordSpec{Value: value}}
}

// runWith starts the controller (as its ServiceAccount) against p, watching the test's namespace ns
// only, until the (sub)test ends.
func runWith(t *testing.T, ns string, p provider.Provider, repair time.Duration) manager.Manager {
	t.Helper()
	return env.ManagerWith(t, func(mgr manager.Manager) error {
		return controller.Setup(mgr, p, controller.Options{RepairInterval: repair})
	}, ns)
}

func gone(t *testing.T, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, obj.GetName()+" deleted", func() error {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (finalizers %v): %v", obj.GetFinalizers(), err)
	})
}

// ordered is the external system as seen by a test: before every call it reads the object live
// and records a violation if the finalizer is not stored yet.
type ordered struct {
	*provider.Demo
	ns    string
	mu    sync.Mutex
	calls []string
	bad   []string
}

func (o *ordered) check(op, id string) {
	list := &v1alpha1.ExternalRecordList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(o.ns)); err != nil {
		panic(err)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.calls = append(o.calls, op)
	for _, r := range list.Items {
		if string(r.UID) == id && !controllerutil.ContainsFinalizer(&r, controller.Finalizer) {
			o.bad = append(o.bad, op+" before the finalizer was stored")
		}
	}
}

func (o *ordered) Get(ctx context.Context, id string) (provider.Record, bool, error) {
	o.check("get", id)
	return o.Demo.Get(ctx, id)
}

func (o *ordered) Put(ctx context.Context, id string, r provider.Record) error {
	o.check("put", id)
	return o.Demo.Put(ctx, id, r)
}

func (o *ordered) Delete(ctx context.Context, id string) error {
	o.check("delete", id)
	return o.Demo.Delete(ctx, id)
}

func TestNoExternalCallBeforeTheFinalizerIsStored(t *testing.T) {
	ns := env.Namespace(t)
	p := &ordered{Demo: provider.NewDemo(provider.DemoOptions{}), ns: ns}
	runWith(t, ns, p, time.Minute)
	ctx := context.Background()
	rec := record(ns, "db-user", "alice")
	if err := env.Client.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	env.WaitCondition(t, rec, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	if rec.Status.ExternalID != string(rec.UID) {
		t.Errorf("externalID = %q, want the UID", rec.Status.ExternalID)
	}
	if r, ok, _ := p.Demo.Get(ctx, string(rec.UID)); !ok || r.Value != "alice" {
		t.Errorf("external record = %+v, %v", r, ok)
	}
	if err := env.Client.Delete(ctx, rec); err != nil {
		t.Fatal(err)
	}
	gone(t, rec)
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bad) > 0 || len(p.calls) < 3 {
		t.Errorf("calls %v; violations %v", p.calls, p.bad)
	}
	if s := p.Stats(); s.Records != 0 || s.Creates != 1 {
		t.Errorf("provider: %+v, want no record left and one create", s)
	}
}

// An object the cache does not hold is never a reason for an external call, let alone a delete.
func TestCacheAbsenceCallsNothing(t *testing.T) {
	ns := env.Namespace(t)
	p := &ordered{Demo: provider.NewDemo(provider.DemoOptions{}), ns: ns}
	mgr := env.IdleManager(t)
	r := &controller.Reconciler{Client: mgr.GetClient(), Provider: p, Recorder: mgr.GetEventRecorder("test"), RepairInterval: time.Minute}
	if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "absent"}}); err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 0 {
		t.Errorf("external calls %v for an object not in the cache", p.calls)
	}
}

func TestDeleteFailuresHoldTheFinalizerAndAreRetried(t *testing.T) {
	ns := env.Namespace(t)
	demo := newFlaky(0)
	runWith(t, ns, demo, time.Minute)
	ctx := context.Background()
	rec := record(ns, "db-user", "bob")
	if err := env.Client.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	env.WaitCondition(t, rec, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	demo.set(1)
	if err := env.Client.Delete(ctx, rec); err != nil {
		t.Fatal(err)
	}
	c := env.WaitCondition(t, rec, "Ready", metav1.ConditionFalse, controller.ReasonDeleteFailed)
	if c.Message != "deleting the external record: "+provider.ErrInjected.Error() {
		t.Errorf("message = %q", c.Message)
	}
	env.WaitForEvent(t, ns, rec.Name, corev1.EventTypeWarning, controller.ReasonDeleteFailed, "")
	if rec.DeletionTimestamp == nil || !controllerutil.ContainsFinalizer(rec, controller.Finalizer) || demo.Stats().Records != 1 {
		t.Fatalf("want the object Terminating, held by the finalizer, and its record kept: %+v %v", rec.ObjectMeta, demo.Stats())
	}
	demo.set(0)
	gone(t, rec)
	if s := demo.Stats(); s.Records != 0 {
		t.Errorf("provider: %+v, want the record deleted", s)
	}
}

// 20 records created and deleted while 30 % of all external calls fail: none is left behind, none
// is stuck, none was created twice. (The 10 deleted once synced are synced with no failures, so the
// wait for them is not a wait for a lucky run of retries.)
func TestCleanupUnderInjectedFailures(t *testing.T) {
	ns := env.Namespace(t)
	const failing = 0.3
	demo := newFlaky(failing)
	runWith(t, ns, demo, time.Minute)
	ctx := context.Background()
	var recs []*v1alpha1.ExternalRecord
	for i := range 20 {
		rec := record(ns, fmt.Sprintf("r%d", i), "v")
		if err := env.Client.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	for _, rec := range recs[:10] { // deleted at once, while their creation is still failing and retrying
		if err := env.Client.Delete(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	demo.set(0)
	for _, rec := range recs[10:] {
		env.WaitCondition(t, rec, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	}
	demo.set(failing)
	for _, rec := range recs[10:] {
		if err := env.Client.Delete(ctx, rec); err != nil {
			t.Fatal(err)
		}
	}
	for _, rec := range recs {
		gone(t, rec)
	}
	s := demo.Stats()
	if s.Records != 0 || s.Creates != int64(s.Created) || s.Created < 10 || demo.failures.Load() == 0 {
		t.Errorf("provider: %+v (%d failures), want 0 records left, creates = distinct ids (at least the 10 synced), failures injected", s, demo.failures.Load())
	}
}

// Objects deleted right after they are created race the finalizer's addition: a DELETE that read
// the object just before the finalizer was stored deletes it anyway (the API server does not
// re-check finalizers then), possibly after the record was created. No record may be left behind.
func TestImmediateDeletesLeaveNoRecord(t *testing.T) {
	ns := env.Namespace(t)
	demo := provider.NewDemo(provider.DemoOptions{ErrorRate: 0.3})
	runWith(t, ns, demo, time.Minute)
	ctx := context.Background()
	var recs []*v1alpha1.ExternalRecord
	for i := range 100 {
		rec := record(ns, fmt.Sprintf("d%d", i), "v")
		if err := env.Client.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, rec); err != nil {
			t.Fatal(err)
		}
		recs = append(recs, rec)
	}
	for _, rec := range recs {
		gone(t, rec)
	}
	testenv.Eventually(t, "no external record left", func() error {
		if s := demo.Stats(); s.Records != 0 || s.Creates != int64(s.Created) {
			return fmt.Errorf("provider: %+v", s)
		}
		return nil
	})
}

func TestDriftIsRepaired(t *testing.T) {
	ns := env.Namespace(t)
	demo := provider.NewDemo(provider.DemoOptions{})
	runWith(t, ns, demo, 200*time.Millisecond)
	ctx := context.Background()
	rec := record(ns, "db-user", "carol")
	if err := env.Client.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	env.WaitCondition(t, rec, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	id := string(rec.UID)
	repaired := func(n int32) {
		t.Helper()
		testenv.Eventually(t, fmt.Sprintf("repair %d", n), func() error {
			if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rec), rec); err != nil {
				return err
			}
			r, ok, _ := demo.Get(ctx, id)
			if rec.Status.Repairs != n || rec.Status.LastRepairTime == nil || !ok || r.Value != "carol" {
				return fmt.Errorf("repairs %d, record %+v %v", rec.Status.Repairs, r, ok)
			}
			return nil
		})
	}
	if err := demo.Put(ctx, id, provider.Record{Value: "mallory"}); err != nil { // someone else writes the external system
		t.Fatal(err)
	}
	repaired(1)
	env.WaitForEvent(t, ns, rec.Name, corev1.EventTypeWarning, controller.ReasonRepaired, fmt.Sprintf("external record %s held %q; put back", id, "mallory"))
	if err := demo.Delete(ctx, id); err != nil {
		t.Fatal(err)
	}
	repaired(2)
	env.WaitForEvent(t, ns, rec.Name, corev1.EventTypeWarning, controller.ReasonRepaired, fmt.Sprintf("external record %s was missing; put back", id))
	if s := demo.Stats(); s.Creates != 2 || s.Created != 1 {
		t.Errorf("provider: %+v: the repair of a missing record is its second create, for the same id", s)
	}
}

// The controller is restarted while a delete keeps failing: the new process finds the object held
// by its finalizer and finishes the cleanup.
func TestRestartMidDeleteStillCleansUp(t *testing.T) {
	ns := env.Namespace(t)
	demo := newFlaky(0) // the external system outlives the process
	ctx := context.Background()
	rec := record(ns, "db-user", "dave")
	t.Run("first process", func(t *testing.T) {
		runWith(t, ns, demo, time.Minute)
		if err := env.Client.Create(ctx, rec); err != nil {
			t.Fatal(err)
		}
		env.WaitCondition(t, rec, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
		demo.set(1)
		if err := env.Client.Delete(ctx, rec); err != nil {
			t.Fatal(err)
		}
		env.WaitCondition(t, rec, "Ready", metav1.ConditionFalse, controller.ReasonDeleteFailed)
	}) // the first manager stops here, mid-delete
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(rec), rec); err != nil || demo.Stats().Records != 1 {
		t.Fatalf("between the processes: %v, %+v", err, demo.Stats())
	}
	demo.set(0)
	runWith(t, ns, demo, time.Minute)
	gone(t, rec)
	if s := demo.Stats(); s.Records != 0 || s.Creates != 1 {
		t.Errorf("provider: %+v", s)
	}
}

func TestNoWriteWhenSynced(t *testing.T) {
	ns := env.Namespace(t)
	demo := provider.NewDemo(provider.DemoOptions{})
	mgr := runWith(t, ns, demo, time.Minute)
	ctx := context.Background()
	rec := record(ns, "calm", "erin")
	if err := env.Client.Create(ctx, rec); err != nil {
		t.Fatal(err)
	}
	env.WaitCondition(t, rec, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	testenv.WaitCached(t, mgr.GetClient(), rec)
	writes := testenv.CountWrites(mgr.GetClient())
	r := &controller.Reconciler{Client: writes, Provider: demo, Recorder: mgr.GetEventRecorder("test"), RepairInterval: time.Minute}
	for range 3 {
		res, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(rec)})
		if err != nil || res.RequeueAfter != time.Minute {
			t.Fatalf("reconcile: %v %v, want a requeue after the repair interval", res, err)
		}
	}
	if n := writes.N(); n != 0 {
		t.Errorf("%d write requests re-reconciling a synced record, want 0", n)
	}
}

// flaky is the tests' fault switch in front of the demo provider: while a share is set, that share
// of calls fails with provider.ErrInjected before reaching it.
type flaky struct {
	*provider.Demo
	share    atomic.Uint64 // math.Float64bits
	failures atomic.Int64
}

func newFlaky(share float64) *flaky {
	f := &flaky{Demo: provider.NewDemo(provider.DemoOptions{})}
	f.set(share)
	return f
}

func (f *flaky) set(share float64) { f.share.Store(math.Float64bits(share)) }

func (f *flaky) fail() error {
	if share := math.Float64frombits(f.share.Load()); share > 0 && rand.Float64() < share {
		f.failures.Add(1)
		return provider.ErrInjected
	}
	return nil
}

func (f *flaky) Get(ctx context.Context, id string) (provider.Record, bool, error) {
	if err := f.fail(); err != nil {
		return provider.Record{}, false, err
	}
	return f.Demo.Get(ctx, id)
}

func (f *flaky) Put(ctx context.Context, id string, r provider.Record) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Demo.Put(ctx, id, r)
}

func (f *flaky) Delete(ctx context.Context, id string) error {
	if err := f.fail(); err != nil {
		return err
	}
	return f.Demo.Delete(ctx, id)
}
