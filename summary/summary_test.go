// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests against a real API server (envtest), the generated CRD and RBAC installed, the
// manager running as the summary's ServiceAccount (Pods: get/list/watch only). envtest runs no
// scheduler or kubelet, so the tests write Pod status themselves, as a kubelet would.

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/testenv"
	"github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	"github.com/kpatterns/kpatterns/summary/config"
	"github.com/kpatterns/kpatterns/summary/controller"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, AddToScheme: v1alpha1.AddToScheme, NewManager: newManager, Setup: controller.Setup}, func(e *testenv.Env) { env = e })
}

// pod creates a Pod and gives it a phase and readiness, as a kubelet would.
func pod(t testing.TB, ns, name string, labels map[string]string, phase corev1.PodPhase, ready bool) *corev1.Pod {
	t.Helper()
	ctx := context.Background()
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	status := corev1.ConditionFalse
	if ready {
		status = corev1.ConditionTrue
	}
	p.Status = corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: status}}}
	if err := env.Client.Status().Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	return p
}

type summary struct {
	Total, Ready int32
	Phases       v1alpha1.PodCounts
	Ready_       metav1.ConditionStatus
}

func waitSummary(t *testing.T, ns, name string, want summary) *v1alpha1.Workload {
	t.Helper()
	w := &v1alpha1.Workload{}
	testenv.Eventually(t, "summary of "+name, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, w); err != nil {
			return err
		}
		got := summary{w.Status.Total, w.Status.Ready, w.Status.Phases, ""}
		if c := meta.FindStatusCondition(w.Status.Conditions, "Ready"); c != nil {
			got.Ready_ = c.Status
		}
		if d := cmp.Diff(want, got); d != "" || w.Status.ObservedGeneration != w.Generation {
			return fmt.Errorf("(-want +got):\n%s (observedGeneration %d/%d)", d, w.Status.ObservedGeneration, w.Generation)
		}
		return nil
	})
	return w
}

func TestCountsPhasesAndFollowsSelector(t *testing.T) {
	ns, other := env.Namespace(t), env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	web := map[string]string{"app": "web"}
	pod(t, ns, "run-ready", map[string]string{"app": "web", "tier": "front"}, corev1.PodRunning, true)
	pod(t, ns, "run-not-ready", web, corev1.PodRunning, false)
	pod(t, ns, "pending", web, corev1.PodPending, false)
	pod(t, ns, "done", web, corev1.PodSucceeded, false)
	pod(t, ns, "failed", web, corev1.PodFailed, false)
	pod(t, ns, "unknown", web, corev1.PodUnknown, false)
	pod(t, ns, "db", map[string]string{"app": "db"}, corev1.PodRunning, true)
	pod(t, other, "web-elsewhere", web, corev1.PodRunning, true) // another namespace: ignored

	w := &v1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: v1alpha1.WorkloadSpec{Selector: web}}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitSummary(t, ns, "web", summary{Total: 6, Ready: 1, Phases: v1alpha1.PodCounts{Pending: 1, Running: 2, Succeeded: 1, Failed: 1, Unknown: 1}, Ready_: "False"})

	// A Pod event maps back to the Workload: a new Pod, a readiness change, a deletion.
	pod(t, ns, "late", web, corev1.PodRunning, true)
	waitSummary(t, ns, "web", summary{Total: 7, Ready: 2, Phases: v1alpha1.PodCounts{Pending: 1, Running: 3, Succeeded: 1, Failed: 1, Unknown: 1}, Ready_: "False"})

	// A narrower selector: only the front-tier Pod, which is ready.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(w), w); err != nil {
			return err
		}
		w.Spec.Selector = map[string]string{"app": "web", "tier": "front"}
		return env.Client.Update(ctx, w)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitSummary(t, ns, "web", summary{Total: 1, Ready: 1, Phases: v1alpha1.PodCounts{Running: 1}, Ready_: "True"})

	// A Pod whose labels stop matching leaves the count (the old labels map it back).
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &corev1.Pod{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "run-ready"}, p); err != nil {
			return err
		}
		p.Labels["tier"] = "back"
		return env.Client.Update(ctx, p)
	})
	if err != nil {
		t.Fatal(err)
	}
	waitSummary(t, ns, "web", summary{Ready_: "False"})
}

func TestConvergedWorkloadGetsNoWrite(t *testing.T) {
	ns := env.Namespace(t)
	mgr := env.Manager(t)
	ctx := context.Background()
	pod(t, ns, "p", map[string]string{"app": "x"}, corev1.PodRunning, true)
	if err := env.Client.Create(ctx, &v1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "x", Namespace: ns},
		Spec: v1alpha1.WorkloadSpec{Selector: map[string]string{"app": "x"}}}); err != nil {
		t.Fatal(err)
	}
	w := waitSummary(t, ns, "x", summary{Total: 1, Ready: 1, Phases: v1alpha1.PodCounts{Running: 1}, Ready_: "True"})
	testenv.WaitCached(t, mgr.GetClient(), w)
	writes := testenv.CountWrites(mgr.GetClient())
	r := &controller.Reconciler{Client: writes}
	for range 3 {
		if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.N(); n != 0 {
		t.Fatalf("%d writes re-reconciling a converged Workload, want 0", n)
	}
}

func TestEmptySelectorRejected(t *testing.T) {
	ns := env.Namespace(t)
	err := env.Client.Create(context.Background(), &v1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "all", Namespace: ns},
		Spec: v1alpha1.WorkloadSpec{Selector: map[string]string{}}})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.selector") {
		t.Fatalf("err = %v, want Invalid on spec.selector", err)
	}
}

// A terminating Pod (deletionTimestamp set; a finalizer holds it, as a kubelet's graceful stop
// would) still counts in its phase but no longer as ready.
func TestTerminatingPodIsNotReady(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	p := pod(t, ns, "leaving", map[string]string{"app": "t"}, corev1.PodRunning, true)
	p.Finalizers = []string{"test.kpatterns.dev/hold"}
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	pod(t, ns, "staying", map[string]string{"app": "t"}, corev1.PodRunning, true)
	if err := env.Client.Create(ctx, &v1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "t", Namespace: ns},
		Spec: v1alpha1.WorkloadSpec{Selector: map[string]string{"app": "t"}}}); err != nil {
		t.Fatal(err)
	}
	waitSummary(t, ns, "t", summary{Total: 2, Ready: 2, Phases: v1alpha1.PodCounts{Running: 2}, Ready_: "True"})
	if err := env.Client.Delete(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitSummary(t, ns, "t", summary{Total: 2, Ready: 1, Phases: v1alpha1.PodCounts{Running: 2}, Ready_: "False"})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
		t.Fatal(err)
	}
	p.Finalizers = nil
	if err := env.Client.Update(ctx, p); err != nil {
		t.Fatal(err)
	}
	waitSummary(t, ns, "t", summary{Total: 1, Ready: 1, Phases: v1alpha1.PodCounts{Running: 1}, Ready_: "True"})
}
