// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/shared/rollout"
)

// benchSize is how big a TestBench run is.
type benchSize struct {
	n       int           // objects per pattern (2n sources against client-go, 4n Pods and Deployments)
	window  time.Duration // writes counted for this long after the last restart
	spacing time.Duration // between one pattern's restart and the next's
	rounds  int           // mirror against client-go
}

var (
	benchFull = benchSize{n: 500, window: time.Minute, spacing: 2 * time.Second, rounds: 5}
	// benchCI is the e2e suite's (go tool task test): every phase and every count goal, small.
	benchCI = benchSize{n: 20, window: 5 * time.Second, spacing: 500 * time.Millisecond, rounds: 1}
)

// TestBench is `go tool task bench`: every controller pattern at once, each over
// $KPATTERNS_BENCH_N objects of its own (default 500; 50 with QUICK=1) in a namespace of its own,
// converged; then all stopped and restarted one after another (a full resync each), and the write
// requests during the following $KPATTERNS_BENCH_WINDOW (default 60 s; 10 s quick) counted twice:
// by kube-apiserver's own /metrics (apiserver_request_total, write verbs, to the resources the
// patterns' generated ClusterRoles let them write) and by each pattern's own client
// (rest_client_requests_total by method, run with --leader-elect=false so that no Lease write is
// in it), which names the pattern. Also each pattern's start-up time to /readyz over its objects,
// its RSS and live heap once synced; mirror against client-go, summary over kwok Pods and the
// reloader over 2,000 Deployments. Writes a results page (KPATTERNS_BENCH_OUT, default
// docs/bench.md).
//
// Without KPATTERNS_BENCH (the e2e suite, so `go tool task test`) it runs at its CI size (20
// objects, a 5 s window) and writes its page into the run's logs. At every size the goals that
// are counts fail the test when missed: no write after a restart (to the API server, and finalizers' to PostgreSQL),
// exactly the changed ConfigMaps' Deployments changed, the final digest the final data's, at most
// one summary status write per Pod change. The goals that are times or depend on them (the
// ratio to client-go, the burst's coalescing) are measured and stated, never a pass or a fail.
//
//	KPATTERNS_BENCH=1 go test -count=1 -v -timeout 40m -run TestBench ./e2e/
func TestBench(t *testing.T) {
	if kindRun {
		t.Skip("the bench runs on the local cluster: go tool task bench")
	}
	size, out, ci := benchFull, os.Getenv("KPATTERNS_BENCH_OUT"), os.Getenv("KPATTERNS_BENCH") == ""
	if ci {
		size, out = benchCI, filepath.Join(logs, "bench.md")
	}
	if v := os.Getenv("KPATTERNS_BENCH_N"); v != "" {
		size.n, _ = strconv.Atoi(v)
	}
	if v := os.Getenv("KPATTERNS_BENCH_WINDOW"); v != "" {
		size.window, _ = time.ParseDuration(v)
	}
	n := size.n
	command := fmt.Sprintf("KPATTERNS_BENCH=1 KPATTERNS_BENCH_N=%d KPATTERNS_BENCH_WINDOW=%s go test -count=1 -v -timeout 40m -run TestBench ./e2e/", n, size.window)
	if ci {
		command = fmt.Sprintf("KPATTERNS_BENCH_N=%d KPATTERNS_BENCH_WINDOW=%s go test -count=1 -v -run 'TestBench$' ./e2e/ (the e2e suite's size)", n, size.window)
	}
	page := benchPage{benchSize: size, began: time.Now(), out: out, command: command}
	f := features.New("bench").
		Assess("writes when converged", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			page.rows, page.total = benchConverged(ctx, t, cfg, size)
			return ctx
		}).
		Assess("mirror against a bare client-go loop", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			page.ratio = benchMirrorAgainstClientGo(ctx, t, cfg, 2*n, size.rounds)
			return ctx
		}).
		Assess("summary over many Pods", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			page.pods = benchSummaryPods(ctx, t, cfg, 4*n)
			return ctx
		}).
		Assess("reloader over many Deployments", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			page.reloader = benchReloader(ctx, t, cfg, 4*n, max(n/5, 2))
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			page.write(t)
			return ctx
		})
	testEnv.Test(t, f.Feature())
}

// benchConverged runs every bench case's pattern over n objects at once, converged, then
// restarts them one by one and counts the writes in the window after the last restart: the
// table's rows, and the line comparing kube-apiserver's total with the patterns' own counts.
func benchConverged(ctx context.Context, t *testing.T, cfg *envconf.Config, size benchSize) (rows []string, total string) {
	n, window := size.n, size.window
	c, rc := fastClientConfig(t, cfg)
	t.Setenv("GODEBUG", "gctrace=1") // the patterns inherit it: their logs have each GC's live heap
	written := map[string]bool{}     // what any of the patterns may write
	namespaces := make([]string, len(benchCases))
	stops := make([]func(), len(benchCases))
	for i, bc := range benchCases {
		roles := bc.members
		if len(roles) == 0 {
			roles = []string{bc.pattern}
		}
		for _, p := range roles {
			maps.Copy(written, writable(t, p))
		}
		namespaces[i] = envconf.RandomName("bench-"+bc.pattern, 20)
		if err := c.Create(ctx, testNamespace(namespaces[i])); err != nil {
			t.Fatal(err)
		}
		stops[i] = bc.run(ctx, t, cfg, namespaces[i])
	}
	// Populated side by side: the cluster's own controllers and the patterns share the cores.
	var g errgroup.Group
	for i, bc := range benchCases {
		g.Go(func() error { return bc.fill(ctx, c, namespaces[i], 0, n, 10*time.Minute) })
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	// Converged means settled too: every Deployment rolled out (the cluster's own controllers
	// done, so nothing is left for a pattern to catch up on after its restart), and no write to
	// what the patterns write for 5 s.
	waitForLong(t, "Deployments rolled out", 10*time.Minute, func(ctx context.Context) (bool, error) {
		list := &appsv1.DeploymentList{}
		err := c.List(ctx, list)
		return err == nil && !slices.ContainsFunc(list.Items, func(d appsv1.Deployment) bool {
			return strings.HasPrefix(d.Namespace, "bench-") && (d.Status.ObservedGeneration != d.Generation || rollout.Pending(&d, *d.Spec.Replicas) != "")
		}), err
	})
	last := apiserverWrites(ctx, t, rc, written)
	waitForLong(t, "the patterns quiet", 5*time.Minute, func(ctx context.Context) (bool, error) {
		time.Sleep(5 * time.Second)
		now := apiserverWrites(ctx, t, rc, written)
		quiet := maps.Equal(now, last)
		last = now
		return quiet, nil
	})
	statuses := make([]map[string]any, len(benchCases))
	for i, bc := range benchCases {
		removeWebhooks(ctx, t, cfg, bc.pattern) // a webhook pattern's: none is served while it is down
		stops[i]()
		statuses[i] = statusesOf(ctx, t, c, bc.kind, namespaces[i])
	}

	before := apiserverWrites(ctx, t, rc, written)
	ready := make([]time.Duration, len(benchCases))
	metrics := make([]string, len(benchCases))
	for i, bc := range benchCases {
		metrics[i] = "127.0.0.1:" + freePort(t)
		began := time.Now()
		stops[i] = bc.run(ctx, t, cfg, namespaces[i], "--leader-elect=false", "--metrics-bind-address", metrics[i], "--metrics-secure=false")
		ready[i] = time.Since(began)
		time.Sleep(size.spacing) // its resync mostly done before the next one starts
	}
	time.Sleep(window)
	after := apiserverWrites(ctx, t, rc, written)
	sum := 0
	for i, bc := range benchCases {
		p := processes[bc.pattern]
		rss, live := rssKiB(t, p.Cmd.Process.Pid), liveHeap(t, filepath.Join(logs, bc.pattern+".log"))
		if changed := firstChange(statuses[i], statusesOf(ctx, t, c, bc.kind, namespaces[i])); changed != "" {
			t.Logf("%s: a status the restart changed: %s", bc.pattern, changed)
		}
		byMethod, writes := clientWrites(t, metrics[i])
		sum += writes
		if len(bc.external) > 0 {
			ext := logLines(t, filepath.Join(logs, bc.pattern+".log"), bc.external...)
			byMethod = strings.TrimSpace(byMethod + fmt.Sprintf(" (external writes **%d**)", ext))
			if ext != 0 {
				t.Errorf("%s: %d external writes after its restart over %d converged objects; want 0", bc.pattern, ext, n)
			}
		}
		if writes > bc.repairs*n+bc.hooks {
			t.Errorf("%s: %d write requests (%s) in the %s after its restart over %d converged objects; want at most %d", bc.pattern,
				writes, byMethod, window, n, bc.repairs*n+bc.hooks)
		}
		row := fmt.Sprintf("| %s | %d | **%d** %s | %s | %.1f MiB | %.1f MiB | %s |", bc.pattern, n, writes, byMethod,
			ready[i].Round(10*time.Millisecond), float64(rss)/1024, live, bc.note)
		t.Log(row)
		rows = append(rows, row)
	}
	var server []string
	serverSum := 0
	for _, k := range slices.Sorted(maps.Keys(after)) {
		if d := after[k] - before[k]; d > 0 {
			server = append(server, fmt.Sprintf("%s %d", k, d))
			serverSum += d
		}
	}
	total = fmt.Sprintf("kube-apiserver counted **%d** write requests to what the patterns may write in that span (%s); their own clients, %d",
		serverSum, strings.Join(server, ", "), sum)
	t.Log(total)
	// The namespaces stay: the local cluster goes at the end of the run, and deleting them now
	// would be the namespace controller's work during the measurements that follow.
	for i, bc := range benchCases {
		if bc.finalizes {
			deleteAll(ctx, t, c, bc, namespaces[i])
		}
		removeWebhooks(ctx, t, cfg, bc.pattern)
		stops[i]()
	}
	return rows, total
}

// deleteAll deletes the case's custom resources in ns and waits, at most 2 minutes, until its
// running pattern has let them go.
func deleteAll(ctx context.Context, t *testing.T, c client.Client, bc benchCase, ns string) {
	t.Helper()
	obj := &unstructured.Unstructured{}
	obj.SetGroupVersionKind(bc.kind.GroupVersion().WithKind(strings.TrimSuffix(bc.kind.Kind, "List")))
	if err := c.DeleteAllOf(ctx, obj, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	waitForLong(t, bc.pattern+"'s objects gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(bc.kind)
		err := c.List(ctx, l, client.InNamespace(ns))
		return err == nil && len(l.Items) == 0, err
	})
}
