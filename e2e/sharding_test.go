// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	sharding "github.com/kpatterns/kpatterns/sharding/controller"
	"github.com/kpatterns/kpatterns/shared/shard"
)

// ringSettled is nil once the sharding ring in namespace has settled on exactly members.
func ringSettled(ctx context.Context, c client.Client, namespace string, members ...string) error {
	var leases coordinationv1.LeaseList
	if err := c.List(ctx, &leases, client.InNamespace(namespace), client.MatchingLabels{shard.RingLabel: sharding.Name}); err != nil {
		return err
	}
	_, err := shard.Settled(leases.Items, sharding.Name, members...)
	return err
}

// TestSharding runs sharding's replicas as processes (as its ServiceAccount) and scales them
// 1 → 3 → 2 (SIGTERM) → 4 (one SIGKILLed, its Lease left to expire; three started) while every
// source changes all along: at the end each child holds its source's last value (no update lost),
// no source was reconciled by two replicas at once (their own logs: controller-runtime's V(5)
// reconcile lines), and the ring has settled on the live replicas only.
func TestSharding(t *testing.T) {
	if kindRun {
		t.Skip("runs replica processes locally; the kind path deploys the Deployment instead")
	}
	f := features.New("sharding")
	// Server mode, the default; label mode runs the same scaling in the integration test.
	for _, mode := range []shard.Mode{shard.Server} {
		f = f.Assess(string(mode)+" mode: scaled 1 → 3 → 2 → 4 while sources change, nothing lost", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			installPattern(ctx, t, cfg, "sharding")
			var keys []client.ObjectKey
			for range 6 {
				ns := envconf.RandomName("shard", 12)
				if err := c.Create(ctx, testNamespace(ns)); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}) })
				for i := range 10 {
					src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s%d", i), Namespace: ns,
						Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"v": "0"}}
					if err := c.Create(ctx, src); err != nil {
						t.Fatal(err)
					}
					keys = append(keys, client.ObjectKeyFromObject(src))
				}
			}
			r := &replicas{t: t, ctx: ctx, cfg: cfg, c: c, pattern: "sharding"}
			run := func(member string) *localcluster.Pattern {
				r.args = []string{"--member", member, "--sharding", string(mode), "--leader-elect-lease-duration", "4s",
					"--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms",
					// controller-runtime logs each reconcile's start and end at V(5): read below
					"--zap-log-level", "5", "--zap-time-encoding", "rfc3339nano"}
				return r.start()
			}
			settled := func(members ...string) {
				waitFor(t, fmt.Sprintf("the ring settled on %v", members), func(ctx context.Context) (bool, error) {
					return ringSettled(ctx, c, operatorNamespace, members...) == nil, nil
				})
			}

			// A writer changes every source, round after round, until the scaling is done.
			writes, stop := writeRounds(ctx, t, fastClient(t, cfg), keys)
			r1 := run("r1")
			settled("r1")
			r2, r3 := run("r2"), run("r3")
			settled("r1", "r2", "r3")
			if err := r2.Stop(30 * time.Second); err != nil {
				t.Errorf("r2 on SIGTERM: %v", err)
			}
			settled("r1", "r3")
			_ = r3.Cmd.Process.Kill()
			<-r3.Exited
			later := []*localcluster.Pattern{r1, run("r4"), run("r5"), run("r6")}
			settled("r1", "r4", "r5", "r6")
			stop()
			last := strconv.Itoa(writes())
			waitFor(t, "every child holds its source's last value", func(ctx context.Context) (bool, error) {
				for _, k := range keys {
					child := &corev1.ConfigMap{}
					if err := c.Get(ctx, client.ObjectKey{Namespace: k.Namespace, Name: k.Name + mirror.Suffix}, child); err != nil {
						return false, client.IgnoreNotFound(err)
					}
					if child.Data["v"] != last {
						return false, nil
					}
				}
				return true, nil
			})
			t.Logf("%s mode: %s rounds of writes to %d sources while scaling; every child holds the last", mode, last, len(keys))
			spans, n := reconcileSpans(t, r.n)
			if o := overlapping(spans); len(o) > 0 {
				t.Errorf("%d pairs of reconciles of one source by two replicas at once, e.g. %v", len(o), o[:min(len(o), 5)])
			}
			t.Logf("%s mode: %d reconciles by %d replicas read from their logs, none of one source by two at once", mode, n, r.n)
			for _, p := range later { // their Leases go with them; r3's expired one and the assignment here
				if err := p.Stop(30 * time.Second); err != nil {
					t.Errorf("a replica on SIGTERM: %v", err)
				}
			}
			_ = c.DeleteAllOf(ctx, &coordinationv1.Lease{}, client.InNamespace(operatorNamespace), client.MatchingLabels{shard.RingLabel: sharding.Name})
			return ctx
		})
	}
	testEnv.Test(t, f.Feature())
}

// writeRounds sets every source's value to 1, 2, … in rounds until stop; writes then returns the
// value of the last complete round (every source holds it).
func writeRounds(ctx context.Context, t *testing.T, c client.Client, keys []client.ObjectKey) (writes func() int, stop func()) {
	var wg sync.WaitGroup
	done := make(chan struct{})
	round := 0
	wg.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			v := strconv.Itoa(round + 1)
			for _, k := range keys {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: k.Name, Namespace: k.Namespace}}
				if err := c.Patch(ctx, cm, client.RawPatch("application/merge-patch+json", fmt.Appendf(nil, `{"data":{"v":%q}}`, v))); err != nil {
					t.Errorf("writing %s: %v", k, err)
					return
				}
			}
			round++
		}
	})
	return func() int { wg.Wait(); return round }, func() { close(done) }
}

// reconcileSpan is one reconcile of a source by one replica, as its log tells.
type reconcileSpan struct {
	replica    int
	start, end time.Time
}

// reconcileSpans reads the mirror controller's reconciles from the logs of replicas 1…n
// (controller-runtime's V(5) "Reconciling" and "Reconcile…" lines, paired by reconcileID), by
// source; and how many there were.
func reconcileSpans(t *testing.T, n int) (map[string][]reconcileSpan, int) {
	t.Helper()
	spans, count := map[string][]reconcileSpan{}, 0
	for i := 1; i <= n; i++ {
		b, err := os.ReadFile(filepath.Join(logs, fmt.Sprintf("sharding-replica-%d.log", i)))
		if err != nil {
			t.Fatal(err)
		}
		started := map[string]time.Time{}
		for _, line := range strings.Split(string(b), "\n") {
			var l struct{ TS, Msg, Controller, Namespace, Name, ReconcileID string }
			if json.Unmarshal([]byte(line), &l) != nil || l.Controller != mirror.Name || !strings.HasPrefix(l.Msg, "Reconcil") {
				continue
			}
			ts, err := time.Parse(time.RFC3339Nano, l.TS)
			if err != nil {
				t.Fatalf("replica %d log: %v", i, err)
			}
			if l.Msg == "Reconciling" {
				started[l.ReconcileID] = ts
				continue
			}
			if begin, ok := started[l.ReconcileID]; ok {
				key := l.Namespace + "/" + l.Name
				spans[key] = append(spans[key], reconcileSpan{replica: i, start: begin, end: ts})
				count++
			}
		}
	}
	if count == 0 {
		t.Fatal("no reconcile in the replicas' logs")
	}
	return spans, count
}

// overlapping lists the pairs of reconciles of one source by two replicas that overlapped.
func overlapping(spans map[string][]reconcileSpan) []string {
	var out []string
	for key, s := range spans {
		for a := range s {
			for b := a + 1; b < len(s); b++ {
				if s[a].replica != s[b].replica && s[a].start.Before(s[b].end) && s[b].start.Before(s[a].end) {
					out = append(out, fmt.Sprintf("%s by replicas %d and %d", key, s[a].replica, s[b].replica))
				}
			}
		}
	}
	return out
}
