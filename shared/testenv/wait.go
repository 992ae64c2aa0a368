// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WaitCached waits until cache (a manager's cache-backed client) holds obj at obj's
// resourceVersion — or, for an obj with no resourceVersion, holds no object of its name — so a
// reconcile driven by hand reads what the API server has.
func WaitCached(t testing.TB, cache client.Reader, obj client.Object) {
	t.Helper()
	want := obj.GetResourceVersion()
	ctx := Bounded(t) // a Get from an informer that has not synced waits for it
	Eventually(t, fmt.Sprintf("cache of %T %s at %q", obj, obj.GetName(), want), func() error {
		c := obj.DeepCopyObject().(client.Object)
		err := cache.Get(ctx, client.ObjectKeyFromObject(obj), c)
		switch {
		case want == "" && apierrors.IsNotFound(err):
			return nil
		case want == "":
			return fmt.Errorf("still cached (err %v)", err)
		case err != nil:
			return err
		case c.GetResourceVersion() != want:
			return fmt.Errorf("cached at %s", c.GetResourceVersion())
		}
		return nil
	})
}

// Events returns the Events in ns that regard the object named name.
func (e *Env) Events(t testing.TB, ns, name string) []corev1.Event {
	t.Helper()
	list := &corev1.EventList{}
	if err := e.Client.List(context.Background(), list, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var out []corev1.Event
	for _, ev := range list.Items {
		if ev.InvolvedObject.Name == name {
			out = append(out, ev)
		}
	}
	return out
}

// WaitForEvent waits until an Event of the type (corev1.EventTypeNormal or Warning), reason and
// message ("" = any) regards the object named name in ns, and returns it. Events are recorded
// asynchronously.
func (e *Env) WaitForEvent(t testing.TB, ns, name, eventType, reason, message string) corev1.Event {
	t.Helper()
	var found corev1.Event
	Eventually(t, fmt.Sprintf("%s event %s %q on %s", eventType, reason, message, name), func() error {
		evs := e.Events(t, ns, name)
		for _, ev := range evs {
			if ev.Type == eventType && ev.Reason == reason && (message == "" || ev.Message == message) {
				found = ev
				return nil
			}
		}
		return fmt.Errorf("not among %d events", len(evs))
	})
	return found
}

// Denied fails the test at once unless err is an admission denial (403 Forbidden), and reports
// each of want that its message does not contain.
func Denied(t testing.TB, err error, want ...string) {
	t.Helper()
	if err == nil || !apierrors.IsForbidden(err) {
		t.Fatalf("err = %v, want a denial", err)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("denial %q does not say %q", err, w)
		}
	}
}

// Conditioned is a custom resource with status conditions (as every stages-reconciled one has).
type Conditioned interface {
	client.Object
	GetConditions() []metav1.Condition
}

// WaitCondition waits until obj (read live into obj, by its namespace and name) has condition typ
// with the status and reason, observed at its current generation, and returns the condition.
func (e *Env) WaitCondition(t testing.TB, obj Conditioned, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	Eventually(t, fmt.Sprintf("%s %s=%s/%s", obj.GetName(), typ, status, reason), func() error {
		if err := e.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		c := meta.FindStatusCondition(obj.GetConditions(), typ)
		switch {
		case c == nil:
			return fmt.Errorf("no %s condition in %+v", typ, obj.GetConditions())
		case c.Status != status || c.Reason != reason || c.ObservedGeneration != obj.GetGeneration():
			return fmt.Errorf("%s = %s/%s (%s) at generation %d of %d", typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, obj.GetGeneration())
		}
		got = *c
		return nil
	})
	return got
}
