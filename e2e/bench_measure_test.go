// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/yaml"
)

// clientWrites is the write requests (POST, PUT, PATCH, DELETE) a pattern's own client sent, from
// its plain-HTTP /metrics at addr (controller-runtime's rest_client_requests_total): by method,
// and their sum.
func clientWrites(t *testing.T, addr string) (string, int) {
	t.Helper()
	byMethod := map[string]int{}
	for series, v := range scrape(t, addr, "rest_client_requests_total{") {
		for _, m := range []string{"POST", "PUT", "PATCH", "DELETE"} {
			if strings.Contains(series, `method="`+m+`"`) {
				byMethod[m] += int(v)
			}
		}
	}
	var parts []string
	sum := 0
	for _, m := range slices.Sorted(maps.Keys(byMethod)) {
		parts = append(parts, fmt.Sprintf("%s %d", m, byMethod[m]))
		sum += byMethod[m]
	}
	return strings.Join(parts, ", "), sum
}

func waitForLong(t *testing.T, what string, limit time.Duration, cond func(ctx context.Context) (bool, error)) {
	t.Helper()
	if err := pollUntil(what, limit, cond); err != nil {
		t.Fatal(err)
	}
}

// pollUntil polls cond every 500 ms until it is true, or returns an error naming what and cond's
// last error once limit has passed. Any goroutine.
func pollUntil(what string, limit time.Duration, cond func(ctx context.Context) (bool, error)) error {
	deadline := time.Now().Add(limit)
	for {
		ok, err := cond(context.Background())
		if ok {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: not within %s (%v)", what, limit, err)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// writable is the set of "VERB group/resource[/subresource]" write requests the pattern's
// generated ClusterRole allows: the requests counted are those, so that kube-controller-manager's and kwok's
// own writes (ReplicaSets, Pods, Deployment status, core Events) do not count against it.
func writable(t *testing.T, pattern string) map[string]bool {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, pattern, "config", "rbac", "role.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	role := &rbacv1.ClusterRole{}
	if err := yaml.Unmarshal(b, role); err != nil {
		t.Fatal(err)
	}
	requests := map[string][]string{"create": {"POST"}, "update": {"PUT"}, "patch": {"PATCH", "APPLY"}, "delete": {"DELETE"}}
	out := map[string]bool{}
	for _, r := range role.Rules {
		for _, verb := range r.Verbs {
			for _, req := range requests[verb] {
				for _, g := range r.APIGroups {
					for _, res := range r.Resources {
						out[req+" "+g+"/"+res] = true
					}
				}
			}
		}
	}
	return out
}

// apiserverWrites reads kube-apiserver's apiserver_request_total and sums the write requests
// (POST, PUT, PATCH, APPLY, DELETE) to the resources in written by "VERB resource[/subresource]".
func apiserverWrites(ctx context.Context, t *testing.T, rc *rest.Config, written map[string]bool) map[string]int {
	t.Helper()
	out := map[string]int{}
	for name, v := range apiserverMetrics(ctx, t, rc, "apiserver_request_total{") {
		l := map[string]string{}
		for _, kv := range strings.Split(strings.TrimSuffix(strings.TrimPrefix(name, "apiserver_request_total{"), "}"), ",") {
			if k, v, ok := strings.Cut(kv, "="); ok {
				l[k] = strings.Trim(v, `"`)
			}
		}
		switch l["verb"] {
		case "POST", "PUT", "PATCH", "APPLY", "DELETE":
		default:
			continue
		}
		res := l["resource"]
		if l["subresource"] != "" {
			res += "/" + l["subresource"]
		}
		if !written[l["verb"]+" "+l["group"]+"/"+res] {
			continue
		}
		out[l["verb"]+" "+res] += int(v)
	}
	return out
}

// apiserverMetrics is kube-apiserver's /metrics samples whose series start with prefix.
func apiserverMetrics(ctx context.Context, t *testing.T, rc *rest.Config, prefix string) map[string]float64 {
	t.Helper()
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	b, err := cs.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return series(bytes.NewReader(b), prefix)
}

// apiserverCPU is the CPU time kube-apiserver has used.
func apiserverCPU(ctx context.Context, t *testing.T, rc *rest.Config) time.Duration {
	t.Helper()
	return cpuTime(t, apiserverMetrics(ctx, t, rc, "process_cpu_seconds_total"))
}

// ownCPU is the CPU time this test process has used.
func ownCPU(t *testing.T) time.Duration {
	var u syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &u); err != nil {
		t.Fatal(err)
	}
	return time.Duration(u.Utime.Nano() + u.Stime.Nano())
}

// outPath is where a results page goes: path if absolute, else relative to the repository's root
// (go test runs in e2e/); empty is docs/name.
func outPath(path, name string) string {
	switch {
	case path == "":
		return filepath.Join(root, "docs", name)
	case filepath.IsAbs(path):
		return path
	}
	return filepath.Join(root, path)
}

// machine describes this machine for a results page: OS/arch, cores, memory, Go version, and the
// local cluster's versions.
func machine() string {
	mem := "?"
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		mem = strings.Fields(strings.SplitN(string(b), "\n", 2)[0])[1] + " kB"
	}
	return fmt.Sprintf("%s/%s: %d cores, %s memory, %s; local cluster from %s", runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), mem,
		runtime.Version(), controlPlane())
}

// controlPlane is the versions the local cluster's binaries are built from (tools/controlplane).
func controlPlane() string {
	b, err := os.ReadFile(filepath.Join(root, "tools", "controlplane", "go.mod"))
	if err != nil {
		return "?"
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && slices.Contains([]string{"k8s.io/kubernetes", "go.etcd.io/etcd/server/v3", "sigs.k8s.io/kwok"}, f[0]) {
			out = append(out, f[0]+" "+f[1])
		}
	}
	return strings.Join(out, ", ")
}

// benchPage is what TestBench measured, for its results page.
type benchPage struct {
	benchSize
	began                        time.Time
	rows                         []string
	total, ratio, pods, reloader string
	out                          string // the page's path; "" is docs/bench.md
	command                      string // that ran it
}

// write writes the results page (KPATTERNS_BENCH_OUT, default docs/bench.md) with the machine it
// ran on and how long the run took.
func (p benchPage) write(t *testing.T) {
	t.Helper()
	path := outPath(p.out, "bench.md")
	page := fmt.Sprintf(`# Bench results

Written by `+"`go tool task bench`"+` (%s) on %s. Command: `+"`%s`"+`.
TestBench took %s.

**Writes when converged**: every pattern at once, each over %d objects of its own in its own
namespace (`+"`--watch-namespaces`"+`), converged; then all stopped and restarted one after another
(a full resync each, %s apart, `+"`--leader-elect=false`"+` so that no Lease write counts), and the
write requests (POST, PUT, PATCH, DELETE) each pattern's own client sent (its
rest_client_requests_total) counted until %s after the last restart. Goal: 0. Below the table, kube-apiserver's own count
(apiserver_request_total) over the same span, of write requests to the resources the patterns'
generated ClusterRoles let them write (so that kube-controller-manager's and kwok's writes do not
count): it bounds the patterns' counts from the server's side.
Start-up is from the process start to /readyz (informers synced) over its objects, while the
patterns restarted before it resync; RSS and live heap (the last GC's, GODEBUG=gctrace=1) at the
end of the window.

| pattern | objects | write requests after the restart | start to /readyz | RSS | live heap | note |
|---|---|---|---|---|---|---|
%s

%s.

**mirror against a bare client-go loop**: %d labelled sources created while mirror is down; mirror
started (one worker, its ServiceAccount, no client-side rate limit, protobuf — controller-runtime's
encoding of built-in types) and timed from /readyz to the
watch delivering its %d-th child, against one goroutine creating the same %d children (mirror's
own Desired of each source: label, data, controller ownerReference) of sources like them in a
namespace mirror does not watch, with the same client, in the same run, timed from its first
create to the same kind of watch delivering its %d-th child — once before mirror's part and once
after, the mean of the two as the round's baseline, since the cluster slows as the run adds
objects; each timed part 3 s after the untimed creates before it, no namespace deleted (goal:
ratio ≤ 1.2). %s.

**summary over many Pods** (kwok runs them; summary watches only that namespace): %s.

**reloader over many Deployments**: %s.
`, time.Now().UTC().Format("2006-01-02"), machine(), p.command, time.Since(p.began).Round(time.Second), p.n, p.spacing, p.window,
		strings.Join(p.rows, "\n"), p.total, 2*p.n, 2*p.n, 2*p.n, 2*p.n, p.ratio, p.pods, p.reloader)
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", path)
}
