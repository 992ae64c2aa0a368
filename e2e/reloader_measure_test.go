// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/controlplane"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// stakaterVersion is the Stakater Reloader TestReloaderVsStakater runs beside the reloader: the
// newest version of github.com/stakater/Reloader the module proxy serves here.
const stakaterVersion = "v1.4.22"

// TestReloaderVsStakater measures the reloader and Stakater Reloader side by side on the local
// cluster, one at a time over the same objects, and writes docs/reloader-vs-stakater.md
// ($KPATTERNS_STAKATER_OUT): an empty namespace (the idle floor), then 2,000 ConfigMaps of 10 keys
// × 100 B, 2,000 of 10 × 1 KiB and 10,000 of 10 × 1 KiB ($KPATTERNS_STAKATER_SIZES overrides:
// "2000x100,2000x1024"), each size in a namespace of its own with as many Deployments (replicas
// 0, opted in to both: the reloader's label and Stakater's auto annotation), Deployment i reading
// ConfigMap i by envFrom. Per controller and size: RSS once settled, the heap after a forced GC
// (and per object above the idle floor), peak RSS (VmHWM over start, settle and 100 ConfigMap
// changes), the time from each change's response to the Deployment's new Pod template (p50,
// p95), goroutines and CPU time. The reloader runs as its ServiceAccount, after a first start that
// recorded every Deployment; Stakater, built from its module (buildStakater), with the cluster's
// admin kubeconfig and --reload-strategy=annotations. A measurement, not a pass/fail threshold.
//
//	KPATTERNS_MEASURE=1 go test -count=1 -v -timeout 90m -run TestReloaderVsStakater ./e2e/
func TestReloaderVsStakater(t *testing.T) {
	if os.Getenv("KPATTERNS_MEASURE") == "" || kindRun {
		t.Skip("a measurement on the local cluster: set KPATTERNS_MEASURE=1")
	}
	type size struct{ n, valueSize int }
	sizes := []size{{2000, 100}, {2000, 1024}, {10000, 1024}}
	if v := os.Getenv("KPATTERNS_STAKATER_SIZES"); v != "" {
		sizes = nil
		for _, f := range strings.Split(v, ",") {
			var sz size
			if _, err := fmt.Sscanf(f, "%dx%d", &sz.n, &sz.valueSize); err != nil {
				t.Fatalf("KPATTERNS_STAKATER_SIZES=%q: want NxBYTES,…: %v", v, err)
			}
			sizes = append(sizes, sz)
		}
	}
	out := os.Getenv("KPATTERNS_STAKATER_OUT")
	if out == "" {
		out = filepath.Join(root, "docs", "reloader-vs-stakater.md")
	}
	// $KPATTERNS_RELOADER_MEMORY_LIMIT (a quantity: 64Mi) runs the reloader once more per size with
	// the container memory limit a Deployment passes it (app.MemoryLimitEnv): its Go runtime's soft
	// limit is 90 % of it (app.SetMemoryLimit). A column of its own shows what that changes.
	memoryLimit := os.Getenv("KPATTERNS_RELOADER_MEMORY_LIMIT")
	if memoryLimit != "" {
		if _, err := resource.ParseQuantity(memoryLimit); err != nil {
			t.Fatalf("KPATTERNS_RELOADER_MEMORY_LIMIT=%q: %v", memoryLimit, err)
		}
	}
	const changes = 100
	began := time.Now()
	var namespaces []string
	f := features.New("reloader vs Stakater Reloader").
		Assess("one at a time over the same objects", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c, _ := fastClientConfig(t, cfg)
			stakater := buildStakater(ctx, t)
			installPattern(ctx, t, cfg, "reloader")
			t.Setenv("GODEBUG", "") // no gctrace
			newNamespace := func(prefix string) string {
				ns := envconf.RandomName(prefix, 20)
				if err := c.Create(ctx, testNamespace(ns)); err != nil {
					t.Fatal(err)
				}
				namespaces = append(namespaces, ns)
				return ns
			}
			run := 0
			// measure runs one controller (stakater, or else the reloader) over ns's n Deployments
			// until it settled, then makes changes ConfigMap changes.
			measure := func(stakaterRun bool, ns string, n, changes int, limit ...string) controllerRun {
				run++
				log, err := os.Create(filepath.Join(logs, fmt.Sprintf("reloader-vs-stakater-%d.log", run)))
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = log.Close() }()
				pprof := "127.0.0.1:" + freePort(t)
				var r controllerRun
				var stop func()
				if stakaterRun {
					r.metrics = "127.0.0.1:9090" // Stakater's, fixed
					cmd := exec.CommandContext(ctx, stakater, "--namespaces="+ns, "--reload-strategy=annotations", "--enable-pprof", "--pprof-addr="+pprof)
					cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile())
					cmd.Stdout, cmd.Stderr = log, log
					if err := cmd.Start(); err != nil {
						t.Fatal(err)
					}
					exited := make(chan struct{})
					go func() { _ = cmd.Wait(); close(exited) }() // its exit status is no figure
					r.pid, stop = cmd.Process.Pid, func() {
						_ = cmd.Process.Signal(syscall.SIGTERM)
						select {
						case <-exited:
						case <-time.After(time.Minute):
							_ = cmd.Process.Kill()
							<-exited
						}
					}
					waitForLong(t, "Stakater Reloader serving /metrics", time.Minute, func(context.Context) (bool, error) {
						resp, err := http.Get("http://" + r.metrics + "/metrics")
						if err == nil {
							_ = resp.Body.Close()
						}
						return err == nil, nil
					})
				} else {
					r.metrics = "127.0.0.1:" + freePort(t)
					if len(limit) > 0 { // the environment RunPattern's process starts with
						q := resource.MustParse(limit[0])
						_ = os.Setenv(app.MemoryLimitEnv, strconv.FormatInt(q.Value(), 10))
					}
					p, err := localcluster.RunPattern(ctx, filepath.Join(bins, "reloader"), cfg.KubeconfigFile(), operatorNamespace, log, false, "--watch-namespaces", ns,
						"--leader-elect=false", "--metrics-bind-address", r.metrics, "--metrics-secure=false", "--pprof-bind-address", pprof)
					_ = os.Unsetenv(app.MemoryLimitEnv)
					if err != nil {
						t.Fatal(err)
					}
					r.pid, stop = p.Cmd.Process.Pid, func() { _ = p.Stop(time.Minute) }
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
				}
				defer stop()
				// Settled: RSS within 1 % over five readings a second apart, at least 10 s after the start.
				time.Sleep(10 * time.Second)
				var last []int
				waitForLong(t, "RSS settled", 5*time.Minute, func(context.Context) (bool, error) {
					time.Sleep(time.Second)
					last = append(last, procKiB(t, r.pid, "VmRSS"))
					if len(last) < 5 {
						return false, nil
					}
					last = last[len(last)-5:]
					return slices.Max(last)-slices.Min(last) <= slices.Max(last)/100, nil
				})
				r.rss = procKiB(t, r.pid, "VmRSS")
				resp, err := http.Get("http://" + pprof + "/debug/pprof/heap?gc=1") // a forced GC, then the profile
				if err != nil {
					t.Fatal(err)
				}
				_, _ = io.Copy(io.Discard, resp.Body)
				_ = resp.Body.Close()
				m := scrape(t, r.metrics, "go_")
				r.heap, r.goroutines = m["go_memstats_heap_alloc_bytes"], int(m["go_goroutines"])
				if r.heap == 0 {
					t.Fatalf("no go_memstats_heap_alloc_bytes on %s", r.metrics)
				}
				if changes > 0 {
					r.latencies = changeLatencies(ctx, t, c, ns, changes, fmt.Sprintf("run-%d", run))
				}
				r.peak, r.cpu = procKiB(t, r.pid, "VmHWM"), cpuTime(t, scrape(t, r.metrics, "process_"))
				return r
			}
			idleNS := newNamespace("stakater-idle")
			idle := [2]controllerRun{measure(false, idleNS, 0, 0), measure(true, idleNS, 0, 0)}
			var sections []string
			for _, sz := range sizes {
				ns := newNamespace("stakater-vs")
				populate(ctx, t, c, ns, sz.n, sz.valueSize, false)
				measure(false, ns, sz.n, 0) // the reloader's first start: it records every Deployment
				runs := [2]controllerRun{measure(false, ns, sz.n, changes), measure(true, ns, sz.n, changes)}
				var limited []controllerRun
				if memoryLimit != "" {
					limited = append(limited, measure(false, ns, sz.n, changes, memoryLimit))
				}
				label := fmt.Sprintf("%d ConfigMaps of 10 × %d B + %d Deployments", sz.n, sz.valueSize, sz.n)
				sections = append(sections, versusTable(label, idle, runs, 2*sz.n, memoryLimit, limited...))
				t.Log(sections[len(sections)-1])
			}
			env, limitNote := "", ""
			if memoryLimit != "" {
				env = "KPATTERNS_RELOADER_MEMORY_LIMIT=" + memoryLimit + " "
				limitNote = " The last column: the reloader once more, with the memory limit " + memoryLimit +
					" a Deployment passes it (" + app.MemoryLimitEnv + "), its Go runtime's soft limit (GOMEMLIMIT) then 90 % of that."
			}
			page := fmt.Sprintf(`# The reloader and Stakater Reloader

Written by `+"`%sKPATTERNS_MEASURE=1 go test -count=1 -v -timeout 90m -run TestReloaderVsStakater ./e2e/`"+`
(%s) on %s/%s, %d cores, the local cluster; the run took %s.

The kpatterns reloader at this commit against Stakater Reloader %s (github.com/stakater/Reloader,
built from its module; its OpenShift client is cut from the scratch copy it is built in, as the
module proxy refuses the openshift/api version it pins), one controller at a time, the same
objects, each size in a namespace of its own that the controller alone watches. Deployments have
replicas 0, are opted in to both (the reloader's label, Stakater's auto annotation) and read one
ConfigMap each by envFrom. The reloader runs as its ServiceAccount, after a first start that
recorded every Deployment (no rollout); Stakater with the cluster's admin kubeconfig and
--reload-strategy=annotations. RSS settled: within 1 %% over five readings a second apart, at
least 10 s after the start; heap: go_memstats_heap_alloc_bytes after a forced GC (pprof's
heap?gc=1), and per object its growth above the same controller's idle floor over the
ConfigMaps and Deployments of the size (Stakater caches no Deployment: it lists them on each
change); peak: VmHWM over start, settle and %d ConfigMap changes made one at a time; latency:
from each update's response to the watch event of its Deployment's new Pod template. Ratio:
the reloader's over Stakater's.%s

| idle: an empty namespace | Stakater %s | reloader |
|---|---|---|
| RSS settled (MiB) | %.1f | %.1f |
| heap after a forced GC (MiB) | %.1f | %.1f |
| goroutines | %d | %d |

%s
`, env, time.Now().Format("2006-01-02"), runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), time.Since(began).Round(time.Second),
				stakaterVersion, changes, limitNote, stakaterVersion, mib(idle[1].rss), mib(idle[0].rss), idle[1].heap/(1<<20), idle[0].heap/(1<<20),
				idle[1].goroutines, idle[0].goroutines, strings.Join(sections, "\n"))
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

// controllerRun is what TestReloaderVsStakater measured of one controller's run.
type controllerRun struct {
	pid        int
	metrics    string
	rss, peak  int // KiB
	heap       float64
	goroutines int
	cpu        time.Duration
	latencies  []time.Duration
}

func mib(kib int) float64 { return float64(kib) / 1024 }

// versusTable is one size's table: Stakater's figures, the reloader's and their ratio; runs and
// idle are the reloader's then Stakater's; objects are the ConfigMaps and Deployments. With a
// limited run (the reloader with memory limit limit), a last column shows it.
func versusTable(label string, idle, runs [2]controllerRun, objects int, limit string, limited ...controllerRun) string {
	r, s := runs[0], runs[1]
	ms := func(l []time.Duration, p int) float64 { return float64(testenv.Percentile(l, p).Microseconds()) / 1000 }
	perObject := func(run controllerRun, i int) float64 { return (run.heap - idle[i].heap) / float64(objects) }
	// cells are a run's figures, one per row; i is its controller in idle.
	cells := func(run controllerRun, i int) []string {
		return []string{fmt.Sprintf("%.1f", mib(run.rss)), fmt.Sprintf("%.1f", mib(run.peak)), fmt.Sprintf("%.1f", run.heap/(1<<20)),
			fmt.Sprintf("%.0f", perObject(run, i)), fmt.Sprintf("%.0f / %.0f", ms(run.latencies, 50), ms(run.latencies, 95)),
			fmt.Sprint(run.goroutines), fmt.Sprintf("%.1f", run.cpu.Seconds())}
	}
	names := []string{"RSS settled (MiB)", "peak RSS, VmHWM (MiB)", "heap after a forced GC (MiB)", "heap per object above idle (B)",
		"change → rollout p50 / p95 (ms)", "goroutines settled", "CPU time, whole run (s)"}
	ratios := []string{fmt.Sprintf("**%.2f**", float64(r.rss)/float64(s.rss)), fmt.Sprintf("**%.2f**", float64(r.peak)/float64(s.peak)),
		fmt.Sprintf("%.2f", r.heap/s.heap), fmt.Sprintf("%.2f", perObject(r, 0)/perObject(s, 1)),
		fmt.Sprintf("%.3f", ms(r.latencies, 50)/ms(s.latencies, 50)), "", ""}
	header := fmt.Sprintf("| %s | Stakater %s | reloader | ratio |", label, stakaterVersion)
	rule := "|---|---|---|---|"
	var extra []string
	if len(limited) > 0 {
		header, rule, extra = header+" reloader, memory limit "+limit+" |", rule+"---|", cells(limited[0], 0)
	}
	stakater, reloader := cells(s, 1), cells(r, 0)
	lines := []string{header, rule}
	for i, name := range names {
		line := fmt.Sprintf("| %s | %s | %s | %s |", name, stakater[i], reloader[i], ratios[i])
		if extra != nil {
			line += " " + extra[i] + " |"
		}
		lines = append(lines, line)
	}
	return strings.Join(lines, "\n") + "\n"
}

// buildStakater builds Stakater Reloader stakaterVersion from its module, once per version (in
// the project's cache), and returns the binary. The module proxy refuses the
// github.com/openshift/api version the module pins, so the build runs in a scratch copy of the
// module from which its OpenShift client is cut: the DeploymentConfig clientset in pkg/kube and
// the DeploymentConfig helpers of internal/pkg/testutil. Nothing of it is kept but the binary.
func buildStakater(ctx context.Context, t *testing.T) string {
	t.Helper()
	dir, err := controlplane.CacheDir("stakater")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "reloader-"+stakaterVersion)
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	download := command(ctx, root, "go", "mod", "download", "-json", "github.com/stakater/Reloader@"+stakaterVersion)
	download.Stdout = nil // Output's
	downloaded, err := download.Output()
	if err != nil {
		t.Fatalf("go mod download github.com/stakater/Reloader@%s: %v", stakaterVersion, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(downloaded, &mod); err != nil {
		t.Fatal(err)
	}
	src := t.TempDir()
	if err := os.CopyFS(src, os.DirFS(mod.Dir)); err != nil {
		t.Fatal(err)
	}
	edit := func(file string, change func(string) string) {
		path := filepath.Join(src, file)
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		changed := change(string(b))
		if changed == string(b) || strings.Contains(changed, "github.com/openshift/") {
			t.Fatalf("Stakater %s: the cut of its OpenShift client no longer applies to %s", stakaterVersion, file)
		}
		if err := os.WriteFile(path, []byte(changed), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("pkg/kube/client.go", func(s string) string {
		s = strings.Replace(s, "\tappsclient \"github.com/openshift/client-go/apps/clientset/versioned\"\n", "", 1)
		s = strings.Replace(s, "import (\n", "import (\n\t\"errors\"\n", 1)
		s = strings.ReplaceAll(s, "appsclient.Interface", "any")
		s = strings.ReplaceAll(s, "var appsClient *appsclient.Clientset", "var appsClient any")
		i := strings.Index(s, "func GetOpenshiftAppsClient()")
		if i < 0 {
			return s
		}
		end := i + strings.Index(s[i:], "\n}\n") + 3
		return s[:i] + "func GetOpenshiftAppsClient() (any, error) {\n\treturn nil, errors.New(\"cut from this build\")\n}\n" + s[end:]
	})
	edit("internal/pkg/testutil/kube.go", func(s string) string {
		var kept []string
		for i, part := range strings.Split(s, "\nfunc ") {
			body := part
			if j := strings.Index(part, "\n}\n"); j >= 0 {
				body = part[:j]
			}
			if i > 0 && (strings.Contains(body, "openshiftv1.") || strings.Contains(body, "appsclient.")) {
				part = part[strings.Index(part, "\n}\n")+3:] // the function cut, what follows it kept
				kept[len(kept)-1] += "\n" + part
				continue
			}
			kept = append(kept, part)
		}
		s = strings.Join(kept, "\nfunc ")
		for _, imp := range []string{"\topenshiftv1 \"github.com/openshift/api/apps/v1\"\n", "\tappsclient \"github.com/openshift/client-go/apps/clientset/versioned\"\n"} {
			s = strings.Replace(s, imp, "", 1)
		}
		return s
	})
	build := command(ctx, src, "go", "build", "-trimpath", "-o", bin, ".")
	build.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod", "CGO_ENABLED=0")
	if err := build.Run(); err != nil {
		t.Fatalf("building Stakater Reloader %s: %v", stakaterVersion, err)
	}
	return bin
}

// populate creates n ConfigMaps and, with secrets, n Secrets of 10 keys × valueSize bytes (a
// fixed seed), and n Deployments (replicas 0) opted in to the reloader and to Stakater Reloader, Deployment i referencing ConfigMap i and
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
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{reloader.OptIn: "true"},
					Annotations: map[string]string{"reloader.stakater.com/auto": "true"}}, // TestReloaderVsStakater's
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
// update's response to the watch event showing its Deployment's new Pod template (whoever wrote it).
func changeLatencies(ctx context.Context, t *testing.T, c client.WithWatch, ns string, count int, tag string) []time.Duration {
	t.Helper()
	// From the current resourceVersion: a watch without one starts with an ADDED event for every
	// Deployment, which at 10,000 can take longer to stream than a change takes to roll.
	current := &appsv1.DeploymentList{}
	if err := c.List(ctx, current, client.InNamespace(ns), client.Limit(1)); err != nil {
		t.Fatal(err)
	}
	w, err := c.Watch(ctx, &appsv1.DeploymentList{}, client.InNamespace(ns), &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: current.ResourceVersion}})
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
				digests[d.Name] = templateHash(d)
			} else if now := templateHash(d); now != old {
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
			digests[name] = templateHash(d)
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

// templateHash is a digest of d's Pod template.
func templateHash(d *appsv1.Deployment) string {
	b, _ := json.Marshal(d.Spec.Template) // a typed template always marshals
	return digest.New().Field('t', b).String()
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
