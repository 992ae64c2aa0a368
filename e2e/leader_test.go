// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/mirror/controller"
)

// TestLeaderElection runs two replicas of a pattern: only the Lease holder acts; when it is
// stopped (SIGTERM) it releases the Lease and the other takes over. Local cluster only: on kind
// the pattern runs as a Deployment.
func TestLeaderElection(t *testing.T) {
	if kindRun {
		t.Skip("runs pattern processes locally; the kind path deploys a Deployment instead")
	}
	ns := envconf.RandomName("leader", 12)
	mirrored := func(t *testing.T, c client.Client, name string) {
		t.Helper()
		src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{controller.Label: controller.Source}}, Data: map[string]string{"k": "v"}}
		if err := c.Create(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		waitFor(t, name+" mirrored", func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + controller.Suffix}, &corev1.ConfigMap{})
			return err == nil, client.IgnoreNotFound(err)
		})
	}
	f := features.New("leader election").
		Assess("the Lease holder acts; on SIGTERM it hands over to the other replica", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := c.Create(ctx, testNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			installPattern(ctx, t, cfg, "mirror")
			r := &replicas{t: t, ctx: ctx, cfg: cfg, c: c, pattern: "mirror"}
			first := r.start()
			var leader string
			waitFor(t, "the first replica to take the Lease", func(ctx context.Context) (bool, error) {
				leader = r.holder()
				return leader != "", nil
			})
			r.start()
			mirrored(t, c, "before")

			if err := first.Stop(30 * time.Second); err != nil {
				t.Fatalf("the leader did not stop cleanly: %v", err)
			}
			waitFor(t, "the second replica to take the Lease", func(ctx context.Context) (bool, error) {
				h := r.holder()
				return h != "" && h != leader, nil
			})
			mirrored(t, c, "after")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// TestLeaderHandoverTimes measures how long a standby takes to lead, with run's default lease
// timings (15 s lease, 10 s renew deadline, 2 s retry period) or the flags in
// $KPATTERNS_LEASE_FLAGS (e.g. "--leader-elect-retry-period 500ms"): 5 times after SIGTERM to the leader
// (it releases the Lease on the way out), once after SIGKILL (the standby waits for the Lease to
// expire). From the signal to the Lease naming another holder, polled every 20 ms. A measurement,
// reported in the log and in the README, not a pass/fail threshold.
//
//	KPATTERNS_MEASURE=1 go test -count=1 -v -run TestLeaderHandoverTimes ./e2e/
func TestLeaderHandoverTimes(t *testing.T) {
	if os.Getenv("KPATTERNS_MEASURE") == "" || kindRun {
		t.Skip("a measurement on the local cluster: set KPATTERNS_MEASURE=1")
	}
	f := features.New("handover").
		Assess("SIGTERM and SIGKILL handovers", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			installPattern(ctx, t, cfg, "mirror")
			r := &replicas{t: t, ctx: ctx, cfg: cfg, c: clientFor(t, cfg), pattern: "mirror", args: strings.Fields(os.Getenv("KPATTERNS_LEASE_FLAGS"))}
			term, kill := r.handovers(5, nil)
			t.Logf("SIGTERM handovers %v: p50 %s, max %s; SIGKILL handover %s", term, term[len(term)/2], term[len(term)-1], kill)
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// replicas runs replicas of a pattern as local processes (as its ServiceAccount, with args) and
// hands leadership from one to the next.
type replicas struct {
	t       *testing.T
	ctx     context.Context
	cfg     *envconf.Config
	c       client.Client
	pattern string
	args    []string
	n       int
	leader  *localcluster.Pattern
}

// start starts one more replica, stopped when the test ends.
func (r *replicas) start() *localcluster.Pattern {
	r.n++
	log, err := os.Create(filepath.Join(logs, fmt.Sprintf("%s-replica-%d.log", r.pattern, r.n)))
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = log.Close() })
	p, err := localcluster.RunPattern(r.ctx, filepath.Join(bins, r.pattern), r.cfg.KubeconfigFile(), operatorNamespace, log, false, r.args...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = p.Stop(30 * time.Second) })
	return p
}

// holder is the identity the pattern's Lease names, "" if none.
func (r *replicas) holder() string {
	l := &coordinationv1.Lease{}
	if err := r.c.Get(r.ctx, client.ObjectKey{Namespace: operatorNamespace, Name: "kpatterns-" + r.pattern}, l); err != nil || l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// handovers starts a leader, then hands leadership over n times by SIGTERM and once by SIGKILL,
// each to a standby started for it, and returns the sorted SIGTERM times and the SIGKILL time
// (signal → the Lease names another holder, polled every 20 ms). led, if given, is called with each
// leader's identity before it is signalled, and with the last one; it may wait for the leader to
// be seen at work.
func (r *replicas) handovers(n int, led func(holder string)) (term []time.Duration, kill time.Duration) {
	r.leader = r.start()
	waitFor(r.t, "a leader", func(context.Context) (bool, error) { return r.holder() != "", nil })
	handover := func(signal func(*localcluster.Pattern)) time.Duration {
		standby := r.start()
		time.Sleep(time.Second) // the standby is up and polling the Lease
		was := r.holder()
		if led != nil {
			led(was)
		}
		began := time.Now()
		go signal(r.leader)
		for h := r.holder(); h == was || h == ""; h = r.holder() {
			if time.Since(began) > time.Minute {
				r.t.Fatalf("no new leader a minute after the signal")
			}
			time.Sleep(20 * time.Millisecond)
		}
		took := time.Since(began)
		r.leader = standby
		return took
	}
	for range n {
		term = append(term, handover(func(p *localcluster.Pattern) { _ = p.Stop(30 * time.Second) }))
	}
	kill = handover(func(p *localcluster.Pattern) { _ = p.Cmd.Process.Kill() })
	if led != nil {
		led(r.holder())
	}
	slices.Sort(term)
	return term, kill
}
