// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// When a due rollout may be written: not while the workload is paused, not within the coalescing
// window of its last rollout, and at most at the rollout rate (--max-rollouts-per-second).

import (
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// hold is whether a due rollout of obj must wait, and the result that requeues it for then:
// while paused (until the pause-until time; without one the annotation's removal reconciles),
// within the coalescing window (rolled with what comes next), or for its slot of the rollout rate.
func (r *Reconciler) hold(obj client.Object, req reconcile.Request) (reconcile.Result, bool) {
	if paused, until := r.paused(obj); paused {
		if until.IsZero() {
			return reconcile.Result{}, true
		}
		return reconcile.Result{RequeueAfter: time.Until(until) + time.Second}, true
	}
	if wait := r.wait(req.NamespacedName); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, true
	}
	if wait := r.limit.wait(r.Workload.Kind + "/" + req.String()); wait > 0 {
		return reconcile.Result{RequeueAfter: wait}, true
	}
	return reconcile.Result{}, false
}

// rollouts hands out rollout slots at a bounded rate: a workload due to roll reserves one and is
// requeued for it, so waiting costs no reconcile in between.
type rollouts struct {
	limiter *rate.Limiter
	slots   sync.Map // workload key (kind/namespace/name) → time.Time of its reserved slot
}

// wait is how long until the workload's slot (0: roll now), reserving one if it has none.
func (l *rollouts) wait(key string) time.Duration {
	if l == nil {
		return 0
	}
	if at, ok := l.slots.Load(key); ok {
		if d := time.Until(at.(time.Time)); d > 0 {
			return d
		}
		l.slots.Delete(key)
		return 0
	}
	if d := l.limiter.Reserve().Delay(); d > 0 {
		l.slots.Store(key, time.Now().Add(d))
		return d
	}
	return 0
}

// paused says whether the workload's rollouts are held (PausedAnnotation, PausedUntilAnnotation),
// and until when (zero: until the annotation goes). A time that does not parse holds them, with a
// Warning event.
func (r *Reconciler) paused(obj client.Object) (bool, time.Time) {
	a := obj.GetAnnotations()
	if a[PausedAnnotation] == "true" {
		return true, time.Time{}
	}
	v, ok := a[PausedUntilAnnotation]
	if !ok {
		return false, time.Time{}
	}
	until, err := time.Parse(time.RFC3339, v)
	if err != nil {
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonInvalidPause, "Rollout",
			"%s %q is not an RFC 3339 time: rollouts are held until it is fixed or removed", PausedUntilAnnotation, v)
		return true, time.Time{}
	}
	return time.Now().Before(until), until
}

// wait is how long until the workload may roll again (0: now).
func (r *Reconciler) wait(key client.ObjectKey) time.Duration {
	last, ok := r.rolled.Load(key)
	if !ok {
		return 0
	}
	return max(0, r.CoalesceWindow-time.Since(last.(time.Time)))
}
