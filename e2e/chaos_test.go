// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/digest"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	summary "github.com/kpatterns/kpatterns/summary/controller"
)

// chaosSize is one size of the chaos scenarios: full for `go tool task chaos`, short for the e2e
// suite of `go tool task test`.
type chaosSize struct {
	sources   int           // sources a stream updates
	stream    time.Duration // how long a stream of updates runs
	conflicts int           // concurrent conflicting updates in all
	races     int           // same-name races
	overload  int           // sources created against the overloaded API server
}

var (
	chaosFull  = chaosSize{sources: 100, stream: 20 * time.Second, conflicts: 1000, races: 100, overload: 300}
	chaosShort = chaosSize{sources: 20, stream: 6 * time.Second, conflicts: 200, races: 20, overload: 60}
)

// chaosLease makes a SIGKILL handover take seconds rather than run's default 15 s lease.
var chaosLease = []string{"--leader-elect-lease-duration", "4s", "--leader-elect-renew-deadline", "3s", "--leader-elect-retry-period", "500ms"}

// TestChaos runs mirror (and, through an API server restart, the reloader and summary) through
// faults, each scenario bounded in count and time and ending with an exact check of the final
// state: every source's final data is its child's, no child mirror does not own was written or
// deleted, every Deployment's digest is its ConfigMap's final data's, every Workload's status
// counts its Pods. KPATTERNS_CHAOS=1 (`go tool task chaos`) runs the full
// sizes and writes docs/chaos.md; without it the short sizes run as part of the e2e suite.
//
//	KPATTERNS_CHAOS=1 go test -count=1 -v -timeout 30m -run TestChaos ./e2e/
func TestChaos(t *testing.T) {
	if kindRun {
		t.Skip("signals processes and restarts components of the local cluster")
	}
	size, full := chaosShort, os.Getenv("KPATTERNS_CHAOS") != ""
	if full {
		size = chaosFull
	}
	var rows []string
	report := func(t *testing.T, scenario, result string) {
		t.Logf("%s: %s", scenario, result)
		rows = append(rows, fmt.Sprintf("| %s | %s |", scenario, result))
	}
	ns := envconf.RandomName("chaos", 12)
	f := features.New("chaos").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if err := clientFor(t, cfg).Create(ctx, testNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			installPattern(ctx, t, cfg, "mirror")
			return ctx
		})
	for _, signal := range []string{"SIGTERM", "SIGKILL"} {
		f = f.Assess("leader "+signal+" during a stream of changes", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := fastClient(t, cfg)
			srcs := createSources(ctx, t, c, ns, signal, size.sources)
			r := &replicas{t: t, ctx: ctx, cfg: cfg, c: c, pattern: "mirror", args: chaosLease}
			leader := r.start()
			waitFor(t, "a leader", func(context.Context) (bool, error) { return r.holder() != "", nil })
			r.start()
			time.Sleep(time.Second) // the standby polls the Lease
			was := r.holder()
			var took time.Duration
			writes := streamUpdates(ctx, t, c, ns, srcs, size.stream, func() {
				began := time.Now()
				if signal == "SIGKILL" {
					_ = leader.Cmd.Process.Kill()
				} else {
					_ = leader.Stop(30 * time.Second)
				}
				for h := r.holder(); h == was || h == ""; h = r.holder() {
					if time.Since(began) > time.Minute {
						t.Errorf("no new leader a minute after %s", signal) // not Fatal: this is not the test's goroutine
						return
					}
					time.Sleep(20 * time.Millisecond)
				}
				took = time.Since(began)
			})
			lost := lostUpdates(ctx, t, c, ns, srcs)
			report(t, "leader "+signal+" mid-stream (2 replicas, lease 4 s / renew 3 s / retry 0.5 s)",
				fmt.Sprintf("%d updates to %d sources; handover %s; **%d lost**", writes, len(srcs), took.Round(10*time.Millisecond), lost))
			return ctx
		})
	}
	for _, component := range []string{"kube-apiserver", "etcd"} {
		f = f.Assess(component+" restarted during a stream of changes", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := fastClient(t, cfg)
			srcs := createSources(ctx, t, c, ns, component, size.sources)
			// Leader election on (20 s renew deadline). An API server away for longer than that
			// makes controller-runtime exit by design ("leader election lost"); the kubelet would
			// restart it, and so does this test: a crash loop is more than 2 exits.
			sup := superviseMirror(ctx, t, cfg, "restart-"+component, "--leader-elect=true",
				"--leader-elect-lease-duration", "30s", "--leader-elect-renew-deadline", "20s")
			// Through the same API server restart, the reloader and summary with a stream of their own.
			rsDone := make(chan struct{})
			var rs *reloaderSummary
			var rsWrites int
			var rsErr error
			if component == "kube-apiserver" {
				rs = startReloaderSummary(ctx, t, cfg, c, size)
				defer rs.stop()
				go func() { defer close(rsDone); rsWrites, rsErr = rs.stream(ctx, size.stream) }()
			} else {
				close(rsDone)
			}
			var down time.Duration
			writes := streamUpdates(ctx, t, c, ns, srcs, size.stream, func() {
				began := time.Now()
				if err := localProvider.Cluster().Restart(component, time.Second, nil); err != nil {
					t.Error(err) // not Fatal: this is not the test's goroutine
				}
				down = time.Since(began)
			})
			lost := lostUpdates(ctx, t, c, ns, srcs)
			exits := sup.stop(t)
			if exits > 2 {
				t.Errorf("mirror exited %d times when %s restarted: a crash loop", exits, component)
			}
			report(t, component+" restarted mid-stream (data and port kept; leader election with a 20 s renew deadline)",
				fmt.Sprintf("%d updates to %d sources; unavailable %s; mirror exited %d times (restarted as a kubelet would); **%d lost**",
					writes, len(srcs), down.Round(100*time.Millisecond), exits, lost))
			if <-rsDone; rsErr != nil {
				t.Fatal(rsErr)
			}
			if rs != nil {
				report(t, "reloader and summary through the same kube-apiserver restart (no leader election)",
					fmt.Sprintf("%d ConfigMap updates over %d opted-in Deployments of one kwok Pod each, a Workload each; **%d Deployments or Workloads wrong** "+
						"(a template digest not its ConfigMap's final data's, a status not counting its Pods) 2 minutes after the last change",
						rsWrites, len(rs.names), rs.wrong(ctx, t)))
			}
			return ctx
		})
	}
	f = f.Assess("concurrent conflicting updates; foreign children are never written", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		c := fastClient(t, cfg)
		srcs := createSources(ctx, t, c, ns, "conflict", 50)
		// Every fifth source's <name>-mirror belongs to someone else, created before mirror runs.
		foreign := map[string]string{}
		for i, s := range srcs {
			if i%5 == 0 {
				foreign[s+mirror.Suffix] = createForeign(ctx, t, c, ns, s+mirror.Suffix)
			}
		}
		p := runMirror(ctx, t, cfg, "conflicts", "--max-concurrent-reconciles", "4")
		var conflicts atomic.Int64
		var g errgroup.Group
		per := size.conflicts / 20
		for w := range 20 {
			g.Go(func() error {
				for i := range per {
					name := srcs[(w*per+i)%len(srcs)] // the writers overlap on every source
					if err := updateSource(ctx, c, ns, name, fmt.Sprintf("w%d-%d", w, i), &conflicts); err != nil {
						return err
					}
				}
				return nil
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		owned := slices.DeleteFunc(slices.Clone(srcs), func(s string) bool { return foreign[s+mirror.Suffix] != "" })
		lost := lostUpdates(ctx, t, c, ns, owned)
		touched := foreignTouched(ctx, t, c, ns, foreign)
		report(t, "concurrent conflicting updates (20 writers over 50 sources, mirror with 4 workers)",
			fmt.Sprintf("%d updates, %d of them retried after a conflict; **%d lost**; %d foreign children, **%d written or deleted**",
				20*per, conflicts.Load(), lost, len(foreign), touched))
		stopChaos(t, p)
		return ctx
	})
	f = f.Assess("a foreign object created under a child's name at the same moment is never touched", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		c := fastClient(t, cfg)
		p := runMirror(ctx, t, cfg, "races", "--max-concurrent-reconciles", "4")
		foreign := map[string]string{}
		var mu sync.Mutex
		var g errgroup.Group
		g.SetLimit(8)
		for i := range size.races {
			g.Go(func() error {
				name := fmt.Sprintf("race-%03d", i)
				src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
					Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"v": "source"}}
				other := foreignChild(ns, name+mirror.Suffix)
				var sg errgroup.Group // the source and the foreign child at once: either may win
				sg.Go(func() error { return c.Create(ctx, src) })
				sg.Go(func() error {
					// Staggered by 0–450 ms, so that mirror's child is first in some races and the
					// foreign object in others.
					time.Sleep(time.Duration(i%10) * 50 * time.Millisecond)
					err := c.Create(ctx, other)
					if apierrors.IsAlreadyExists(err) {
						return nil // mirror's child was first
					}
					if err == nil {
						mu.Lock()
						foreign[other.Name] = other.ResourceVersion
						mu.Unlock()
					}
					return err
				})
				return sg.Wait()
			})
		}
		if err := g.Wait(); err != nil {
			t.Fatal(err)
		}
		var owned []string
		for i := range size.races {
			if name := fmt.Sprintf("race-%03d", i); foreign[name+mirror.Suffix] == "" {
				owned = append(owned, name)
			}
		}
		lost := lostUpdates(ctx, t, c, ns, owned)
		touched := foreignTouched(ctx, t, c, ns, foreign)
		report(t, "same-name race: a source and a foreign object of its child's name created at once",
			fmt.Sprintf("%d races: mirror's child first %d, foreign first %d; **%d foreign written or deleted**; %d children not converged",
				size.races, len(owned), len(foreign), touched, lost))
		stopChaos(t, p)
		return ctx
	})
	f = f.Assess("an overloaded API server (429s) converges with bounded requests", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		overload := map[string]string{"max-requests-inflight": "3", "max-mutating-requests-inflight": "1", "enable-priority-and-fairness": "false"}
		restore := map[string]string{"max-requests-inflight": "400", "max-mutating-requests-inflight": "200", "enable-priority-and-fairness": "true"}
		if err := localProvider.Cluster().Restart("kube-apiserver", 0, overload); err != nil {
			t.Fatal(err)
		}
		defer func() {
			if err := localProvider.Cluster().Restart("kube-apiserver", 0, restore); err != nil {
				t.Fatal(err)
			}
		}()
		metrics := "127.0.0.1:" + freePort(t)
		p := runMirror(ctx, t, cfg, "overload", "--max-concurrent-reconciles", "4", "--metrics-bind-address", metrics, "--metrics-secure=false")
		c := fastClient(t, cfg)
		began := time.Now()
		srcs := createSources(ctx, t, c, ns, "overload", size.overload)
		lost := lostUpdates(ctx, t, c, ns, srcs)
		took := time.Since(began)
		m := scrape(t, metrics, "rest_client_requests_total{")
		var total, throttled float64
		for series, v := range m {
			total += v
			if strings.Contains(series, `code="429"`) {
				throttled += v
			}
		}
		// Every source costs mirror one create (and its child's event a reconcile that writes
		// nothing); the rest is retries. A hot loop would be thousands per source.
		if bound := float64(20*size.overload + 200); total > bound {
			t.Errorf("mirror sent %.0f requests for %d sources (bound %.0f): retries are not backing off", total, size.overload, bound)
		}
		report(t, "API server overloaded (--max-requests-inflight 3, --max-mutating-requests-inflight 1, APF off)",
			fmt.Sprintf("%d sources created concurrently; mirror: %.0f requests, %.0f answered 429, %.1f requests per source; converged in %s; **%d not mirrored**",
				size.overload, total, throttled, total/float64(size.overload), took.Round(100*time.Millisecond), lost))
		stopChaos(t, p)
		return ctx
	})
	f = f.Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		// The cluster as the tests after this one expect it: after this test's API server restarts,
		// the cluster's own components' watches wait out client-go's backoff (up to a minute), and
		// no Pod would run meanwhile; restarted, they list and watch at once.
		for _, agent := range localcluster.Agents {
			if err := localProvider.Cluster().Restart(agent, 0, nil); err != nil {
				t.Fatal(err)
			}
		}
		if err := localProvider.Cluster().WaitReady(ctx, clientFor(t, cfg)); err != nil {
			t.Fatal(err)
		}
		_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
		if full {
			writeChaosPage(t, size, rows)
		}
		return ctx
	})
	testEnv.Test(t, f.Feature())
}

// fastClient is an admin client without client-go's 5 requests/s default (the load is what is
// tested), and its config.
func fastClient(t *testing.T, cfg *envconf.Config) client.WithWatch {
	t.Helper()
	c, _ := fastClientConfig(t, cfg)
	return c
}

func fastClientConfig(t *testing.T, cfg *envconf.Config) (client.WithWatch, *rest.Config) {
	t.Helper()
	rc := rest.CopyConfig(cfg.Client().RESTConfig())
	rc.QPS, rc.Burst = 500, 1000
	c, err := client.NewWithWatch(rc, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	return c, rc
}

// runMirror runs one mirror process as its ServiceAccount, without leader election unless args turn it on.
func runMirror(ctx context.Context, t *testing.T, cfg *envconf.Config, name string, args ...string) *localcluster.Pattern {
	t.Helper()
	p, err := startMirror(ctx, cfg, "mirror-chaos-"+name+".log", args...)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startMirror starts one mirror process as its ServiceAccount, logging to logs/<logName>; without
// leader election unless args turn it on. The log file stays open while the process may write.
func startMirror(ctx context.Context, cfg *envconf.Config, logName string, args ...string) (*localcluster.Pattern, error) {
	log, err := os.Create(filepath.Join(logs, logName))
	if err != nil {
		return nil, err
	}
	p, err := localcluster.RunPattern(ctx, filepath.Join(bins, "mirror"), cfg.KubeconfigFile(), operatorNamespace, log, false,
		append([]string{"--leader-elect=false"}, args...)...)
	if err != nil {
		_ = log.Close()
		return nil, err
	}
	go func() { <-p.Exited; _ = log.Close() }()
	return p, nil
}

// supervisor keeps one mirror process running, as a kubelet keeps a container: when it exits it
// is started again (after 1 s, and again while it cannot start), and the exits are counted.
type supervisor struct {
	mu    sync.Mutex
	p     *localcluster.Pattern
	exits int
	done  chan struct{}
	wg    sync.WaitGroup
}

func superviseMirror(ctx context.Context, t *testing.T, cfg *envconf.Config, name string, args ...string) *supervisor {
	t.Helper()
	s := &supervisor{p: runMirror(ctx, t, cfg, name, args...), done: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			s.mu.Lock()
			p := s.p
			s.mu.Unlock()
			select {
			case <-s.done:
				return
			case <-p.Exited:
			}
			s.mu.Lock()
			s.exits++
			n := s.exits
			s.mu.Unlock()
			for {
				select {
				case <-s.done:
					return
				case <-time.After(time.Second):
				}
				next, err := startMirror(ctx, cfg, fmt.Sprintf("mirror-chaos-%s-%d.log", name, n), args...)
				if err == nil {
					s.mu.Lock()
					s.p = next
					s.mu.Unlock()
					break
				}
			}
		}
	}()
	return s
}

// stop stops the supervision and the process, and returns how often the process had exited.
func (s *supervisor) stop(t *testing.T) int {
	t.Helper()
	close(s.done)
	s.wg.Wait()
	stopChaos(t, s.p)
	return s.exits
}

func stopChaos(t *testing.T, p *localcluster.Pattern) {
	t.Helper()
	if err := p.Stop(30 * time.Second); err != nil {
		t.Errorf("mirror after SIGTERM: %v", err)
	}
}

// createSources creates n labelled sources prefix-0 … prefix-(n-1) concurrently and returns their names.
func createSources(ctx context.Context, t *testing.T, c client.Client, ns, prefix string, n int) []string {
	t.Helper()
	names := make([]string, n)
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		names[i] = fmt.Sprintf("%s-%03d", strings.ToLower(prefix), i)
		g.Go(func() error {
			return retryUnavailable(ctx, func() error {
				err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: names[i], Namespace: ns,
					Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"v": "0"}})
				if apierrors.IsAlreadyExists(err) {
					return nil // a retried create that had gone through
				}
				return err
			})
		})
	}
	if err := g.Wait(); err != nil {
		t.Fatal(err)
	}
	return names
}

// retryUnavailable retries op while the API server is down or overloaded (a restart, 429s),
// for at most a minute.
func retryUnavailable(ctx context.Context, op func() error) error {
	deadline := time.Now().Add(time.Minute)
	for {
		err := op()
		if err == nil || time.Now().After(deadline) || apierrors.IsConflict(err) || apierrors.IsNotFound(err) || apierrors.IsInvalid(err) {
			return err
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// conflictRetry outlasts 20 writers on one object (client-go's DefaultRetry gives up after 5).
var conflictRetry = wait.Backoff{Steps: 200, Duration: 2 * time.Millisecond, Factor: 1.1, Jitter: 1, Cap: 100 * time.Millisecond}

// updateSource sets a source's data to v, re-reading on a conflict; conflicts counts the retries.
func updateSource(ctx context.Context, c client.Client, ns, name, v string, conflicts *atomic.Int64) error {
	return retryUnavailable(ctx, func() error {
		return retry.RetryOnConflict(conflictRetry, func() error {
			cm := &corev1.ConfigMap{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
				return err
			}
			cm.Data = map[string]string{"v": v}
			err := c.Update(ctx, cm)
			if apierrors.IsConflict(err) && conflicts != nil {
				conflicts.Add(1)
			}
			return err
		})
	})
}

// streamUpdates updates random sources one after another for d (errors while the API server is
// away are retried), calls fault on another goroutine a third of the way in (it reports with
// t.Error, never t.Fatal), waits for it, and returns the number of updates.
func streamUpdates(ctx context.Context, t *testing.T, c client.Client, ns string, srcs []string, d time.Duration, fault func()) int {
	t.Helper()
	rng := rand.New(rand.NewPCG(1, 2)) // the same sequence every run
	faulted := make(chan struct{})
	go func() {
		defer close(faulted)
		time.Sleep(d / 3)
		fault()
	}()
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		if err := updateSource(ctx, c, ns, srcs[rng.IntN(len(srcs))], strconv.Itoa(n+1), nil); err != nil {
			t.Fatalf("update %d: %v", n, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
	<-faulted
	return n
}

// lostUpdates waits (at most 2 minutes) for every source's child to hold the source's data as it
// is now, and returns how many do not by then; each is reported.
func lostUpdates(ctx context.Context, t *testing.T, c client.Client, ns string, srcs []string) int {
	t.Helper()
	return settled(t, "not mirrored 2 minutes after the last change", func() (behind []string) {
		for _, name := range srcs {
			src, child := &corev1.ConfigMap{}, &corev1.ConfigMap{}
			err := errors.Join(c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, src),
				c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + mirror.Suffix}, child))
			if err != nil || !maps.Equal(src.Data, child.Data) || metav1.GetControllerOf(child) == nil || metav1.GetControllerOf(child).UID != src.UID {
				behind = append(behind, fmt.Sprintf("%s: source %v, child %v (%v)", name, src.Data, child.Data, err))
			}
		}
		return behind
	})
}

// settled polls wrong (every 500 ms, at most 2 minutes) until it names nothing, and reports what it
// names by then, each as "what: …"; it returns their number.
func settled(t *testing.T, what string, wrong func() []string) int {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	left := wrong()
	for len(left) > 0 && time.Now().Before(deadline) {
		time.Sleep(500 * time.Millisecond)
		left = wrong()
	}
	for _, w := range left {
		t.Errorf("%s: %s", what, w)
	}
	return len(left)
}

func foreignChild(ns, name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"owner": "someone else"}}
}

// createForeign creates a ConfigMap mirror does not own and returns its resourceVersion.
func createForeign(ctx context.Context, t *testing.T, c client.Client, ns, name string) string {
	t.Helper()
	cm := foreignChild(ns, name)
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	return cm.ResourceVersion
}

// foreignTouched counts, and reports, the foreign objects (name → resourceVersion at creation)
// that are gone or were written since.
func foreignTouched(ctx context.Context, t *testing.T, c client.Client, ns string, foreign map[string]string) int {
	t.Helper()
	n := 0
	for name, rv := range foreign {
		cm := &corev1.ConfigMap{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil || cm.ResourceVersion != rv {
			t.Errorf("foreign ConfigMap %s was written or deleted (resourceVersion %s → %q, %v)", name, rv, cm.ResourceVersion, err)
			n++
		}
	}
	return n
}

// scrape reads the series whose names start with prefix from a plain-HTTP Prometheus text
// endpoint: series (name and labels) → value.
func scrape(t *testing.T, addr, prefix string) map[string]float64 {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	return series(resp.Body, prefix)
}

// series is the samples of a Prometheus text exposition whose series (name and labels) start
// with prefix, by series.
func series(r io.Reader, prefix string) map[string]float64 {
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		if !ok || !strings.HasPrefix(name, prefix) {
			continue
		}
		if v, err := strconv.ParseFloat(value, 64); err == nil {
			out[name] = v
		}
	}
	return out
}

// cpuTime is the process_cpu_seconds_total of a process's metrics.
func cpuTime(t *testing.T, metrics map[string]float64) time.Duration {
	t.Helper()
	v, ok := metrics["process_cpu_seconds_total"]
	if !ok {
		t.Fatal("no process_cpu_seconds_total in the metrics")
	}
	return time.Duration(v * float64(time.Second))
}

// writeChaosPage writes docs/chaos.md (KPATTERNS_CHAOS_OUT) with the machine it ran on.
func writeChaosPage(t *testing.T, size chaosSize, rows []string) {
	t.Helper()
	path := os.Getenv("KPATTERNS_CHAOS_OUT")
	if path == "" {
		path = filepath.Join(root, "docs", "chaos.md")
	}
	page := fmt.Sprintf(`# Chaos results

Written by `+"`go tool task chaos`"+` (%s) on %s. Command: `+"`KPATTERNS_CHAOS=1 go test -count=1 -v -timeout 30m -run TestChaos ./e2e/`"+`
(%s). Each scenario runs mirror as its ServiceAccount on the local cluster — one runs the
reloader and summary — and ends with an exact check: every source's child holds the source's data
as it is at the end (a child that does not within 2 minutes of the last change is a **lost**
update), no ConfigMap that mirror does not own was written or deleted (same resourceVersion as
when it was created), every Deployment's template digest is the digest of its ConfigMap's final
data, and every Workload's status counts its Pods as they are. The test fails on any lost update,
touched foreign object or wrong digest or status.

| scenario | result |
|---|---|
%s

The least-privilege table (each RBAC rule removed in turn) is [least-privilege.md](least-privilege.md).
`, time.Now().UTC().Format("2006-01-02"), machine(), size, strings.Join(rows, "\n"))
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}

func (s chaosSize) String() string {
	return fmt.Sprintf("%d sources per stream, each stream %s; %d conflicting updates; %d races; %d sources against the overloaded API server",
		s.sources, s.stream, s.conflicts, s.races, s.overload)
}

// reloaderSummary is the reloader and summary (without leader election: an API server away for
// longer than a renew deadline makes a leader exit by design, as mirror's scenario shows) over
// opted-in Deployments of one kwok Pod, each with a ConfigMap of its own and a Workload selecting
// its Pods.
type reloaderSummary struct {
	c     client.Client
	ns    string
	names []string
	stops []func()
}

// startReloaderSummary creates size.sources/2 such Deployments (at least 5) and waits for both
// patterns to have converged on them.
func startReloaderSummary(ctx context.Context, t *testing.T, cfg *envconf.Config, c client.Client, size chaosSize) *reloaderSummary {
	t.Helper()
	rs := &reloaderSummary{c: c, ns: envconf.RandomName("chaos-rs", 16)}
	if err := c.Create(ctx, testNamespace(rs.ns)); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"reloader", "summary"} {
		rs.stops = append(rs.stops, runPattern(ctx, t, cfg, p, "--leader-elect=false", "--watch-namespaces", rs.ns))
	}
	for i := range max(size.sources/2, 5) {
		name := fmt.Sprintf("app-%03d", i)
		rs.names = append(rs.names, name)
		d := deploymentUsing(rs.ns, name, name, true)
		err := errors.Join(
			c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rs.ns}, Data: map[string]string{"v": "0"}}),
			c.Create(ctx, d),
			c.Create(ctx, &summaryv1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: rs.ns},
				Spec: summaryv1alpha1.WorkloadSpec{Selector: d.Spec.Selector.MatchLabels}}))
		if err != nil {
			t.Fatal(err)
		}
	}
	if wrong := rs.wrong(ctx, t); wrong > 0 {
		t.Fatalf("%d Deployments or Workloads not converged before the fault", wrong)
	}
	return rs
}

// stop stops both patterns and deletes their namespace.
func (rs *reloaderSummary) stop() {
	for _, stop := range rs.stops {
		stop()
	}
	_ = rs.c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: rs.ns}})
}

// stream updates random ConfigMaps for d (each update a rollout: new Pods for kwok and summary),
// retrying while the API server is away, and returns the number of updates. Any goroutine.
func (rs *reloaderSummary) stream(ctx context.Context, d time.Duration) (int, error) {
	rng := rand.New(rand.NewPCG(3, 4)) // the same sequence every run
	n := 0
	for end := time.Now().Add(d); time.Now().Before(end); n++ {
		if err := updateSource(ctx, rs.c, rs.ns, rs.names[rng.IntN(len(rs.names))], strconv.Itoa(n+1), nil); err != nil {
			return n, fmt.Errorf("reloader and summary: update %d: %w", n, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	return n, nil
}

// wrong waits (at most 2 minutes) until every Deployment's template digest is the digest of its
// ConfigMap's data (none, and a baseline recorded, for a ConfigMap never updated) and every Workload's status counts the Pods its selector matches (summary's own
// Summarize over the API server's Pods), and returns how many are wrong by then; each is reported.
func (rs *reloaderSummary) wrong(ctx context.Context, t *testing.T) int {
	t.Helper()
	c, ns := rs.c, rs.ns
	return settled(t, "2 minutes after the last change", func() (wrong []string) {
		for _, name := range rs.names {
			cm, d, w, pods := &corev1.ConfigMap{}, &appsv1.Deployment{}, &summaryv1alpha1.Workload{}, &corev1.PodList{}
			key := client.ObjectKey{Namespace: ns, Name: name}
			if err := errors.Join(c.Get(ctx, key, cm), c.Get(ctx, key, d), c.Get(ctx, key, w)); err != nil {
				wrong = append(wrong, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(w.Spec.Selector)); err != nil {
				wrong = append(wrong, fmt.Sprintf("%s: %v", name, err))
				continue
			}
			want, err := templateDigest(ctx, c, d, cm)
			if err != nil {
				wrong = append(wrong, fmt.Sprintf("ConfigMap %s: %v", name, err))
				continue
			}
			// A ConfigMap never updated leaves the template untouched (the reloader records its
			// baseline on first sight); an updated one, the digest of its final data.
			switch got := d.Spec.Template.Annotations[digest.Annotation]; {
			case cm.Data["v"] == "0" && (got != "" || d.Annotations[reloader.DigestsAnnotation] == ""):
				wrong = append(wrong, fmt.Sprintf("Deployment %s: never updated, template digest %q, baseline %q", name, got, d.Annotations[reloader.DigestsAnnotation]))
			case cm.Data["v"] != "0" && got != want:
				wrong = append(wrong, fmt.Sprintf("Deployment %s: template digest %.12s, its ConfigMap's data %v is %.12s", name, got, cm.Data, want))
			}
			if total, ready, _ := summary.Summarize(pods.Items); w.Status.Total != total || w.Status.Ready != ready {
				wrong = append(wrong, fmt.Sprintf("Workload %s: status %d/%d ready, its Pods %d/%d", name, w.Status.Ready, w.Status.Total, ready, total))
			}
		}
		return wrong
	})
}

// templateDigest is the Pod-template digest the reloader writes for d, whose only source is cm:
// its own Refs, Cached, Digests (with the key it keeps in the operator namespace) and Combined over
// cm's data.
func templateDigest(ctx context.Context, c client.Client, d *appsv1.Deployment, cm *corev1.ConfigMap) (string, error) {
	p, err := reloader.Cached(cm)
	if err != nil {
		return "", err
	}
	key := &corev1.Secret{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: reloader.KeySecret}, key); err != nil {
		return "", err
	}
	return reloader.Combined(reloader.Digests(key.Data["key"], reloader.Refs(&d.Spec.Template.Spec), func(reloader.Ref) client.Object { return p })), nil
}
