// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/digest"
)

// growthPatterns are the patterns the memory growth is measured for by default
// ($KPATTERNS_BENCH_GROWTH_PATTERNS, comma-separated, selects others): mirror (owns a child per
// source), summary (reads objects it does not own) and the reloader (caches Deployments and
// digests of ConfigMaps; over paused Deployments). The others' 10,000 objects (and the children
// and ReplicaSets they make) would take the whole bench past 15 minutes.
var growthPatterns = []string{"mirror", "summary", "reloader"}

// TestBenchGrowth is the memory part of `go tool task bench`: each of growthPatterns over 1,000
// and then 10,000 objects ($KPATTERNS_BENCH_GROWTH, comma-separated), converged, then restarted:
// start-up time to /readyz over them, RSS and live heap once synced (GOGC=25 and gctrace, the
// same for both sizes, so that the last GC's live heap is close to the cache's), bytes per object
// between the two sizes and the growth ratio large/small against the object ratio (goal: linear).
//
//	KPATTERNS_BENCH=1 go test -count=1 -v -timeout 40m -run TestBenchGrowth ./e2e/
func TestBenchGrowth(t *testing.T) {
	if os.Getenv("KPATTERNS_BENCH") == "" || kindRun {
		t.Skip("the bench on the local cluster: go tool task bench")
	}
	sizes := []int{1000, 10000}
	if v := os.Getenv("KPATTERNS_BENCH_GROWTH"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("KPATTERNS_BENCH_GROWTH=%q: %v", v, err)
			}
			sizes = append(sizes, n)
		}
	}
	selected, command := growthPatterns, "KPATTERNS_BENCH=1 KPATTERNS_BENCH_GROWTH="+strings.Trim(strings.Join(strings.Fields(fmt.Sprint(sizes)), ","), "[]")
	if v := os.Getenv("KPATTERNS_BENCH_GROWTH_PATTERNS"); v != "" {
		selected, command = strings.Split(v, ","), command+" KPATTERNS_BENCH_GROWTH_PATTERNS="+v
	}
	if v := os.Getenv("KPATTERNS_BENCH_GROWTH_OUT"); v != "" {
		command += " KPATTERNS_BENCH_GROWTH_OUT=" + v
	}
	var rows, left []string
	f := features.New("bench growth")
	for _, bc := range benchCases {
		if !slices.Contains(selected, bc.pattern) {
			left = append(left, bc.pattern)
			continue
		}
		f = f.Assess(bc.pattern, func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			rc := rest.CopyConfig(cfg.Client().RESTConfig())
			rc.QPS, rc.Burst = 500, 1000
			c, err := client.New(rc, client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			t.Setenv("GODEBUG", "gctrace=1")
			t.Setenv("GOGC", "25")
			var heaps []float64
			var cells []string
			// One namespace, grown from one size to the next; each size measured by a restart.
			ns := envconf.RandomName("growth-"+bc.pattern, 24)
			if err := c.Create(ctx, testNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			if bc.alone {
				cluster := localProvider.Cluster()
				if err := cluster.StopAgent("kube-controller-manager"); err != nil {
					t.Fatal(err)
				}
				defer func() {
					if err := cluster.StartAgent("kube-controller-manager"); err != nil {
						t.Error(err)
					}
				}()
			}
			stop := bc.run(ctx, t, cfg, ns)
			grown := bc
			if bc.grow != nil {
				grown.create = bc.grow
			}
			had := 0
			for _, n := range sizes {
				if err := grown.fill(ctx, c, ns, had, n, 15*time.Minute); err != nil {
					t.Fatal(err)
				}
				had = n
				stop()
				began := time.Now()
				stop = bc.run(ctx, t, cfg, ns)
				ready := time.Since(began)
				time.Sleep(10 * time.Second) // settled: the resync's reconciles done, a GC or more since
				p := processes[bc.pattern]
				rss, live := rssKiB(t, p.Cmd.Process.Pid), liveHeap(t, filepath.Join(logs, bc.pattern+".log"))
				heaps = append(heaps, live)
				cells = append(cells, fmt.Sprintf("%d: start %s, RSS %.1f MiB, live heap %.0f MB", n, ready.Round(10*time.Millisecond), float64(rss)/1024, live))
			}
			stop() // the namespace stays: the cluster goes at the end of the run
			first, last := sizes[0], sizes[len(sizes)-1]
			perObject := (heaps[len(heaps)-1] - heaps[0]) * 1e6 / float64(last-first)
			name := bc.pattern
			if bc.alone {
				name += " (without kube-controller-manager)"
			}
			row := fmt.Sprintf("| %s | %s | %.0f B | **%.1f** for %.0f× the objects |", name, strings.Join(cells, "; "), perObject,
				heaps[len(heaps)-1]/heaps[0], float64(last)/float64(first))
			t.Log(row)
			rows = append(rows, row)
			return ctx
		})
	}
	f = f.Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		path := outPath(os.Getenv("KPATTERNS_BENCH_GROWTH_OUT"), "bench-growth.md")
		page := fmt.Sprintf(`# Memory growth

Written by `+"`go tool task bench`"+` (%s) on %s. Command: `+"`%s go test -count=1 -v -timeout 40m -run TestBenchGrowth ./e2e/`"+`.
Each pattern over each number of its objects (as in the bench — the reloader's Deployments paused,
so that kube-controller-manager makes no ReplicaSet for them), converged, then restarted: start-up
to /readyz over them, RSS and the live heap once synced (GOGC=25, GODEBUG=gctrace=1: the last GC's
live heap, whole MB). Bytes per object is the live-heap difference over the object difference; the
growth ratio is live heap large / small, to compare with the object ratio (linear or better: at
most that). Not in this run: %s. By default the bench measures %s: the others' objects at these
sizes would take it past its 15 minutes on 2 cores (KPATTERNS_BENCH_GROWTH_PATTERNS selects patterns).
widget and conditional are measured with kube-controller-manager stopped while their objects are
made and measured: with it, it makes a ReplicaSet per Deployment and an EndpointSlice per Service
they own, and 10,000 Widgets had not converged within 15 minutes on 2 cores; they cache their
Deployments and Services as ever, without the status kube-controller-manager would have written.

| pattern | sizes | live heap per object | growth |
|---|---|---|---|
%s
`, time.Now().UTC().Format("2006-01-02"), machine(), command, strings.Join(left, ", "), strings.Join(growthPatterns, ", "), strings.Join(rows, "\n"))
		if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Logf("wrote %s", path)
		return ctx
	})
	testEnv.Test(t, f.Feature())
}

// benchReloader runs the reloader over deployments opted-in Deployments (replicas 0), each
// referencing a ConfigMap of its own, converged (every baseline recorded); then updates the
// ConfigMaps of the first changes of them one by one: the latency from each update to its
// Deployment's template change (seen through a watch), and how many Deployments' templates
// changed in all (goal: exactly changes). Then a burst: 50 updates, as fast as one client sends
// them, to the ConfigMap of the last Deployment: that Deployment's template changes (goal ≤ 3),
// and its final template digest against the digest of the ConfigMap's final data.
func benchReloader(ctx context.Context, t *testing.T, cfg *envconf.Config, deployments, changes int) string {
	const burst = 50
	_, c, ns := benchNamespace(ctx, t, cfg, "bench-reloader")
	stop := runPattern(ctx, t, cfg, "reloader", "--watch-namespaces", ns)
	defer stop()
	i := slices.IndexFunc(benchCases, func(bc benchCase) bool { return bc.pattern == "reloader" })
	benchCases[i].populate(ctx, t, c, ns, deployments, 10*time.Minute)
	templates := func() map[string]string {
		list := &appsv1.DeploymentList{}
		if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		out := map[string]string{}
		for _, d := range list.Items {
			out[d.Name] = d.Spec.Template.Annotations[digest.Annotation]
		}
		return out
	}
	before := templates()
	lat := changeLatencies(ctx, t, c, ns, changes, "bench")
	time.Sleep(reloader.DefaultCoalesceWindow + 2*time.Second) // a stray rollout would land
	after := templates()
	changed := 0
	for name, d := range after {
		if before[name] != d {
			changed++
		}
	}

	name := fmt.Sprintf("app-%04d", deployments-1)
	w, err := c.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns), client.MatchingFields{"metadata.name": name})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	rollouts, last := 0, after[name]
	go func() {
		for ev := range w.ResultChan() {
			if d, ok := ev.Object.(*appsv1.Deployment); ok {
				mu.Lock()
				if now := d.Spec.Template.Annotations[digest.Annotation]; now != last {
					rollouts, last = rollouts+1, now
				}
				mu.Unlock()
			}
		}
	}()
	cm := &corev1.ConfigMap{}
	began := time.Now()
	for j := range burst {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			t.Fatal(err)
		}
		cm.Data["k"] = fmt.Sprintf("burst-%d", j)
		if err := c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	spanned := time.Since(began)
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
		t.Fatal(err)
	}
	want, err := templateDigest(ctx, c, d, cm) // cm holds the final data: the last update's
	if err != nil {
		t.Fatal(err)
	}
	waitForLong(t, name+" at the final data's digest", 2*time.Minute, func(context.Context) (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return last == want, nil
	})
	time.Sleep(reloader.DefaultCoalesceWindow + 2*time.Second) // one more rollout would land
	mu.Lock()
	final, n := last, rollouts
	mu.Unlock()
	verdict := "equal to"
	if final != want {
		verdict = "**not** equal to"
		t.Errorf("reloader: %s's final template digest %s, want the final data's %s", name, final, want)
	}
	if changed != changes {
		t.Errorf("reloader: %d Deployments' templates changed for %d ConfigMaps changed; want exactly %d", changed, changes, changes)
	}
	return fmt.Sprintf("%d opted-in Deployments (replicas 0), each referencing a ConfigMap of its own; %d of the ConfigMaps updated one "+
		"by one: update → template change p50 %s, p99 %s; **%d Deployments' templates changed** in all (goal: exactly %d). A burst of %d "+
		"updates to one ConfigMap in %s: **%d template changes** of its Deployment (goal ≤ 3), its final template digest %s the "+
		"digest of the final data", deployments, changes, lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond),
		changed, changes, burst, spanned.Round(time.Millisecond), n, verdict)
}

// benchNamespace is fastClient, its config, and a new namespace named from prefix.
func benchNamespace(ctx context.Context, t *testing.T, cfg *envconf.Config, prefix string) (*rest.Config, client.WithWatch, string) {
	t.Helper()
	c, rc := fastClientConfig(t, cfg)
	ns := envconf.RandomName(prefix, 20)
	if err := c.Create(ctx, testNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	return rc, c, ns
}
