// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
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

// TestShardingBench measures sharding on the local cluster and writes docs/sharding.md: per
// replica memory and the time to converge $KPATTERNS_SHARDING_N sources (default 10,000) with 1, 2
// and 4 replicas in each mode, the writes that assign them, a rebalance (a replica joins, one
// leaves, one is killed), and a simulation of the ring beyond this machine.
//
//	KPATTERNS_BENCH_SHARDING=1 go test -count=1 -v -timeout 90m -run TestShardingBench ./e2e/
func TestShardingBench(t *testing.T) {
	if os.Getenv("KPATTERNS_BENCH_SHARDING") == "" || kindRun {
		t.Skip("a measurement on the local cluster: set KPATTERNS_BENCH_SHARDING=1 (go tool task bench:sharding)")
	}
	n := 10000
	if v, err := strconv.Atoi(os.Getenv("KPATTERNS_SHARDING_N")); err == nil {
		n = v
	}
	began := time.Now()
	f := features.New("sharding bench").Assess("memory, convergence and rebalancing by replicas", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		t.Setenv("GODEBUG", "gctrace=1") // the replicas inherit it: their logs have each GC's live heap
		t.Setenv("GOGC", "25")
		c, rc := fastClientConfig(t, cfg)
		installPattern(ctx, t, cfg, "sharding")
		sources := shardingSources(ctx, t, c, n)
		writes := func() int {
			return apiserverWrites(ctx, t, rc, map[string]bool{"PATCH /configmaps": true})["PATCH configmaps"]
		}
		var rows, moves, fits []string
		for _, mode := range []shard.Mode{shard.Server, shard.Label} {
			var heaps, converges []float64 // mean live heap per replica, and converge seconds, by run
			for _, count := range []int{1, 2, 4} {
				resetRing(ctx, t, c)
				patches := writes()
				r := &replicas{t: t, ctx: ctx, cfg: cfg, c: c, pattern: "sharding"}
				var members []string
				var procs []*localcluster.Pattern
				start := time.Now()
				for i := range count {
					members = append(members, fmt.Sprintf("r%d", i+1))
					r.args = []string{"--member", members[i], "--sharding", string(mode)}
					procs = append(procs, r.start())
				}
				waitForLong(t, "converged", 20*time.Minute, func(ctx context.Context) (bool, error) {
					return childrenOf(ctx, c) == n, nil
				})
				converge := time.Since(start)
				waitForLong(t, "settled", time.Minute, func(ctx context.Context) (bool, error) {
					return ringSettled(ctx, c, operatorNamespace, members...) == nil, nil
				})
				time.Sleep(5 * time.Second) // a GC after the sync's garbage
				var rss, heap []float64
				for i, p := range procs {
					rss = append(rss, float64(rssKiB(t, p.Cmd.Process.Pid))/1024)
					heap = append(heap, liveHeap(t, filepath.Join(logs, fmt.Sprintf("sharding-replica-%d.log", i+1))))
				}
				heaps, converges = append(heaps, mean(heap)), append(converges, converge.Seconds())
				rows = append(rows, fmt.Sprintf("| %s | %d | %s | %s | %s | %d |", mode, count, converge.Round(100*time.Millisecond),
					spread(rss), spread(heap), writes()-patches))
				if count == 4 {
					moves = append(moves, rebalance(ctx, t, c, r, mode, sources, members, procs, writes)...)
				}
				for _, p := range procs {
					_ = p.Stop(30 * time.Second)
				}
			}
			floor, share := fitInverse([]float64{1, 2, 4}, heaps)
			fits = append(fits, fmt.Sprintf("- %s: mean live heap per replica %.1f → %.1f → %.1f MB for 1 → 2 → 4 replicas; as floor + share / N (least squares): floor **%.1f MB**, share %.1f MB; 4 replicas converge %.2f× as fast as one.",
				mode, heaps[0], heaps[1], heaps[2], floor, share, converges[0]/converges[2]))
		}
		page := fmt.Sprintf(`# Sharding: memory, convergence and rebalancing by replicas

Written by `+"`go tool task bench:sharding`"+` (%s) on %s. Command:
`+"`KPATTERNS_BENCH_SHARDING=1 go test -count=1 -v -timeout 90m -run TestShardingBench ./e2e/`"+`. The run took %s.

%d sources (mirror's bench sources, one key each) in 100 namespaces with random suffixes, mirrored
by sharding's replicas run as local processes (as its ServiceAccount, GOGC=25, GODEBUG=gctrace=1),
1, 2 and 4 at a time, in each mode; before each run every child is deleted, so each run creates all
%[4]d. Converge: from the first replica's start to every child present. Memory per replica once
converged and settled: RSS from /proc and the live heap of its last GC, as min–max over the
replicas. PATCH configmaps: kube-apiserver's count of ConfigMap patches during the run, which only
label mode's sharder sends (one per source and per child it finds without a range label: the first
label run labels everything, the later runs nothing).

| mode | replicas | converge | RSS MiB per replica | live heap MB per replica | PATCH configmaps |
|---|---|---|---|---|---|
%s

%s

The floor is what a replica holds whatever its share (Go runtime, client-go, controller-runtime,
its informer's buffers); the share is the sources and children it caches, divided among the
replicas. Each replica reconciles with one worker (run's default `+"`--max-concurrent-reconciles 1`"+`),
so N replicas are also N workers: this run does not tell the faster convergence of that
parallelism from sharding's own (one replica with N workers was not measured); on 2 cores
kube-apiserver and etcd, which create every child, share the CPUs with the replicas.

## Rebalancing (from 4 replicas)

A fifth replica joins; then one replica stops on SIGTERM (it deletes its Lease: its ranges move at
once); then one is SIGKILLed (its Lease expires after the 15 s lease duration). Time: from the
change to the ring settled (every member holding what the assignment gives it). Sources moved: the
sources whose range changed owner. PATCH configmaps: the sharder's writes during the change.

| mode | change | settled after | ranges moved | sources moved | PATCH configmaps |
|---|---|---|---|---|---|
%s

## The ring beyond this machine (simulation)

%s`, began.Format("2006-01-02"), machine(), time.Since(began).Round(time.Second), n, strings.Join(rows, "\n"),
			strings.Join(fits, "\n"), strings.Join(moves, "\n"), simulateRing())
		if err := os.WriteFile(outPath(os.Getenv("KPATTERNS_BENCH_OUT"), "sharding.md"), []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Log(page)
		return ctx
	}).Feature()
	testEnv.Test(t, f)
}

// shardingSources creates n sources over 100 namespaces named with random suffixes (a namespace
// is Server mode's key) and returns them with their UIDs.
func shardingSources(ctx context.Context, t *testing.T, c client.Client, n int) []*corev1.ConfigMap {
	t.Helper()
	var namespaces []string
	for range 100 {
		ns := localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "bench-shard-"}})
		if err := c.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		namespaces = append(namespaces, ns.Name)
		t.Cleanup(func() { _ = c.Delete(context.Background(), ns) })
	}
	sources := make([]*corev1.ConfigMap, n)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			sources[i] = mirrorSource(namespaces[i%len(namespaces)], i)
			return c.Create(ctx, sources[i])
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return sources
}

// resetRing deletes every child and the ring's Leases, so that the next run starts from nothing.
func resetRing(ctx context.Context, t *testing.T, c client.Client) {
	t.Helper()
	var children metav1.PartialObjectMetadataList
	children.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, &children, client.MatchingLabels{mirror.Label: mirror.Child}); err != nil {
		t.Fatal(err)
	}
	namespaces := map[string]bool{}
	for _, ch := range children.Items {
		namespaces[ch.Namespace] = true
	}
	for ns := range namespaces {
		if err := c.DeleteAllOf(ctx, &corev1.ConfigMap{}, client.InNamespace(ns), client.MatchingLabels{mirror.Label: mirror.Child}); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.DeleteAllOf(ctx, &coordinationv1.Lease{}, client.InNamespace(operatorNamespace), client.MatchingLabels{shard.RingLabel: sharding.Name}); err != nil {
		t.Fatal(err)
	}
	waitForLong(t, "no child left", 5*time.Minute, func(ctx context.Context) (bool, error) { return childrenOf(ctx, c) == 0, nil })
}

// childrenOf counts the mirror children in the cluster (metadata only).
func childrenOf(ctx context.Context, c client.Client) int {
	var children metav1.PartialObjectMetadataList
	children.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMapList"))
	if err := c.List(ctx, &children, client.MatchingLabels{mirror.Label: mirror.Child}); err != nil {
		return -1
	}
	return len(children.Items)
}

// rebalance measures a join, a SIGTERM and a SIGKILL from the settled members, one row each.
func rebalance(ctx context.Context, t *testing.T, c client.Client, r *replicas, mode shard.Mode, sources []*corev1.ConfigMap,
	members []string, procs []*localcluster.Pattern, writes func() int) []string {
	t.Helper()
	assignment := func() shard.Assignment {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: sharding.Name}, l); err != nil {
			t.Fatal(err)
		}
		a, err := shard.ReadAssignment(l)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	var rows []string
	change := func(what string, members []string, do func()) {
		before, patches, start := assignment(), writes(), time.Now()
		do()
		waitForLong(t, what+": settled", 2*time.Minute, func(ctx context.Context) (bool, error) {
			return ringSettled(ctx, c, operatorNamespace, members...) == nil, nil
		})
		took := time.Since(start)
		after := assignment()
		owner := func(a shard.Assignment, rng int) string {
			for m, s := range a.Ranges {
				if s.Has(rng) {
					return m
				}
			}
			return ""
		}
		ranges, moved := 0, 0
		for rng := range shard.Ranges {
			if owner(before, rng) != owner(after, rng) {
				ranges++
			}
		}
		for _, s := range sources {
			key := s.Namespace
			if mode == shard.Label {
				key = string(s.UID)
			}
			if rng := shard.RangeOf(key); owner(before, rng) != owner(after, rng) {
				moved++
			}
		}
		rows = append(rows, fmt.Sprintf("| %s | %s | %s | %d | %d | %d |", mode, what, took.Round(100*time.Millisecond), ranges, moved, writes()-patches))
	}
	r.args = []string{"--member", "r5", "--sharding", string(mode)}
	var joined *localcluster.Pattern
	change("join: 4 → 5", append(slices.Clone(members), "r5"), func() { joined = r.start() })
	change("SIGTERM: 5 → 4", []string{"r1", "r3", "r4", "r5"}, func() { _ = procs[1].Stop(30 * time.Second) })
	change("SIGKILL: 4 → 3", []string{"r1", "r3", "r5"}, func() { _ = procs[3].Cmd.Process.Kill() })
	_ = joined.Stop(30 * time.Second)
	return rows
}

// spread is "min–max" of xs, one decimal.
func spread(xs []float64) string {
	lo, hi := slices.Min(xs), slices.Max(xs)
	if hi-lo < 0.05 {
		return fmt.Sprintf("%.1f", lo)
	}
	return fmt.Sprintf("%.1f–%.1f", lo, hi)
}

// simulateRing assigns 100,000 UUID-shaped keys with the coordinator's own code (shard.Assign) to
// 1–64 members: the balance, and the fraction of keys moved when one member joins or leaves.
func simulateRing() string {
	r := rand.New(rand.NewPCG(3, 4))
	keys := make([]int, 100000) // their ranges
	for i := range keys {
		keys[i] = shard.RangeOf(fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff, r.Uint32()&0xfff, r.Uint64()&0xffffffffffff))
	}
	members := func(n int) []string {
		m := make([]string, n)
		for i := range m {
			m[i] = "m" + strconv.Itoa(i)
		}
		return m
	}
	owners := func(a map[string]shard.Set) (o [shard.Ranges]string) {
		for m, s := range a {
			for i := range shard.Ranges {
				if s.Has(i) {
					o[i] = m
				}
			}
		}
		return o
	}
	movedFraction := func(a, b map[string]shard.Set) float64 {
		oa, ob := owners(a), owners(b)
		moved := 0
		for _, k := range keys {
			if oa[k] != ob[k] {
				moved++
			}
		}
		return float64(moved) / float64(len(keys))
	}
	var rows []string
	for _, n := range []int{1, 2, 3, 4, 8, 16, 32, 64} {
		a := shard.Assign(nil, members(n), 0)
		per := map[string]int{}
		o := owners(a)
		for _, k := range keys {
			per[o[k]]++
		}
		most := 0
		for _, c := range per {
			most = max(most, c)
		}
		joined, generations := a, 0
		for { // the coordinator's generations, 8 moves each
			next := shard.Assign(joined, members(n+1), 8)
			if owners(next) == owners(joined) {
				break
			}
			joined, generations = next, generations+1
		}
		left := shard.Assign(a, members(n)[1:], 0)
		rows = append(rows, fmt.Sprintf("| %d | %.3f | %.4f (ideal %.4f) | %d | %.4f (ideal %.4f) |", n,
			float64(most)/(float64(len(keys))/float64(n)), movedFraction(a, joined), 1/float64(n+1), generations,
			movedFraction(a, left), 1/float64(n)))
	}
	return fmt.Sprintf(`100,000 UUID-shaped keys (Label mode's key, and Server mode's with object.metadata.uid), their
ranges by shard.RangeOf, assigned by the coordinator's own code (shard.Assign): balance is the
fullest member's keys over the mean; a join moves keys from the others to member N+1 in
assignments of at most 8 ranges each; a leave hands the leaver's ranges to the rest in one
assignment. With 64 ranges, a 65th member gets nothing: 64 is the most replicas that share work.
The handover protocol itself is model-checked by shared/shard's TestProtocolModel (200 seeds of
members joining, leaving and crashing while their views of the Leases lag at random: no range held
by two members after any step, every range held once the changes stop).

| members N | balance (max / mean) | keys moved when one joins | assignments for the join | keys moved when one leaves |
|---|---|---|---|---|
%s
`, strings.Join(rows, "\n"))
}

func mean(xs []float64) float64 {
	sum := 0.0
	for _, x := range xs {
		sum += x
	}
	return sum / float64(len(xs))
}

// fitInverse fits y = floor + share/n by least squares over the points (n, y).
func fitInverse(n, y []float64) (floor, share float64) {
	x := make([]float64, len(n))
	for i := range n {
		x[i] = 1 / n[i]
	}
	mx, my := mean(x), mean(y)
	var sxy, sxx float64
	for i := range x {
		sxy += (x[i] - mx) * (y[i] - my)
		sxx += (x[i] - mx) * (x[i] - mx)
	}
	share = sxy / sxx
	return my - share*mx, share
}
