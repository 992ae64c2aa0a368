// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kpatterns/kpatterns/summary/api/v1alpha1"
)

func TestStripPodKeepsWhatTheSummaryReads(t *testing.T) {
	now := metav1.Now()
	full := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "web"},
			Annotations: map[string]string{"big": "annotation"}, DeletionTimestamp: &now,
			ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubelet"}}, OwnerReferences: []metav1.OwnerReference{{Name: "rs"}}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx", Env: []corev1.EnvVar{{Name: "A", Value: "B"}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1", Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, Message: "long message"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "app", Ready: true}}},
	}
	got, err := StripPod(full)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p", Namespace: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"app": "web"}, DeletionTimestamp: &now},
		Status:     corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("StripPod (-want +got):\n%s", d)
	}
	if tomb := "not a pod"; func() any { v, _ := StripPod(tomb); return v }() != tomb {
		t.Error("a non-Pod is not passed through")
	}
}

func TestMatchesAndSummarize(t *testing.T) {
	if Matches(nil, map[string]string{"a": "b"}) || Matches(map[string]string{"a": "b"}, map[string]string{"a": "c"}) ||
		!Matches(map[string]string{"a": "b"}, map[string]string{"a": "b", "x": "y"}) {
		t.Error("Matches")
	}
	pod := func(phase corev1.PodPhase, ready corev1.ConditionStatus) corev1.Pod {
		return corev1.Pod{Status: corev1.PodStatus{Phase: phase, Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: ready}}}}
	}
	total, ready, phases := Summarize([]corev1.Pod{pod(corev1.PodRunning, "True"), pod(corev1.PodRunning, "False"),
		pod("", "False"), pod(corev1.PodPending, "False"), pod(corev1.PodSucceeded, "False"), pod(corev1.PodFailed, "False"), pod(corev1.PodUnknown, "Unknown")})
	if total != 7 || ready != 1 || phases != (v1alpha1.PodCounts{Pending: 2, Running: 2, Succeeded: 1, Failed: 1, Unknown: 1}) {
		t.Errorf("Summarize = %d, %d, %+v", total, ready, phases)
	}
	terminating := pod(corev1.PodRunning, "True")
	terminating.DeletionTimestamp = &metav1.Time{}
	if total, ready, phases := Summarize([]corev1.Pod{terminating}); total != 1 || ready != 0 || phases.Running != 1 {
		t.Errorf("a terminating ready Pod: Summarize = %d, %d, %+v; want 1 Pod, running, not ready", total, ready, phases)
	}
}
