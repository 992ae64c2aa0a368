// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/go-logr/logr"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// returns fails t unless f returns within a minute: these tests are of calls that used to block
// for ever, and the bound only ends a hung test.
func returns(t *testing.T, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		t.Fatalf("%s did not return", what)
		return nil
	}
}

// A worker whose reconcile outlived the grace period: the range change's stop fails, and the
// member's leave (the error path) stops it again. That second stop returns the first's error at
// once instead of waiting on a channel already drained.
func TestStopTwiceReturns(t *testing.T) {
	w := &worker{cancel: func() {}, done: make(chan error, 1)}
	w.done <- errors.New("failed waiting for all runnables to end within grace period")
	m := &member{o: Options{Member: "m0"}, log: logr.Discard(), work: w, working: All}
	if err := m.setWork(context.Background(), 0); err == nil {
		t.Fatal("setWork over a worker that did not stop: no error")
	}
	if err := returns(t, "leave after a failed stop", m.leave); err == nil {
		t.Error("leave over a worker that did not stop: no error, so its ranges would be given up")
	}
}

// clientsOnly is a manager that has only clients: what publish uses.
type clientsOnly struct {
	manager.Manager
	c client.Client
}

func (m clientsOnly) GetClient() client.Client    { return m.c }
func (m clientsOnly) GetAPIReader() client.Reader { return m.c }

// A Lease write that hangs (a stalled connection, a full APF queue) ends by the renew deadline,
// and the member then fences itself: publish does not wait for ever while peers count it gone.
func TestLeaseWriteEndsByTheRenewDeadline(t *testing.T) {
	l := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: "ops", Name: "ring-m0", ResourceVersion: "1"}}
	stalled := interceptor.Funcs{Update: func(ctx context.Context, _ client.WithWatch, _ client.Object, _ ...client.UpdateOption) error {
		<-ctx.Done() // the request never completes
		return ctx.Err()
	}}
	c := fake.NewClientBuilder().WithScheme(runtime.NewScheme()).WithInterceptorFuncs(stalled).Build()
	o := Options{Member: "m0", Namespace: "ops", LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 500 * time.Millisecond}
	m := &member{mgr: clientsOnly{c: c}, o: o, log: logr.Discard(), lease: l, renewed: time.Now()}
	err := returns(t, "publish over a stalled Update", func() error { return m.publish(context.Background(), Member{Held: All}, time.Now()) })
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("publish: %v, want the deadline exceeded", err)
	}
	m.renewedAt.Store(time.Now().Add(-3 * time.Second).UnixNano())
	if err := m.healthy(nil); err == nil {
		t.Error("healthy although the member has not renewed for longer than its renew deadline")
	}
}
