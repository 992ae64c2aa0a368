// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

type journal struct {
	mu     sync.Mutex
	events []string
}

func (j *journal) add(e string) {
	j.mu.Lock()
	defer j.mu.Unlock()
	j.events = append(j.events, e)
}

func (j *journal) has(e string) bool {
	j.mu.Lock()
	defer j.mu.Unlock()
	for _, have := range j.events {
		if strings.HasPrefix(have, e) {
			return true
		}
	}
	return false
}

// The hooks run in the documented order, through a real leader election: started → acquired
// (with the identity the Lease names) → a reconcile in flight when the process is told to stop
// finishes → leader exit → exit.
func TestHooksRunInOrder(t *testing.T) {
	env, err := testenv.Start(testenv.Pattern{Pattern: pattern})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Stop() }()
	var j journal
	p := pattern
	p.Name = "lifetime"
	setup := func(mgr manager.Manager) error {
		return ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("inflight").
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				if req.Name != "trigger" {
					return reconcile.Result{}, nil
				}
				j.add("reconcile started")
				<-ctx.Done() // in flight until the process stops
				j.add("reconcile finished")
				return reconcile.Result{}, nil
			}))
	}
	var exitDeadline bool
	hooks := app.Hooks{
		Started:  func(context.Context) error { j.add("started"); return nil },
		Acquired: func(_ context.Context, id string) { j.add("acquired " + id) },
		LeaderExit: func(ctx context.Context, id string, cause error) {
			j.add("leader exit " + id)
			<-ctx.Done() // a hook that hangs is cut off by ExitTimeout
			exitDeadline = errors.Is(ctx.Err(), context.DeadlineExceeded)
		},
		Exit:        func(_ context.Context, cause error) { j.add("exit") },
		ExitTimeout: 200 * time.Millisecond,
	}
	o := app.RunOptions{Options: app.Options{Namespace: testenv.Namespace}, LeaderElect: true, ProbeAddr: "0", MetricsAddr: "0"}
	opts, err := app.ManagerOptions(p, o)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(env.Admin, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Serve(ctx, mgr, p, o, hooks) }()
	testenv.Eventually(t, "leadership acquired", func() error {
		if !j.has("acquired ") {
			return errors.New("not yet")
		}
		return nil
	})
	if err := env.Client.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "trigger", Namespace: testenv.Namespace}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a reconcile in flight", func() error {
		if !j.has("reconcile started") {
			return errors.New("not yet")
		}
		return nil
	})
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	j.mu.Lock()
	defer j.mu.Unlock()
	if len(j.events) != 6 {
		t.Fatalf("events %q", j.events)
	}
	id := strings.TrimPrefix(j.events[1], "acquired ")
	want := []string{"started", "acquired " + id, "reconcile started", "reconcile finished", "leader exit " + id, "exit"}
	if strings.Join(j.events, "|") != strings.Join(want, "|") || !strings.Contains(id, "_") {
		t.Errorf("events %q, want %q with the Lease's holder identity", j.events, want)
	}
	if !exitDeadline {
		t.Error("the hanging leader exit hook was not cut off by ExitTimeout")
	}
}
