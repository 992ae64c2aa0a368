// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests: a real kube-apiserver with ShardedListAndWatch (envtest), the generated RBAC
// installed, and three replicas in this process, each a manager impersonating the ServiceAccount
// with its own leader election, member Lease and worker. Every reconcile's start and end is
// recorded per object and replica: no object may ever be reconciled by two replicas at once.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	"github.com/kpatterns/kpatterns/sharding/config"
	"github.com/kpatterns/kpatterns/sharding/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/shard"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, NewManager: ctrl.NewManager, Setup: mirror.Setup}, func(e *testenv.Env) { env = e })
}

// span is one reconcile of one source by one replica.
type span struct {
	replica    string
	start, end time.Time
}

// journal records every reconcile, by source.
type journal struct {
	mu    sync.Mutex
	spans map[client.ObjectKey][]span
}

func (j *journal) add(key client.ObjectKey, s span) {
	j.mu.Lock()
	defer j.mu.Unlock()
	if j.spans == nil {
		j.spans = map[client.ObjectKey][]span{}
	}
	j.spans[key] = append(j.spans[key], s)
}

// overlaps lists every pair of reconciles of one source by two replicas that overlapped in time.
func (j *journal) overlaps() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	var out []string
	for key, spans := range j.spans {
		for a := range spans {
			for b := a + 1; b < len(spans); b++ {
				x, y := spans[a], spans[b]
				if x.replica != y.replica && x.start.Before(y.end) && y.start.Before(x.end) {
					out = append(out, fmt.Sprintf("%s: %s %s–%s and %s %s–%s", key, x.replica, x.start.Format("15:04:05.000"),
						x.end.Format("15:04:05.000"), y.replica, y.start.Format("15:04:05.000"), y.end.Format("15:04:05.000")))
				}
			}
		}
	}
	return out
}

// last is the replica that last finished a reconcile of key after t ("" if none did).
func (j *journal) last(key client.ObjectKey, after time.Time) string {
	j.mu.Lock()
	defer j.mu.Unlock()
	who := ""
	var at time.Time
	for _, s := range j.spans[key] {
		if s.start.After(after) && s.end.After(at) {
			who, at = s.replica, s.end
		}
	}
	return who
}

func (j *journal) replicas() map[string]int {
	j.mu.Lock()
	defer j.mu.Unlock()
	n := map[string]int{}
	for _, spans := range j.spans {
		for _, s := range spans {
			n[s.replica]++
		}
	}
	return n
}

// replica is one running replica: stop ends it as SIGTERM does; cut severs its connection to the
// API server (a partitioned or frozen process), so it can no longer renew its Lease.
type replica struct {
	name  string
	stop  func()
	cut   atomic.Bool
	stall atomic.Bool // its requests hang until their context ends (a stalled connection, a full APF queue)
	done  chan error
}

// start runs a replica as `sharding run --member name --sharding mode --max-concurrent-reconciles
// 8` with short Lease timings, its mirror reconciler recording into j.
func start(t *testing.T, name string, mode shard.Mode, j *journal) *replica {
	t.Helper()
	r := &replica{name: name, done: make(chan error, 1)}
	o := app.RunOptions{Options: app.Options{Namespace: testenv.Namespace}, LeaderElect: true, ProbeAddr: "0", MetricsAddr: "0", Workers: 8,
		LeaseDuration: 4 * time.Second, RenewDeadline: 3 * time.Second, RetryPeriod: 500 * time.Millisecond}
	opts, err := app.ManagerOptions(config.Pattern, o)
	if err != nil {
		t.Fatal(err)
	}
	so := controller.Options(name, testenv.Namespace, mode, opts)
	so.Setup = func(mgr manager.Manager) error { // mirror.Setup, its reconciler recording each call
		m := &mirror.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(mirror.Name)}
		return ctrl.NewControllerManagedBy(mgr).Named(mirror.Name).Watches(&corev1.ConfigMap{}, mirror.EnqueueSource).
			Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
				begin := time.Now()
				// Slow work (an external call, say): a second replica acting on this source
				// while the first still works would overlap, not slip between its reconciles.
				time.Sleep(200 * time.Millisecond)
				res, err := m.Reconcile(ctx, req)
				j.add(req.NamespacedName, span{replica: name, start: begin, end: time.Now()})
				return res, err
			}))
	}
	shard.CacheOptions(so, &opts.Cache)
	opts.Controller.SkipNameValidation = ptr.To(true)
	opts.LeaderElectionReleaseOnCancel = true
	cfg := app.Impersonate(env.Admin, testenv.Namespace, config.Pattern.Name)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return severable{rt, &r.cut, &r.stall} })
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := shard.Setup(mgr, so); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	go func() { r.done <- app.Start(ctx, mgr) }()
	t.Cleanup(func() {
		cancel()
		if err := <-r.done; err != nil {
			t.Logf("replica %s: %v", name, err)
		}
	})
	return r
}

type severable struct {
	http.RoundTripper
	cut, stall *atomic.Bool
}

func (s severable) RoundTrip(req *http.Request) (*http.Response, error) {
	if s.cut.Load() {
		return nil, errors.New("severed")
	}
	if s.stall.Load() {
		<-req.Context().Done()
		return nil, req.Context().Err()
	}
	return s.RoundTripper.RoundTrip(req)
}

// settled waits until the ring has settled on exactly members, and returns its assignment.
func settled(t *testing.T, members ...string) shard.Assignment {
	t.Helper()
	var a shard.Assignment
	testenv.Eventually(t, fmt.Sprintf("ring settled on %v", members), func() (err error) {
		a, err = assignment(members...)
		return err
	})
	return a
}

// assignment is the ring's assignment as its Leases say now, an error unless settled on members.
func assignment(members ...string) (shard.Assignment, error) {
	var leases coordinationv1.LeaseList
	if err := env.Client.List(context.Background(), &leases, client.InNamespace(testenv.Namespace), client.MatchingLabels{shard.RingLabel: controller.Name}); err != nil {
		return shard.Assignment{}, err
	}
	return shard.Settled(leases.Items, controller.Name, members...)
}

// sources creates n sources in each of k fresh namespaces.
func sources(t *testing.T, k, n int) []client.ObjectKey {
	t.Helper()
	var keys []client.ObjectKey
	for range k {
		ns := env.Namespace(t)
		for i := range n {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: ns,
				Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"v": "0"}}
			if err := env.Client.Create(context.Background(), cm); err != nil {
				t.Fatal(err)
			}
			keys = append(keys, client.ObjectKeyFromObject(cm))
		}
	}
	return keys
}

// write sets every source's data to v; converged waits until every child holds v.
func write(t *testing.T, keys []client.ObjectKey, v string) {
	t.Helper()
	for _, k := range keys {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace}}
		if err := env.Client.Patch(context.Background(), cm, client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"data":{"v":%q}}`, v))); err != nil {
			t.Fatal(err)
		}
	}
}

func converged(t *testing.T, keys []client.ObjectKey, v string) {
	t.Helper()
	testenv.Eventually(t, "every child holds "+v, func() error {
		for _, k := range keys {
			child := &corev1.ConfigMap{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: k.Namespace, Name: k.Name + mirror.Suffix}, child); err != nil {
				return err
			}
			if child.Data["v"] != v {
				return fmt.Errorf("%s holds %q", child.Name, child.Data["v"])
			}
		}
		return nil
	})
}

// owner is the member the assignment gives key's range to.
func owner(a shard.Assignment, mode shard.Mode, key client.ObjectKey, uid string) string {
	r := shard.RangeOf(key.Namespace)
	if mode == shard.Label {
		r = shard.RangeOf(uid)
	}
	for m, s := range a.Ranges {
		if s.Has(r) {
			return m
		}
	}
	return ""
}

// ownersOf is the set of members assignment a gives the sources keys to.
func ownersOf(t *testing.T, a shard.Assignment, mode shard.Mode, keys []client.ObjectKey) map[string]bool {
	t.Helper()
	owners := map[string]bool{}
	for _, k := range keys {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), k, cm); err != nil {
			t.Fatal(err)
		}
		owners[owner(a, mode, k, string(cm.UID))] = true
	}
	return owners
}

// TestRing runs three replicas in each mode: every source is mirrored by the replica its range is
// assigned to; one replica stopped (SIGTERM) and one severed from the API server (its Lease left
// to expire) lose nothing; no source is ever reconciled by two replicas at once.
func TestRing(t *testing.T) {
	for _, mode := range []shard.Mode{shard.Server, shard.Label} {
		t.Run(string(mode), func(t *testing.T) {
			j := &journal{}
			a := start(t, "a", mode, j)
			keys := sources(t, 8, 4)
			converged(t, keys, "0")
			settled(t, "a")

			// b and c join while the sources change: ranges move from a to them.
			write(t, keys, "1")
			b, c := start(t, "b", mode, j), start(t, "c", mode, j)
			converged(t, keys, "1")
			as := settled(t, "a", "b", "c")
			// Server mode assigns by namespace: 8 may all hash to two members' ranges (about 4 %
			// of runs), so sources in more namespaces are added until each member owns some.
			for range 20 {
				if len(ownersOf(t, as, mode, keys)) == 3 {
					break
				}
				keys = append(keys, sources(t, 1, 4)...)
			}
			if owners := ownersOf(t, as, mode, keys); len(owners) != 3 {
				t.Fatalf("sources owned by %v only, after adding 20 namespaces", owners)
			}

			// Every source's next change is mirrored by the member its range belongs to.
			before := time.Now()
			write(t, keys, "1b")
			converged(t, keys, "1b")
			for _, k := range keys {
				cm := &corev1.ConfigMap{}
				if err := env.Client.Get(context.Background(), k, cm); err != nil {
					t.Fatal(err)
				}
				testenv.Eventually(t, "the reconcile of "+k.String()+" recorded", func() error {
					// The assignment as it is now: on a loaded machine a Lease can expire
					// after settled, and its ranges move (the new owner then mirrors).
					now, err := assignment(a.name, b.name, c.name)
					if err != nil {
						return err
					}
					if got, want := j.last(k, before), owner(now, mode, k, string(cm.UID)); got != want {
						return fmt.Errorf("mirrored by %q, assigned to %q", got, want)
					}
					return nil
				})
			}

			// b stops as on SIGTERM while the sources change: its ranges move at once.
			write(t, keys, "2")
			b.stop()
			if err := <-b.done; err != nil {
				t.Errorf("b stopped with %v", err)
			}
			b.done <- nil // for the cleanup
			converged(t, keys, "2")
			settled(t, "a", "c")

			// c is severed: it fences itself, its Lease expires, a takes everything.
			c.cut.Store(true)
			write(t, keys, "3")
			converged(t, keys, "3")
			settled(t, "a")
			if err := <-c.done; err == nil {
				t.Errorf("c, severed, stopped without an error")
			}
			c.done <- nil

			if o := j.overlaps(); len(o) > 0 {
				t.Errorf("%d overlapping reconciles:\n%v", len(o), o[:min(len(o), 10)])
			}
			if n := j.replicas(); len(n) != 3 {
				t.Errorf("reconciles per replica %v: want work on all three", n)
			}
			for _, k := range keys { // leave the other mode's replicas nothing to do
				if err := env.Client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace}}); err != nil {
					t.Error(err)
				}
			}
			a.stop()
		})
	}
}

// A member whose requests stall — they neither fail nor complete — fences itself by its renew
// deadline and exits, and its reconciles in flight end before the other member, which takes its
// ranges once its Lease expires, works them: no source is reconciled by both at once.
func TestStalledMemberFencesItself(t *testing.T) {
	j := &journal{}
	a := start(t, "a", shard.Server, j)
	b := start(t, "b", shard.Server, j)
	keys := sources(t, 8, 4)
	converged(t, keys, "0")
	as := settled(t, "a", "b")
	for range 20 { // b must own sources
		if ownersOf(t, as, shard.Server, keys)["b"] {
			break
		}
		keys = append(keys, sources(t, 1, 4)...)
	}
	write(t, keys, "1")
	time.Sleep(50 * time.Millisecond) // not a timing assertion: so that b has reconciles in flight when it stalls
	b.stall.Store(true)
	converged(t, keys, "1")
	settled(t, "a")
	select {
	case err := <-b.done:
		if err == nil {
			t.Error("b, stalled, stopped without an error")
		}
		b.done <- nil // for the cleanup
	case <-time.After(time.Minute): // bounds a hung test only
		t.Fatal("b, stalled, never fenced itself: it is still running a minute after its Lease expired")
	}
	if o := j.overlaps(); len(o) > 0 {
		t.Errorf("%d overlapping reconciles:\n%v", len(o), o[:min(len(o), 10)])
	}
	for _, k := range keys {
		if err := env.Client.Delete(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace}}); err != nil {
			t.Error(err)
		}
	}
	a.stop()
}
