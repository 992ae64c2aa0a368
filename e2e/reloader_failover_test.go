// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
)

// TestReloaderFailover measures the reloader's failover on the local cluster over
// $KPATTERNS_RELOADER_N (default 2,000) ConfigMaps, Secrets and opted-in Deployments (as
// populate makes them): two replicas, the leader converged; then the leader is
// stopped (SIGTERM: it releases the Lease; SIGKILL: the standby waits for it to expire, 15 s) and
// 20 ConfigMaps are changed at once. Reported: the time from the signal to the first of those
// Deployments rolled by the new leader, and to the last; and the rollouts counted (each of the 20
// must roll exactly once: a count, asserted). With warm standbys (the default) and with
// --cold-standby. Writes docs/reloader-failover.md ($KPATTERNS_FAILOVER_OUT).
//
//	KPATTERNS_MEASURE=1 go test -count=1 -v -timeout 30m -run TestReloaderFailover ./e2e/
func TestReloaderFailover(t *testing.T) {
	if os.Getenv("KPATTERNS_MEASURE") == "" || kindRun {
		t.Skip("a measurement on the local cluster: set KPATTERNS_MEASURE=1")
	}
	n := 2000
	if v := os.Getenv("KPATTERNS_RELOADER_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	out := os.Getenv("KPATTERNS_FAILOVER_OUT")
	if out == "" {
		out = filepath.Join(root, "docs", "reloader-failover.md")
	}
	ns := envconf.RandomName("reloader-failover", 20)
	began := time.Now()
	var rows []string
	f := features.New("reloader failover").
		Assess("warm and cold standbys, SIGTERM and SIGKILL", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c, _ := fastClientConfig(t, cfg)
			if err := c.Create(ctx, testNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			populate(ctx, t, c, ns, n, 1024, true)
			installPattern(ctx, t, cfg, "reloader")
			round := 0
			for _, mode := range []struct {
				name string
				args []string
			}{{"warm standby (default)", nil}, {"--cold-standby", []string{"--cold-standby"}}} {
				for _, sig := range []string{"SIGTERM", "SIGKILL"} {
					round++
					r := &replicas{t: t, ctx: ctx, cfg: cfg, c: c, pattern: "reloader", args: append([]string{"--watch-namespaces", ns}, mode.args...)}
					leader := r.start()
					waitForLong(t, "every Deployment recorded by the leader", 10*time.Minute, func(ctx context.Context) (bool, error) {
						list := &appsv1.DeploymentList{}
						err := c.List(ctx, list, client.InNamespace(ns))
						if err != nil || len(list.Items) != n || r.holder() == "" {
							return false, err
						}
						for _, d := range list.Items {
							if d.Annotations[reloader.DigestsAnnotation] == "" {
								return false, nil
							}
						}
						return true, nil
					})
					standby := r.start()
					time.Sleep(20 * time.Second) // time to warm up, if it does
					before := generations(ctx, t, c, ns, 20)
					signalled := time.Now()
					if sig == "SIGTERM" {
						go func() { _ = leader.Stop(30 * time.Second) }()
					} else {
						_ = leader.Cmd.Process.Kill()
					}
					for i := range 20 {
						setKey(ctx, t, c, ns, fmt.Sprintf("app-%04d", i), "key-0", fmt.Sprintf("failover-%d", round))
					}
					var first, last time.Duration
					waitForLong(t, "the 20 rolled by the new leader", 5*time.Minute, func(ctx context.Context) (bool, error) {
						rolled := 0
						for i := range 20 {
							d := &appsv1.Deployment{}
							if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("app-%04d", i)}, d); err != nil {
								return false, err
							}
							if d.Generation > before[i] {
								rolled++
							}
						}
						if rolled > 0 && first == 0 {
							first = time.Since(signalled)
						}
						if rolled == 20 {
							last = time.Since(signalled)
						}
						return rolled == 20, nil
					})
					time.Sleep(3 * time.Second) // a second rollout of one of them would show now
					after := generations(ctx, t, c, ns, 20)
					twice := 0
					for i := range after {
						if after[i]-before[i] != 1 {
							twice++
						}
					}
					row := fmt.Sprintf("| %s | %s | %s | %s | %d |", mode.name, sig, first.Round(10*time.Millisecond), last.Round(10*time.Millisecond), twice)
					t.Log(row)
					rows = append(rows, row)
					if twice != 0 {
						t.Errorf("%s, %s: %d of the 20 Deployments rolled other than once", mode.name, sig, twice)
					}
					for _, p := range []*localcluster.Pattern{leader, standby} { // the next round starts afresh
						_ = p.Stop(30 * time.Second)
					}
				}
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			if len(rows) == 4 {
				page := fmt.Sprintf(`# Reloader failover

Written by `+"`KPATTERNS_MEASURE=1 go test -count=1 -v -timeout 30m -run TestReloaderFailover ./e2e/`"+` (%s) on
%s/%s, %d cores; TestReloaderFailover took %s.

%d ConfigMaps and %d Secrets of 10 keys × 1 KiB and %d opted-in Deployments (replicas 0), two
reloader replicas (run's default lease: 15 s, renew deadline 10 s, retry period 2 s), the leader
converged and the standby up for 20 s; then the leader signalled and 20 ConfigMaps changed at once.
From the signal to the first and to the last of their Deployments rolled by the new leader; each
must roll exactly once (asserted). A warm standby (controller-runtime's warm-up, the default) has
its caches synced and its queue filled before it leads; a cold one (`+"`--cold-standby`"+`) starts
them when it leads.

| standby | leader stopped by | first rolled | all 20 rolled | rolled other than once |
|---|---|---|---|---|
%s
`, time.Now().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Since(began).Round(time.Second),
					n, n, n, strings.Join(rows, "\n"))
				if err := os.WriteFile(out, []byte(page), 0o644); err != nil {
					t.Error(err)
				}
			}
			return ctx
		})
	testEnv.Test(t, f.Feature())
}

// generations are the generations of Deployments app-0000 … app-<count-1>.
func generations(ctx context.Context, t *testing.T, c client.Client, ns string, count int) []int64 {
	t.Helper()
	gens := make([]int64, count)
	for i := range gens {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("app-%04d", i)}, d); err != nil {
			t.Fatal(err)
		}
		gens[i] = d.Generation
	}
	return gens
}
