// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/digest"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
)

// threePatternsWork has mirror, reloader and summary do their jobs in ns, and waits for all three
// results: a mirror child, a rolled Deployment with its Pods, and a Workload counting them.
func threePatternsWork(ctx context.Context, t testing.TB, c client.Client, ns string) {
	t.Helper()
	wait := func(what string, cond func() (bool, error)) {
		t.Helper()
		waitFor(t.(*testing.T), what, func(context.Context) (bool, error) { return cond() })
	}
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{mirror.Label: mirror.Source}},
		Data: map[string]string{"level": "info"}}
	if err := c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	wait("the mirror child", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings" + mirror.Suffix}, &corev1.ConfigMap{})
		return err == nil, client.IgnoreNotFound(err)
	})
	d := deploymentUsing(ns, "web", "settings", true)
	d.Spec.Replicas = ptr.To[int32](2)
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := c.Create(ctx, &summaryv1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
		Spec: summaryv1alpha1.WorkloadSpec{Selector: map[string]string{"app": "web"}}}); err != nil {
		t.Fatal(err)
	}
	var first string
	wait("the reloader's baseline", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
		first = d.Spec.Template.Annotations[digest.Annotation] // none: its first sight leaves the template alone
		return d.Annotations[reloader.DigestsAnnotation] != "", err
	})
	setKey(ctx, t, c, src.Namespace, src.Name, "level", "debug")
	wait("a rollout for the change", func() (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
		return d.Spec.Template.Annotations[digest.Annotation] != first, err
	})
	wait("the Workload counts 2 ready Pods", func() (bool, error) {
		w := &summaryv1alpha1.Workload{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, w)
		return err == nil && w.Status.Total == 2 && w.Status.Ready == 2, err
	})
}

// TestMulti: mirror, reloader and summary in one process, as the composition's ServiceAccount
// with the union of their generated RBAC.
func TestMulti(t *testing.T) {
	const ns = "e2e-multi"
	f := withPattern(features.New("multi"), "multi", ns).
		Assess("one process mirrors, reloads and summarizes", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			threePatternsWork(ctx, t, clientFor(t, cfg), ns)
			return ctx
		})
	testEnv.Test(t, f.Feature())
}

// rssKiB is a process's resident set size, from /proc.
func rssKiB(t testing.TB, pid int) int { return procKiB(t, pid, "VmRSS") }

// procKiB is field (VmRSS, VmHWM, …) of process pid's /proc status, in KiB.
func procKiB(t testing.TB, pid int, field string) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, field+":"); ok {
			n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			if err != nil {
				t.Fatal(err)
			}
			return n
		}
	}
	t.Fatalf("no %s for pid %d", field, pid)
	return 0
}

// TestMultiMemory measures, after the same work, the RSS of multi against the sum of mirror,
// reloader and summary run as three processes. A measurement, reported in the log and in
// multi/README.md, not a pass/fail threshold.
//
//	go test -count=1 -v -run TestMultiMemory ./e2e/
func TestMultiMemory(t *testing.T) {
	if os.Getenv("KPATTERNS_MEASURE") == "" {
		t.Skip("a measurement: set KPATTERNS_MEASURE=1")
	}
	rss := map[string]int{}
	f := features.New("memory").
		Assess("three processes", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			const ns = "e2e-memory-three"
			c := clientFor(t, cfg)
			if err := c.Create(ctx, testNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			for _, p := range []string{"mirror", "reloader", "summary"} {
				defer runPattern(ctx, t, cfg, p)()
			}
			threePatternsWork(ctx, t, c, ns)
			for _, p := range []string{"mirror", "reloader", "summary"} {
				rss[p] = rssKiB(t, processes[p].Cmd.Process.Pid)
			}
			return ctx
		}).
		Assess("one process", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			const ns = "e2e-memory-multi"
			c := clientFor(t, cfg)
			if err := c.Create(ctx, testNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			defer runPattern(ctx, t, cfg, "multi")()
			threePatternsWork(ctx, t, c, ns)
			rss["multi"] = rssKiB(t, processes["multi"].Cmd.Process.Pid)
			sum := rss["mirror"] + rss["reloader"] + rss["summary"]
			t.Logf("RSS after the same work: mirror %d KiB + reloader %d KiB + summary %d KiB = %d KiB; multi %d KiB (%.2f of the sum)",
				rss["mirror"], rss["reloader"], rss["summary"], sum, rss["multi"], float64(rss["multi"])/float64(sum))
			return ctx
		})
	testEnv.Test(t, f.Feature())
}
