// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"maps"
	"slices"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// coordinator runs on the leader and is the one writer of the assignment (the ring's own Lease,
// a guarded update): a single writer gives assignments one order (their generation), which is
// what lets a member take a range only once everyone has seen the assignment that gave it —
// members computing an assignment each from what they see of the membership would have no such
// order while their views differ. It also keeps the previous assignment, so it moves the fewest
// ranges, and it moves them at a bounded rate: a rebalancing assignment (MaxMoves ranges at most)
// only once every member has acted on the previous one. The ranges of a member that is gone are
// reassigned at once.
type coordinator struct {
	mgr   manager.Manager
	o     Options
	alive liveness
}

// NeedLeaderElection: one coordinator at a time.
func (c *coordinator) NeedLeaderElection() bool { return true }

// Start runs the coordinator until ctx ends; a failed write is tried again on the next turn.
func (c *coordinator) Start(ctx context.Context) error {
	return watchLeases(ctx, c.mgr, c.o.RetryPeriod, func(ctx context.Context) error {
		if err := c.step(ctx); err != nil {
			c.mgr.GetLogger().WithName("shard").Info("assignment not written; trying again", "ring", c.o.Ring, "error", err.Error())
		}
		return nil
	}, func() error { return nil })
}

func (c *coordinator) step(ctx context.Context) error {
	ringLease, leases, err := ringLeases(ctx, c.mgr, c.o)
	if err != nil {
		return err
	}
	a, err := ReadAssignment(ringLease)
	if err != nil {
		return err // a person edited it: nothing is written over what cannot be read
	}
	live := c.alive.live(leases, c.o.Ring, time.Now())
	moves := c.o.MaxMoves // a rebalancing move only once every member has acted on the last one
	for name, l := range live {
		if acted(a, name, l) != nil {
			moves = 0
		}
	}
	next := Assign(a.Ranges, slices.Collect(maps.Keys(live)), moves)
	maps.DeleteFunc(next, func(_ string, s Set) bool { return s == 0 })
	if maps.Equal(next, a.Ranges) {
		return nil
	}
	if ringLease == nil {
		ringLease = &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: c.o.Namespace, Name: c.o.Ring,
			Labels: map[string]string{RingLabel: c.o.Ring}}}
	}
	l := ringLease.DeepCopy()
	if err := (Assignment{Generation: a.Generation + 1, Ranges: next}).write(l); err != nil {
		return err
	}
	if l.ResourceVersion == "" {
		return c.mgr.GetClient().Create(ctx, l)
	}
	return c.mgr.GetClient().Update(ctx, l)
}

// setupSharder (Label mode) adds the sharder, a controller on the leader: it labels each object of
// the split kind that the pattern caches and that has no range label yet with its range, once
// (a merge patch of that label only).
func setupSharder(mgr manager.Manager, o Options) error {
	c := mgr.GetClient()
	return builder.ControllerManagedBy(mgr).Named(o.Ring + "-sharder").For(o.Object).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			obj, ok := o.Object.DeepCopyObject().(client.Object)
			if !ok {
				return reconcile.Result{}, nil // a client.Object's copy is one
			}
			if err := c.Get(ctx, req.NamespacedName, obj); err != nil {
				return reconcile.Result{}, client.IgnoreNotFound(err)
			}
			if _, ok := obj.GetLabels()[ShardLabel]; ok {
				return reconcile.Result{}, nil
			}
			patch := client.MergeFrom(obj.DeepCopyObject().(client.Object))
			l := obj.GetLabels()
			if l == nil {
				l = map[string]string{}
			}
			l[ShardLabel] = rangeLabel(obj)
			obj.SetLabels(l)
			return reconcile.Result{}, client.IgnoreNotFound(c.Patch(ctx, obj, patch))
		}))
}
