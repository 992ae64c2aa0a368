// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package status is the one way kpatterns patterns write a custom resource's status: take a
// Patcher on the object as read, change its status, then Patch once — only if something changed,
// as a merge patch with an optimistic lock, so a status computed from a stale cached copy fails
// with a conflict and the reconcile retries on a fresh read instead of overwriting a newer one.
// Events that announce a transition of the status are queued on the Patcher and emitted only
// once the patch succeeded: a reconcile that ran on a stale copy emits nothing, so a transition is
// announced once, not once per reconcile that saw the old status.
package status

import (
	"context"
	"errors"
	"fmt"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Patcher patches one object's status from what it was when the Patcher was taken.
type Patcher[T client.Object] struct {
	client client.Client
	before T
	events []func()
}

// NewPatcher remembers obj as read; call it before changing obj's status.
func NewPatcher[T client.Object](c client.Client, obj T) *Patcher[T] {
	return &Patcher[T]{client: c, before: obj.DeepCopyObject().(T)}
}

// Eventf queues an event for after a successful Patch (events.EventRecorder's Eventf).
func (p *Patcher[T]) Eventf(r events.EventRecorder, regarding runtime.Object, eventtype, reason, action, note string, args ...any) {
	p.events = append(p.events, func() { r.Eventf(regarding, nil, eventtype, reason, action, note, args...) })
}

// Patch writes obj's status if obj differs from what it was, then emits the queued events; on an
// error it emits none. An unchanged object costs no request. A later Patch compares with obj as
// patched.
func (p *Patcher[T]) Patch(ctx context.Context, obj T) error {
	if !apiequality.Semantic.DeepEqual(p.before, obj) {
		if err := p.client.Status().Patch(ctx, obj, client.MergeFromWithOptions(p.before, client.MergeFromWithOptimisticLock{})); err != nil {
			return err
		}
	}
	p.before = obj.DeepCopyObject().(T)
	for _, emit := range p.events {
		emit()
	}
	p.events = nil
	return nil
}

// PatchOnReturn is Patch for a deferred call, as a Reconcile ends: its error is joined to *err;
// an object deleted meanwhile needs no status.
func (p *Patcher[T]) PatchOnReturn(ctx context.Context, obj T, err *error) {
	if perr := client.IgnoreNotFound(p.Patch(ctx, obj)); perr != nil {
		*err = errors.Join(*err, fmt.Errorf("status: %w", perr))
	}
}

// Stored takes obj, as another write returned it, as what later Patch calls compare with.
func (p *Patcher[T]) Stored(obj T) { p.before = obj.DeepCopyObject().(T) }
