// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/digest"
)

// TestReloaderMemory measures the reloader's projected cache against reloader-whole (the same
// controllers over a cache of whole objects, e2e/cmd/reloader-whole) on the local cluster, and
// writes docs/reloader-memory.md ($KPATTERNS_MEMORY_OUT): the idle floor (an empty namespace); at
// 1,000, 5,000 and 10,000 ConfigMaps and as many Secrets of 10 keys × 1 KiB with as many opted-in
// Deployments (replicas 0), each referencing one of each ($KPATTERNS_RELOADER_SIZES, comma-separated,
// overrides the sizes); and at 2,000 ConfigMaps of 10 keys × 100 B with 2,000 Deployments. Each size
// has its own namespace: the reloader's first start there (its writes: one record per Deployment),
// then each variant restarted over the recorded Deployments. Per run: the time from start to /readyz
// (caches synced) and, on a first start, to every Deployment recorded; the settled RSS; the live
// heap after a forced GC (go_gc_heap_live_bytes after /debug/pprof/heap?gc=1); goroutines; and the
// PATCH requests the run sent. A measurement, not a pass/fail threshold.
//
//	KPATTERNS_MEASURE=1 go test -count=1 -v -timeout 60m -run TestReloaderMemory ./e2e/
func TestReloaderMemory(t *testing.T) {
	if os.Getenv("KPATTERNS_MEASURE") == "" || kindRun {
		t.Skip("a measurement on the local cluster: set KPATTERNS_MEASURE=1")
	}
	sizes := []int{1000, 5000, 10000}
	if v := os.Getenv("KPATTERNS_RELOADER_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil {
				t.Fatalf("KPATTERNS_RELOADER_SIZES: %v", err)
			}
			sizes = append(sizes, n)
		}
	}
	out := os.Getenv("KPATTERNS_MEMORY_OUT")
	if out == "" {
		out = filepath.Join(root, "docs", "reloader-memory.md")
	}
	began := time.Now()
	var namespaces []string
	f := features.New("reloader memory").
		Assess("projected against whole objects", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c, _ := fastClientConfig(t, cfg)
			whole := filepath.Join(bins, "reloader-whole")
			if err := command(ctx, root, "go", "build", "-o", whole, "./e2e/cmd/reloader-whole").Run(); err != nil {
				t.Fatalf("building reloader-whole: %v", err)
			}
			installPattern(ctx, t, cfg, "reloader")
			t.Setenv("GODEBUG", "") // no gctrace: the heap is read from the runtime's metrics
			newNamespace := func(prefix string) string {
				ns := envconf.RandomName(prefix, 20)
				if err := c.Create(ctx, testNamespace(ns)); err != nil {
					t.Fatal(err)
				}
				namespaces = append(namespaces, ns)
				return ns
			}
			run := 0
			measure := func(bin, ns string, n int) memoryRun {
				run++
				log, err := os.Create(filepath.Join(logs, fmt.Sprintf("reloader-memory-%d.log", run)))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = log.Close() }()
				metrics, pprof := "127.0.0.1:"+freePort(t), "127.0.0.1:"+freePort(t)
				started := time.Now()
				p, err := localcluster.RunPattern(ctx, bin, cfg.KubeconfigFile(), operatorNamespace, log, false, "--watch-namespaces", ns,
					"--leader-elect=false", "--metrics-bind-address", metrics, "--metrics-secure=false", "--pprof-bind-address", pprof)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = p.Stop(time.Minute) }()
				r := memoryRun{ready: time.Since(started)}
				waitForLong(t, "every Deployment recorded", 15*time.Minute, func(ctx context.Context) (bool, error) {
					list := &metav1.PartialObjectMetadataList{}
					list.SetGroupVersionKind(appsv1.SchemeGroupVersion.WithKind("DeploymentList"))
					if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
						return false, err
					}
					return len(list.Items) == n && !slices.ContainsFunc(list.Items, func(d metav1.PartialObjectMetadata) bool {
						return d.Annotations[reloader.DigestsAnnotation] == ""
					}), nil
				})
				r.recorded = time.Since(started)
				time.Sleep(10 * time.Second)                                        // settle: the queues drained, the reflectors watching
				resp, err := http.Get("http://" + pprof + "/debug/pprof/heap?gc=1") // a forced GC, then the profile
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				m := scrape(t, metrics, "")
				r.rss, r.live, r.goroutines = rssKiB(t, p.Cmd.Process.Pid), m["go_gc_heap_live_bytes"], int(m["go_goroutines"])
				for series, v := range m {
					if strings.HasPrefix(series, "rest_client_requests_total{") && strings.Contains(series, `method="PATCH"`) {
						r.writes += int(v)
					}
				}
				return r
			}
			var rows []string
			idle := measure(filepath.Join(bins, "reloader"), newNamespace("reloader-idle"), 0)
			rows = append(rows, idle.row("none (an empty namespace)", "reloader", idle, 0))
			wholeIdle := measure(whole, namespaces[0], 0)
			rows = append(rows, wholeIdle.row("none (an empty namespace)", "whole-object", wholeIdle, 0))
			type size struct {
				n, valueSize int
				secrets      bool
			}
			var all []size
			for _, n := range sizes {
				all = append(all, size{n, 1024, true})
			}
			all = append(all, size{2000, 100, false})
			ratios := map[int]float64{}
			for _, sz := range all {
				ns := newNamespace("reloader-memory")
				began := time.Now()
				populate(ctx, t, c, ns, sz.n, sz.valueSize, sz.secrets)
				objects, label := 3*sz.n, fmt.Sprintf("%d ConfigMaps + %d Secrets of 10 × %d B, %d Deployments", sz.n, sz.n, sz.valueSize, sz.n)
				if !sz.secrets {
					objects, label = 2*sz.n, fmt.Sprintf("%d ConfigMaps of 10 × %d B, %d Deployments", sz.n, sz.valueSize, sz.n)
				}
				t.Logf("%s created in %s", label, time.Since(began).Round(time.Second))
				first := measure(filepath.Join(bins, "reloader"), ns, sz.n)
				projected := measure(filepath.Join(bins, "reloader"), ns, sz.n)
				wholeRun := measure(whole, ns, sz.n)
				rows = append(rows, first.row(label, "reloader, first start", idle, objects),
					projected.row(label, "reloader", idle, objects), wholeRun.row(label, "whole-object", wholeIdle, objects))
				if sz.secrets {
					ratios[sz.n] = float64(projected.rss) / float64(wholeRun.rss)
				}
				for _, r := range rows[len(rows)-3:] {
					t.Log(r)
				}
			}
			var ratioLines []string
			for _, n := range sizes {
				ratioLines = append(ratioLines, fmt.Sprintf("%d: %.2f", n, ratios[n]))
			}
			page := fmt.Sprintf(`# Reloader memory

Written by `+"`KPATTERNS_MEASURE=1 go test -count=1 -v -timeout 60m -run TestReloaderMemory ./e2e/`"+` (%s) on
%s/%s, %d cores; TestReloaderMemory took %s.

The reloader (its cache holds projections: per key a sha256, of a workload only its references)
against reloader-whole (e2e/cmd/reloader-whole: the same controllers and writes over a cache of
whole objects, less managedFields, projecting a source when it reads it). Each size in its own
namespace, watched alone: the reloader's first start there records every Deployment (one PATCH
each, no rollout); then each variant restarted over the recorded ones. Deployments have replicas
0 and reference one ConfigMap and one Secret each (envFrom). RSS 10 s after every Deployment was
recorded; live heap: go_gc_heap_live_bytes after a forced GC; per cached object: the live heap
above the same variant's idle figure, divided by the objects cached.

| objects | process | start to /readyz | to every Deployment recorded | RSS settled | live heap | per cached object | goroutines | PATCH requests |
|---|---|---|---|---|---|---|---|---|
%s

RSS of the reloader over the whole-object variant's, restarted: %s.
`, time.Now().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Since(began).Round(time.Second),
				strings.Join(rows, "\n"), strings.Join(ratioLines, ", "))
			if err := os.WriteFile(out, []byte(page), 0o644); err != nil {
				t.Error(err)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			for _, ns := range namespaces {
				_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			}
			return ctx
		})
	testEnv.Test(t, f.Feature())
}

// memoryRun is what TestReloaderMemory measured of one process.
type memoryRun struct {
	ready, recorded    time.Duration
	rss                int // KiB
	live               float64
	goroutines, writes int
}

// row is the run's line in docs/reloader-memory.md; the live heap per cached object is counted
// above idle's.
func (r memoryRun) row(objects, process string, idle memoryRun, cached int) string {
	perObject := "–"
	if cached > 0 {
		perObject = fmt.Sprintf("%.0f B", (r.live-idle.live)/float64(cached))
	}
	return fmt.Sprintf("| %s | %s | %s | %s | %.1f MiB | %.1f MiB | %s | %d | %d |", objects, process, r.ready.Round(10*time.Millisecond),
		r.recorded.Round(10*time.Millisecond), float64(r.rss)/1024, r.live/(1<<20), perObject, r.goroutines, r.writes)
}

// populate creates n ConfigMaps and, with secrets, n Secrets of 10 keys × valueSize bytes (a
// fixed seed), and n opted-in Deployments (replicas 0), Deployment i referencing ConfigMap i and
// Secret i by envFrom.
func populate(ctx context.Context, t *testing.T, c client.Client, ns string, n, valueSize int, secrets bool) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	value := func() string {
		b := make([]byte, valueSize)
		for i := range b {
			b[i] = 'a' + byte(rng.IntN(26))
		}
		return string(b)
	}
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		data := map[string]string{}
		for k := range 10 {
			data[fmt.Sprintf("key-%d", k)] = value()
		}
		name := fmt.Sprintf("app-%04d", i)
		labels := map[string]string{"app": name}
		envFrom := []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
		if secrets {
			envFrom = append(envFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}})
		}
		g.Go(func() error {
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}); err != nil {
				return err
			}
			if secrets {
				if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}); err != nil {
					return err
				}
			}
			return c.Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{reloader.OptIn: "true"}},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27", EnvFrom: envFrom}}}}},
			})
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
}

// changeLatencies updates count ConfigMaps one by one and returns, sorted, the time from each
// update's response to the watch event showing its Deployment's new template digest.
func changeLatencies(ctx context.Context, t *testing.T, c client.WithWatch, ns string, count int, tag string) []time.Duration {
	t.Helper()
	w, err := c.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var mu sync.Mutex
	seen := map[string]time.Time{}
	digests := map[string]string{}
	go func() {
		for ev := range w.ResultChan() {
			d, ok := ev.Object.(*appsv1.Deployment)
			if !ok || ev.Type != watch.Modified {
				continue
			}
			mu.Lock()
			if old, known := digests[d.Name]; !known {
				digests[d.Name] = d.Spec.Template.Annotations[digest.Annotation]
			} else if now := d.Spec.Template.Annotations[digest.Annotation]; now != old {
				digests[d.Name] = now
				if _, done := seen[d.Name]; !done {
					seen[d.Name] = time.Now()
				}
			}
			mu.Unlock()
		}
	}()
	var lat []time.Duration
	for i := range count {
		name := fmt.Sprintf("app-%04d", i)
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if _, known := digests[name]; !known { // the current digest, before the change
			d := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
				t.Fatal(err)
			}
			digests[name] = d.Spec.Template.Annotations[digest.Annotation]
		}
		delete(seen, name)
		mu.Unlock()
		cm.Data["key-0"] = tag + "-" + strconv.Itoa(i)
		if err := c.Update(ctx, cm); err != nil {
			t.Fatal(err)
		}
		updated := time.Now()
		waitFor(t, name+" rolled", func(context.Context) (bool, error) {
			mu.Lock()
			defer mu.Unlock()
			at, ok := seen[name]
			if ok {
				lat = append(lat, at.Sub(updated))
			}
			return ok, nil
		})
	}
	slices.Sort(lat)
	return lat
}

// liveHeap is the heap marked live by the last GC a process logged with GODEBUG=gctrace=1
// ("gc N @…: …, A->B->C MB, …": C), in MiB.
func liveHeap(t *testing.T, log string) float64 {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	live := -1.0
	for _, line := range strings.Split(string(b), "\n") {
		if !strings.HasPrefix(line, "gc ") {
			continue
		}
		for _, field := range strings.Split(line, ",") {
			if mb, ok := strings.CutSuffix(strings.TrimSpace(field), " MB"); ok && strings.Count(mb, "->") == 2 {
				if v, err := strconv.ParseFloat(mb[strings.LastIndex(mb, ">")+1:], 64); err == nil {
					live = v
				}
			}
		}
	}
	if live < 0 {
		t.Fatalf("no gctrace line in %s", log)
	}
	return live
}

func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port)
}
