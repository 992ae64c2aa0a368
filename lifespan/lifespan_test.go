// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests: a real kube-apiserver and etcd (envtest), the generated CRD and RBAC
// installed, each replica a full pattern (a Lifespan of its own) served by app.Serve as its ServiceAccount
// with real leader election — two replicas in one test stand for two processes.

import (
	"context"
	"errors"
	"flag"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	"github.com/kpatterns/kpatterns/lifespan/config"
	"github.com/kpatterns/kpatterns/lifespan/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	p := testenv.Pattern{Pattern: config.Pattern, AddToScheme: v1alpha1.AddToScheme, NewManager: newManager}
	testenv.Main(m, p, func(e *testenv.Env) { env = e })
}

var (
	lease     = client.ObjectKey{Namespace: testenv.Namespace, Name: "kpatterns-" + controller.Name}
	heartbeat = client.ObjectKey{Namespace: testenv.Namespace, Name: controller.Name}
)

// replica is one lifespan process: its pattern served as its ServiceAccount, with short lease
// timings and a 100 ms heartbeat, until stop.
type replica struct {
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T) *replica {
	t.Helper()
	l := &controller.Lifespan{}
	fs := flag.NewFlagSet("run", flag.ContinueOnError)
	l.BindFlags(fs)
	if err := fs.Parse([]string{"--heartbeat-interval=100ms"}); err != nil {
		t.Fatal(err)
	}
	o := app.RunOptions{Options: app.Options{Namespace: testenv.Namespace}, LeaderElect: true,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
	mgr := env.NewManager(t, o)
	if err := l.Setup(mgr, o.Namespace); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r := &replica{cancel: cancel, done: make(chan error, 1)}
	go func() { r.done <- app.Serve(ctx, mgr, config.Pattern, o, l.Hooks()) }()
	t.Cleanup(func() { _ = r.stop() })
	return r
}

func (r *replica) stop() error {
	r.cancel()
	err := <-r.done
	r.done <- err // stop is idempotent
	return err
}

func holder(t *testing.T) string {
	l := &coordinationv1.Lease{}
	if err := env.Client.Get(context.Background(), lease, l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

func terms(t *testing.T) []v1alpha1.Term {
	t.Helper()
	h := &v1alpha1.Heartbeat{}
	if err := env.Client.Get(context.Background(), heartbeat, h); err != nil {
		return nil
	}
	return h.Status.Terms
}

// leading waits until the Lease's holder has written a term with at least beats beats.
func leading(t *testing.T, beats int64) string {
	t.Helper()
	var id string
	testenv.Eventually(t, "a leader beating", func() error {
		id = holder(t)
		ts := terms(t)
		if id == "" || len(ts) == 0 || ts[len(ts)-1].Holder != id || ts[len(ts)-1].Beats < beats {
			return errors.New("no term of the Lease's holder yet")
		}
		return nil
	})
	return id
}

// disjoint checks the heartbeat history never shows two holders at once: each term begins after
// the previous term's last beat.
func disjoint(t *testing.T, ts []v1alpha1.Term) {
	t.Helper()
	for i := 1; i < len(ts); i++ {
		if !ts[i-1].LastBeat.Before(&ts[i].Acquired) {
			t.Errorf("term of %s acquired at %s before the previous term (%s) last beat at %s", ts[i].Holder,
				ts[i].Acquired.Format(time.StampMicro), ts[i-1].Holder, ts[i-1].LastBeat.Format(time.StampMicro))
		}
	}
}

func events(t *testing.T, ns string, reason controller.Reason) []eventsv1.Event {
	t.Helper()
	list := &eventsv1.EventList{}
	if err := env.Client.List(context.Background(), list, client.InNamespace(ns), client.MatchingLabels{controller.EmittedByLabel: controller.Name}); err != nil {
		t.Fatal(err)
	}
	return slices.DeleteFunc(list.Items, func(e eventsv1.Event) bool { return e.Reason != string(reason) })
}

func observedOf(t *testing.T, cm *corev1.ConfigMap) {
	t.Helper()
	testenv.Eventually(t, "Observed event of "+cm.Name+"@"+cm.ResourceVersion, func() error {
		return env.Client.Get(context.Background(), client.ObjectKey{Namespace: cm.Namespace, Name: controller.ObservedEventName(cm)}, &eventsv1.Event{})
	})
}

func count(t *testing.T, ns, configMap string) int {
	t.Helper()
	n := 0
	for _, e := range events(t, ns, controller.Observed) {
		if e.Regarding.Name == configMap {
			n++
		}
	}
	return n
}

// A leader beats; a standby takes over on SIGTERM (the stop of the first replica) with a term
// that begins after the first one's last beat; the first's leader exit hook marked its term
// stopped with no cause; each hook emitted its Event; labelled ConfigMaps are observed once per
// version across the handover, unlabelled ones never.
func TestHandover(t *testing.T) {
	ctx := context.Background()
	ns := env.Namespace(t)
	first := start(t)
	a := leading(t, 3)

	watched := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "watched", Namespace: ns, Labels: map[string]string{controller.ObserveLabel: "true"}}}
	ignored := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ignored", Namespace: ns}}
	for _, cm := range []*corev1.ConfigMap{watched, ignored} {
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	observedOf(t, watched)
	watched.Data = map[string]string{"k": "v"}
	if err := env.Client.Update(ctx, watched); err != nil {
		t.Fatal(err)
	}
	observedOf(t, watched)

	start(t) // the standby
	if err := first.stop(); err != nil {
		t.Fatalf("first replica: %v", err)
	}
	b := leading(t, 1)
	if b == a {
		t.Fatalf("the stopped replica %s still leads", a)
	}
	after := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "after", Namespace: ns, Labels: map[string]string{controller.ObserveLabel: "true"}}}
	if err := env.Client.Create(ctx, after); err != nil {
		t.Fatal(err)
	}
	observedOf(t, after) // the new leader observes; it re-listed watched first (one worker, FIFO)
	if n := count(t, ns, "watched"); n != 2 {
		t.Errorf("%d Observed events for the two versions of watched, want 2 (none lost, none repeated by the new leader)", n)
	}
	if n := count(t, ns, "ignored"); n != 0 {
		t.Errorf("%d Observed events for an unlabelled ConfigMap", n)
	}

	ts := terms(t)
	disjoint(t, ts)
	i := slices.IndexFunc(ts, func(x v1alpha1.Term) bool { return x.Holder == a })
	if i < 0 || i+1 >= len(ts) || ts[i+1].Holder != b {
		t.Fatalf("terms %+v: want %s's then %s's", ts, a, b)
	}
	// The first replica's exit hook ran before the standby's first beat unless the standby won
	// the race for the Heartbeat; either way its term is intact and no term of b was touched.
	if ts[i].Stopped != nil && (ts[i].StopCause != "" || ts[i].Stopped.Before(&ts[i].LastBeat)) {
		t.Errorf("term of %s: stopped %v cause %q last beat %v", a, ts[i].Stopped, ts[i].StopCause, ts[i].LastBeat)
	}
	if ts[i+1].Stopped != nil {
		t.Errorf("the leading replica's term is marked stopped: %+v", ts[i+1])
	}
	reasons := map[controller.Reason]int{}
	for _, r := range []controller.Reason{controller.Started, controller.Acquired, controller.LeaderExit, controller.Exit} {
		reasons[r] = len(events(t, testenv.Namespace, r))
	}
	want := map[controller.Reason]int{controller.Started: 2, controller.Acquired: 2, controller.LeaderExit: 1, controller.Exit: 1}
	for r, n := range want {
		if reasons[r] < n { // earlier tests' replicas emitted theirs too
			t.Errorf("%d %s events, want at least %d", reasons[r], r, n)
		}
	}
}

// A replica that loses its Lease (another holder takes it) returns "leader election lost", and
// its leader exit hook marks its term stopped with that cause and a Warning event.
func TestLeaseLossReachesLeaderExit(t *testing.T) {
	r := start(t)
	a := leading(t, 1)
	l := &coordinationv1.Lease{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // the leader renews it meanwhile
		if err := env.Client.Get(context.Background(), lease, l); err != nil {
			return err
		}
		l.Spec.HolderIdentity = ptr.To("thief")
		l.Spec.LeaseDurationSeconds = ptr.To[int32](3600)
		l.Spec.RenewTime = ptr.To(metav1.NowMicro())
		return env.Client.Update(context.Background(), l)
	})
	if err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-r.done:
		r.done <- err
		if err == nil || !strings.Contains(err.Error(), "leader election lost") {
			t.Fatalf("Serve returned %v, want leader election lost", err)
		}
	case <-time.After(time.Minute): // bounds a hung test only
		t.Fatal("the replica still runs a minute after its Lease was taken")
	}
	ts := terms(t)
	cur := ts[len(ts)-1]
	if cur.Holder != a || cur.Stopped == nil || !strings.Contains(cur.StopCause, "leader election lost") {
		t.Errorf("the lost term: %+v", cur)
	}
	warned := slices.ContainsFunc(events(t, testenv.Namespace, controller.LeaderExit), func(e eventsv1.Event) bool {
		return e.Type == corev1.EventTypeWarning && strings.Contains(e.Note, a) && strings.Contains(e.Note, "leader election lost")
	})
	if !warned {
		t.Error("no Warning LeaderExit event naming the loss")
	}
	if err := env.Client.Delete(context.Background(), l); err != nil { // give the Lease back for other tests
		t.Fatal(err)
	}
}
