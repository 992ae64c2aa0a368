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
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/digest"
)

// TestReloaderMemory measures the reloader on the local cluster with $KPATTERNS_RELOADER_N
// (default 2,000) ConfigMaps and as many Secrets of 10 keys × 1 KiB (values from a fixed seed) and
// as many opted-in Deployments (replicas 0) each referencing one of each: RSS and Go heap once
// synced, start-up time to /readyz, and the latency from a ConfigMap update to the Deployment's
// template change (p50/p99 over 100 changes, seen through a watch), against the same process
// watching an empty namespace. A first, unmeasured run records the baselines (one metadata write
// per Deployment), so the measured runs start converged. A
// measurement, reported in the log and in reloader/README.md, not a pass/fail threshold.
//
//	KPATTERNS_MEASURE=1 go test -count=1 -v -timeout 30m -run TestReloaderMemory ./e2e/
func TestReloaderMemory(t *testing.T) {
	if os.Getenv("KPATTERNS_MEASURE") == "" || kindRun {
		t.Skip("a measurement on the local cluster: set KPATTERNS_MEASURE=1")
	}
	n := 2000
	if v := os.Getenv("KPATTERNS_RELOADER_N"); v != "" {
		n, _ = strconv.Atoi(v)
	}
	ns := envconf.RandomName("reloader-memory", 20)
	f := features.New("reloader memory").
		Assess("projected cache against an empty one", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			rc := rest.CopyConfig(cfg.Client().RESTConfig())
			rc.QPS, rc.Burst = 500, 1000 // client-go's default 5/s would take most of the run
			c, err := client.NewWithWatch(rc, client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			began := time.Now()
			populate(ctx, t, c, ns, n)
			t.Logf("created %d ConfigMaps, %d Secrets, %d Deployments in %s", n, n, n, time.Since(began).Round(time.Second))
			installPattern(ctx, t, cfg, "reloader")
			run := 0
			var emptyLive float64
			t.Setenv("GODEBUG", "gctrace=1") // the pattern processes inherit it: their log has each GC's live heap
			measure := func(mode string, args ...string) string {
				run++
				port := freePort(t)
				log, err := os.Create(filepath.Join(logs, fmt.Sprintf("reloader-measure-%d.log", run)))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = log.Close() }()
				started := time.Now()
				p, err := localcluster.RunPattern(ctx, filepath.Join(bins, "reloader"), cfg.KubeconfigFile(), operatorNamespace, log, false,
					append(args, "--metrics-bind-address", "127.0.0.1:"+port, "--metrics-secure=false")...)
				if err != nil {
					t.Fatal(err)
				}
				ready := time.Since(started)
				defer func() { _ = p.Stop(time.Minute) }()
				waitFor(t, "every Deployment baselined", func(ctx context.Context) (bool, error) {
					list := &appsv1.DeploymentList{}
					if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
						return false, err
					}
					return !slices.ContainsFunc(list.Items, func(d appsv1.Deployment) bool { return d.Annotations[reloader.DigestsAnnotation] == "" }), nil
				})
				if mode == "" {
					return ""
				}
				time.Sleep(5 * time.Second) // settle
				rss, heap, live := rssKiB(t, p.Cmd.Process.Pid), minHeap(t, port), liveHeap(t, log.Name())
				if mode == "empty" {
					emptyLive = live
					return fmt.Sprintf("| %s | %.1f MiB | %.1f MiB | %.1f MiB | – | %s | – | – |", mode, float64(rss)/1024, heap/(1<<20), live, ready.Round(10*time.Millisecond))
				}
				lat := changeLatencies(ctx, t, c, ns, 100, fmt.Sprintf("%s-%d", mode, run)) // new data every run
				rssAfter := rssKiB(t, p.Cmd.Process.Pid)
				return fmt.Sprintf("| %s | %.1f MiB | %.1f MiB | %.1f MiB | %.0f B | %s | %s / %s | %.1f MiB |", mode, float64(rss)/1024, heap/(1<<20), live,
					(live-emptyLive)*(1<<20)/float64(3*n), ready.Round(10*time.Millisecond), lat[len(lat)/2].Round(time.Millisecond), lat[len(lat)*99/100].Round(time.Millisecond),
					float64(rssAfter)/1024)
			}
			measure("") // records the baselines: not measured
			empty := envconf.RandomName("empty", 12)
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: empty}}); err != nil {
				t.Fatal(err)
			}
			rows := []string{measure("empty", "--watch-namespaces", empty)}
			for range 2 {
				rows = append(rows, measure("projected"))
			}
			t.Logf("%d ConfigMaps + %d Secrets (10 keys × 1 KiB) + %d opted-in Deployments:\n| cache | RSS synced | Go heap (min of 5 s) | live heap after the last GC | live heap per cached object, above empty | start to /readyz | update → template p50 / p99 (100) | RSS after the changes |\n|---|---|---|---|---|---|---|---|\n%s",
				n, n, n, strings.Join(rows, "\n"))
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			return ctx
		})
	testEnv.Test(t, f.Feature())
}

// populate creates n ConfigMaps and n Secrets of 10 keys × 1 KiB (a fixed seed) and n opted-in
// Deployments (replicas 0), Deployment i referencing ConfigMap i and Secret i.
func populate(ctx context.Context, t *testing.T, c client.Client, ns string, n int) {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	value := func() string {
		b := make([]byte, 1024)
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
		g.Go(func() error {
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}); err != nil {
				return err
			}
			if err := c.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}); err != nil {
				return err
			}
			return c.Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{reloader.OptIn: "true"}},
				Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
						Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27", EnvFrom: []corev1.EnvFromSource{
							{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}},
							{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}}}}}},
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

// minHeap is the smallest go_memstats_heap_alloc_bytes of 5 scrapes of a metrics endpoint, a
// second apart (closest to the live heap without forcing a GC).
func minHeap(t *testing.T, port string) float64 {
	t.Helper()
	low := -1.0
	for range 5 {
		resp, err := http.Get("http://127.0.0.1:" + port + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		_ = resp.Body.Close()
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "go_memstats_heap_alloc_bytes "); ok {
				f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
				if err != nil {
					t.Fatal(err)
				}
				if low < 0 || f < low {
					low = f
				}
			}
		}
		time.Sleep(time.Second)
	}
	if low < 0 {
		t.Fatal("no go_memstats_heap_alloc_bytes on /metrics")
	}
	return low
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
