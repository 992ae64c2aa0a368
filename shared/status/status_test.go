// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package status_test

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	"github.com/kpatterns/kpatterns/shared/status"
)

// A unit test of the patch's decisions (fake client): what is sent, and when events go out.
func setup(t *testing.T) (client.Client, *int, *corev1.Pod) {
	t.Helper()
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns"}}
	patches := 0
	c := fake.NewClientBuilder().WithObjects(pod).WithStatusSubresource(pod).WithInterceptorFuncs(interceptor.Funcs{
		SubResourcePatch: func(ctx context.Context, c client.Client, sub string, obj client.Object, patch client.Patch, opts ...client.SubResourcePatchOption) error {
			patches++
			return c.SubResource(sub).Patch(ctx, obj, patch, opts...)
		},
	}).Build()
	live := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), live); err != nil {
		t.Fatal(err)
	}
	return c, &patches, live
}

func TestUnchangedSendsNothingButEmits(t *testing.T) {
	c, patches, pod := setup(t)
	rec := events.NewFakeRecorder(5)
	p := status.NewPatcher(c, pod)
	p.Eventf(rec, pod, corev1.EventTypeNormal, "Steady", "Test", "no change")
	if err := p.Patch(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if *patches != 0 || len(rec.Events) != 1 {
		t.Errorf("%d patches, %d events; want 0 and 1", *patches, len(rec.Events))
	}
}

func TestChangedPatchesThenEmits(t *testing.T) {
	c, patches, pod := setup(t)
	rec := events.NewFakeRecorder(5)
	p := status.NewPatcher(c, pod)
	pod.Status.Phase = corev1.PodRunning
	p.Eventf(rec, pod, corev1.EventTypeNormal, "Running", "Test", "phase %s", pod.Status.Phase)
	if err := p.Patch(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	live := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), live); err != nil {
		t.Fatal(err)
	}
	if *patches != 1 || live.Status.Phase != corev1.PodRunning || len(rec.Events) != 1 {
		t.Errorf("%d patches, phase %q, %d events; want 1, Running, 1", *patches, live.Status.Phase, len(rec.Events))
	}
}

// A second Patch compares with what the first wrote: an early patch (at a crash-safe point)
// followed by the deferred one costs one request, and a change after it one more.
func TestPatchAgainComparesWithWhatWasPatched(t *testing.T) {
	c, patches, pod := setup(t)
	p := status.NewPatcher(c, pod)
	pod.Status.Phase = corev1.PodRunning
	for range 2 {
		if err := p.Patch(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	pod.Status.Message = "later"
	if err := p.Patch(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	live := &corev1.Pod{}
	if err := c.Get(context.Background(), client.ObjectKeyFromObject(pod), live); err != nil {
		t.Fatal(err)
	}
	if *patches != 2 || live.Status.Message != "later" {
		t.Errorf("%d patches, message %q; want 2, later", *patches, live.Status.Message)
	}
}

// PatchOnReturn joins a failed patch to the reconcile's error; an object deleted meanwhile
// needs no status.
func TestPatchOnReturn(t *testing.T) {
	c, _, pod := setup(t)
	stale := pod.DeepCopy()
	p := status.NewPatcher(c, pod)
	pod.Status.Phase = corev1.PodRunning
	if err := c.Status().Update(context.Background(), pod.DeepCopy()); err != nil { // another writer
		t.Fatal(err)
	}
	ps := status.NewPatcher(c, stale)
	stale.Status.Phase = corev1.PodFailed
	reconcileErr := errors.New("stage A: failed")
	err := reconcileErr
	ps.PatchOnReturn(context.Background(), stale, &err)
	if !errors.Is(err, reconcileErr) || !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "status: ") {
		t.Errorf("err = %v, want the reconcile's error and the status conflict", err)
	}
	if err := c.Delete(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Status.Phase = corev1.PodSucceeded
	err = nil
	p.PatchOnReturn(context.Background(), pod, &err)
	if err != nil {
		t.Errorf("deleted meanwhile: err = %v, want nil", err)
	}
}

// A status computed from a stale copy conflicts, and its transition is not announced.
func TestStaleCopyConflictsAndEmitsNothing(t *testing.T) {
	c, _, stale := setup(t)
	newer := stale.DeepCopy()
	newer.Status.Phase = corev1.PodPending
	if err := c.Status().Update(context.Background(), newer); err != nil { // another writer
		t.Fatal(err)
	}
	rec := events.NewFakeRecorder(5)
	p := status.NewPatcher(c, stale)
	stale.Status.Phase = corev1.PodFailed
	p.Eventf(rec, stale, corev1.EventTypeWarning, "Failed", "Test", "failed")
	if err := p.Patch(context.Background(), stale); !apierrors.IsConflict(err) {
		t.Fatalf("err = %v, want a conflict", err)
	}
	if len(rec.Events) != 0 {
		t.Errorf("%d events after a failed patch, want 0", len(rec.Events))
	}
}
