// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"testing"

	clientgoscheme "k8s.io/client-go/kubernetes/scheme"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

func cm(name, label string) *corev1.ConfigMap {
	c := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"}}
	if label != "" {
		c.Labels = map[string]string{Label: label}
	}
	return c
}

func TestMapConfigMapToSource(t *testing.T) {
	req := func(name string) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: "ns", Name: name}}}
	}
	for _, tc := range []struct {
		obj  *corev1.ConfigMap
		want []reconcile.Request
	}{
		{cm("app", Source), req("app")},
		{cm("app-mirror", Child), req("app")},
		{cm("app-mirror-mirror", Child), req("app-mirror")},
		{cm("odd", Child), nil},                       // a child label on a name no source derives
		{cm("app", "false"), nil},                     // not a source
		{cm("app", ""), nil},                          // unlabelled
		{cm("app-mirror", Source), req("app-mirror")}, // a source whose name ends in -mirror
	} {
		if d := cmp.Diff(tc.want, MapConfigMapToSource(context.Background(), tc.obj)); d != "" {
			t.Errorf("MapConfigMapToSource(%s %v) (-want +got):\n%s", tc.obj.Name, tc.obj.Labels, d)
		}
	}
}

// TestChildEventsWaitBehindSources: the priority each event is enqueued at, read back from
// controller-runtime's priority queue.
func TestChildEventsWaitBehindSources(t *testing.T) {
	ctx := context.Background()
	changed := func(o *corev1.ConfigMap) *corev1.ConfigMap { o = o.DeepCopy(); o.ResourceVersion = "2"; return o }
	src, child := cm("app", Source), cm("app-mirror", Child)
	for _, tc := range []struct {
		event string
		send  func(q workqueue.TypedRateLimitingInterface[reconcile.Request])
		want  int
	}{
		{"source created", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			EnqueueSource.Create(ctx, event.CreateEvent{Object: src}, q)
		}, 0},
		{"source listed at start", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			EnqueueSource.Create(ctx, event.CreateEvent{Object: src, IsInInitialList: true}, q)
		}, handler.LowPriority},
		{"source changed", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			EnqueueSource.Update(ctx, event.UpdateEvent{ObjectOld: src, ObjectNew: changed(src)}, q)
		}, 0},
		{"child created", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			EnqueueSource.Create(ctx, event.CreateEvent{Object: child}, q)
		}, handler.LowPriority},
		{"child changed", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			EnqueueSource.Update(ctx, event.UpdateEvent{ObjectOld: child, ObjectNew: changed(child)}, q)
		}, handler.LowPriority},
		{"child deleted", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			EnqueueSource.Delete(ctx, event.DeleteEvent{Object: child}, q)
		}, 0},
		{"child deleted, then created again", func(q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			EnqueueSource.Delete(ctx, event.DeleteEvent{Object: child}, q)
			EnqueueSource.Create(ctx, event.CreateEvent{Object: child}, q)
		}, 0}, // one request, at the higher of the two
	} {
		q := priorityqueue.New[reconcile.Request](tc.event)
		tc.send(q)
		if q.Len() != 1 {
			t.Errorf("%s: %d requests queued, want 1", tc.event, q.Len())
		}
		req, priority, _ := q.GetWithPriority()
		if req.Name != "app" || priority != tc.want {
			t.Errorf("%s: %s at priority %d, want app at %d", tc.event, req.Name, priority, tc.want)
		}
		q.ShutDown()
	}
}

func TestDesiredReplacesDataAndKeepsOthersFields(t *testing.T) {
	src := cm("app", Source)
	src.UID = "u1"
	src.Data = map[string]string{"a": "1"}
	child := cm("app-mirror", "")
	child.Labels = map[string]string{"team": "x"}
	child.Data = map[string]string{"a": "0", "stale": "yes"}
	child.BinaryData = map[string][]byte{"old": {1}}
	if err := desired(src, child, clientgoscheme.Scheme); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(map[string]string{"a": "1"}, child.Data); d != "" {
		t.Errorf("data (-want +got): %s", d)
	}
	if child.BinaryData != nil {
		t.Errorf("binaryData = %v, want none (the source has none)", child.BinaryData)
	}
	if child.Labels["team"] != "x" || child.Labels[Label] != Child {
		t.Errorf("labels = %v", child.Labels)
	}
	o := metav1.GetControllerOf(child)
	if o == nil || o.UID != "u1" || o.Kind != "ConfigMap" || o.Name != "app" || !*o.BlockOwnerDeletion {
		t.Errorf("controller reference = %+v", o)
	}
	if err := desired(src, child, clientgoscheme.Scheme); err != nil { // idempotent: one controller reference
		t.Fatal(err)
	}
	if len(child.OwnerReferences) != 1 {
		t.Errorf("ownerReferences = %v", child.OwnerReferences)
	}
	if !converged(src, child) {
		t.Error("Converged after Desired = false")
	}
}

func TestConverged(t *testing.T) {
	src := cm("app", Source)
	child := cm("app-mirror", Child)
	if !converged(src, child) {
		t.Error("empty source and child: not converged")
	}
	child.Data = map[string]string{} // empty and absent maps are the same content
	if !converged(src, child) {
		t.Error("empty data map vs nil: not converged")
	}
	src.BinaryData = map[string][]byte{"b": {1}}
	if converged(src, child) {
		t.Error("binaryData differs: converged")
	}
	child.BinaryData = map[string][]byte{"b": {1}}
	child.Labels = nil
	if converged(src, child) {
		t.Error("child lost its label: converged")
	}
}
