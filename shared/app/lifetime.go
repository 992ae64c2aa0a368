// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Hooks are a pattern's lifetime hooks, all optional. Their order is fixed:
//
//	Started → Acquired → (stopping: SIGTERM, or leadership lost) → reconcile workers stopped →
//	LeaderExit → Exit
//
// Process scope: Started runs before the manager starts; Exit runs after the manager has
// returned — every controller and webhook stopped — and before the process ends. Leader scope:
// Acquired runs once this replica holds the Lease, with the holder identity the Lease names,
// while the Lease is being renewed; LeaderExit runs only if Acquired did, after the manager has
// returned, so (on a clean shutdown) no reconcile is in flight. A loss of leadership reaches LeaderExit as its cause
// (controller-runtime offers no callback for it: the manager returns "leader election lost"),
// a clean shutdown as nil. LeaderExit must not assume it still holds the Lease — after a loss
// another replica may already lead, and after a clean shutdown the Lease is being released — so
// it may only tidy up what this replica alone wrote. Each exit hook is bounded by ExitTimeout.
//
// What this cannot promise: a process killed (SIGKILL, OOM) runs no exit hook. On a clean
// shutdown the manager waits for in-flight reconciles up to its graceful shutdown timeout (30 s);
// on a lost Lease controller-runtime skips that wait (it sets the timeout to 0 and returns "leader
// election lost"), so LeaderExit may then run while reconciles of this replica are still finishing
// — and a loss is noticed only when the renew deadline has passed, when another replica may
// already lead. A LeaderExit hook must therefore be idempotent and tolerate concurrent work.
type Hooks struct {
	Started    func(ctx context.Context) error
	Acquired   func(ctx context.Context, identity string)
	LeaderExit func(ctx context.Context, identity string, cause error)
	Exit       func(ctx context.Context, cause error)
	// ExitTimeout bounds each exit hook; 0 means 10 s.
	ExitTimeout time.Duration
}

// Serve is Start with lifetime hooks: it runs mgr — built from ManagerOptions(p, o) — until ctx
// ends or the manager fails (a lost Lease, say), calls h around it, and returns the manager's error.
func Serve(ctx context.Context, mgr manager.Manager, p Pattern, o RunOptions, h Hooks) error {
	if h.Started != nil {
		if err := h.Started(ctx); err != nil {
			return err
		}
	}
	leader := &leaderHook{hooks: h, reader: mgr.GetAPIReader(), lease: client.ObjectKey{Namespace: o.Namespace, Name: LeaseName(p.Name)},
		electing: o.LeaderElect && !p.AdmissionOnly, identity: make(chan string, 1)}
	if h.Acquired != nil || h.LeaderExit != nil {
		if err := mgr.Add(leader); err != nil {
			return err
		}
	}
	err := Start(ctx, mgr) // returns once every runnable has stopped: no reconcile in flight
	timeout := h.ExitTimeout
	if timeout == 0 {
		timeout = 10 * time.Second
	}
	if identity, acquired := leader.held(); acquired && h.LeaderExit != nil {
		exitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		h.LeaderExit(exitCtx, identity, err)
		cancel()
	}
	if h.Exit != nil {
		exitCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), timeout)
		h.Exit(exitCtx, err)
		cancel()
	}
	return err
}

// stopGrace bounds how long the manager may take to return once ctx has ended: its graceful
// shutdown timeout (30 s) and some.
const stopGrace = 45 * time.Second

// Start is mgr.Start bounded once stopped: start with the 45 s stopGrace.
func Start(ctx context.Context, mgr manager.Manager) error { return start(ctx, mgr, stopGrace) }

// start runs mgr until ctx ends and returns its error — or, if the manager has not returned grace
// after ctx ended, an error saying so, and the process exits. controller-runtime v0.25's manager
// never returns when it is stopped before every cache synced (runnableGroup.Start loops on the
// cancelled context: kubernetes-sigs/controller-runtime#3440), so a pattern whose RBAC lacks list
// or watch on what it caches would ignore SIGTERM, at 100% CPU, until its kubelet's SIGKILL.
func start(ctx context.Context, mgr manager.Manager, grace time.Duration) error {
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
	}
	select {
	case err := <-done:
		return err
	case <-time.After(grace):
		return fmt.Errorf("the manager had not stopped %s after it was told to (a cache that never synced: is list or watch forbidden?)", grace)
	}
}

// leaderHook is a runnable that needs leader election: the manager starts it once this replica
// leads (at once without leader election).
type leaderHook struct {
	hooks    Hooks
	reader   client.Reader
	lease    client.ObjectKey
	electing bool
	identity chan string // holds the identity once Acquired ran
}

func (l *leaderHook) NeedLeaderElection() bool { return true }

func (l *leaderHook) Start(ctx context.Context) error {
	identity := l.holder(ctx)
	if l.hooks.Acquired != nil {
		l.hooks.Acquired(ctx, identity)
	}
	l.identity <- identity
	<-ctx.Done()
	return nil
}

// holder is the identity the Lease names now — this replica's, since it leads — or the host
// name without leader election.
func (l *leaderHook) holder(ctx context.Context) string {
	host, _ := os.Hostname()
	if !l.electing {
		return host
	}
	lease := &coordinationv1.Lease{}
	if err := l.reader.Get(ctx, l.lease, lease); err != nil || lease.Spec.HolderIdentity == nil {
		logf.FromContext(ctx).Error(errors.Join(err, errors.New("no holder")), "reading the Lease's holder identity", "lease", l.lease)
		return host
	}
	return *lease.Spec.HolderIdentity
}

func (l *leaderHook) held() (string, bool) {
	select {
	case id := <-l.identity:
		return id, true
	default:
		return "", false
	}
}
