// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests through a real kube-apiserver (envtest): the generated webhook configuration
// (namespaceSelector patterns.kpatterns.dev/enforce=true) is installed by envtest, the pattern's
// manager serves it as its ServiceAccount (namespaces get/list/watch only), and its cache and live
// reads go to the same API server.

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kpatterns/kpatterns/podpolicy/config"
	"github.com/kpatterns/kpatterns/podpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, NewManager: newManager, Setup: webhook.Setup}, func(e *testenv.Env) { env = e })
}

// namespace creates a namespace with the given labels set to "true".
func namespace(t testing.TB, labels ...string) string {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + utilrand.String(6), Labels: map[string]string{}}}
	for _, l := range labels {
		ns.Labels[l] = "true"
	}
	if err := env.Client.Create(context.Background(), ns); err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

func pod(ns, name string, mutate ...func(*corev1.PodSpec)) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	for _, m := range mutate {
		m(&p.Spec)
	}
	return p
}

func privileged(s *corev1.PodSpec) {
	s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
}
func hostNetwork(s *corev1.PodSpec) { s.HostNetwork, s.HostPID = true, true }

// counter reads a counter from the manager's metrics registry (what /metrics serves).
func counter(t testing.TB, name string, labels ...string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
	metric:
		for _, m := range f.GetMetric() {
			for i := 0; i+1 < len(labels); i += 2 {
				for _, l := range m.GetLabel() {
					if l.GetName() == labels[i] && l.GetValue() != labels[i+1] {
						continue metric
					}
				}
			}
			return m.GetCounter().GetValue()
		}
	}
	return 0
}

func TestPolicyFromNamespaceLabels(t *testing.T) {
	env.Manager(t)
	ctx := context.Background()
	closed := namespace(t, webhook.EnforceLabel)
	testenv.Denied(t, env.Client.Create(ctx, pod(closed, "p")), "does not allow Pods (label patterns.kpatterns.dev/allow-pods=true)")

	open := namespace(t, webhook.EnforceLabel, webhook.AllowPodsLabel)
	if err := env.Client.Create(ctx, pod(open, "plain")); err != nil {
		t.Fatalf("a plain Pod where Pods are allowed: %v", err)
	}
	testenv.Denied(t, env.Client.Create(ctx, pod(open, "priv", privileged)), "container app is privileged")
	testenv.Denied(t, env.Client.Create(ctx, pod(open, "host", hostNetwork)), "hostNetwork, hostPID: namespace "+open+" does not allow host namespaces")
	testenv.Denied(t, env.Client.Create(ctx, pod(open, "both", privileged, hostNetwork)), "is privileged", "; hostNetwork, hostPID")

	lax := namespace(t, webhook.EnforceLabel, webhook.AllowPodsLabel, webhook.AllowPrivilegedLabel, webhook.AllowHostNamespacesLabel)
	if err := env.Client.Create(ctx, pod(lax, "both", privileged, hostNetwork)); err != nil {
		t.Fatalf("privileged and host namespaces where the labels allow them: %v", err)
	}
	ungoverned := namespace(t)
	if err := env.Client.Create(ctx, pod(ungoverned, "both", privileged, hostNetwork)); err != nil {
		t.Fatalf("a namespace without %s is not sent to the webhook: %v", webhook.EnforceLabel, err)
	}
}

// A Namespace that existed when the replica started is in its cache before the replica is ready
// (the manager's readiness waits for the informers Setup registered; the cache refuses reads of
// anything it did not register), so its first Pod is a cache hit, not a live read.
func TestReadyMeansTheCacheHasSynced(t *testing.T) {
	ns := namespace(t, webhook.EnforceLabel, webhook.AllowPodsLabel)
	env.Manager(t)
	hits, live := counter(t, "podpolicy_namespace_cache_hits_total"), counter(t, "podpolicy_namespace_live_reads_total")
	if err := env.Client.Create(context.Background(), pod(ns, "first")); err != nil {
		t.Fatal(err)
	}
	if d := counter(t, "podpolicy_namespace_cache_hits_total") - hits; d != 1 {
		t.Errorf("cache hits +%v, want +1", d)
	}
	if d := counter(t, "podpolicy_namespace_live_reads_total") - live; d != 0 {
		t.Errorf("live reads +%v, want none", d)
	}
}

// gatedReader counts the GETs that reach the API server and holds them until released.
type gatedReader struct {
	client.Reader
	release chan struct{}
	gets    atomic.Int32
}

func (g *gatedReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	g.gets.Add(1)
	<-g.release
	return g.Reader.Get(ctx, key, obj, opts...)
}

func podRequest(t testing.TB, ns string) admission.Request {
	t.Helper()
	p := pod(ns, "p")
	p.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}
	raw, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Namespace: ns,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, Object: runtime.RawExtension{Raw: raw}}}
}

// 50 concurrent Pods for one Namespace that is not in the cache (it lacks the enforce label, so
// the cache never holds it) share one live GET, made as the ServiceAccount.
func TestConcurrentMissesShareOneLiveRead(t *testing.T) {
	mgr := env.Manager(t)
	ns := namespace(t, webhook.AllowPodsLabel)
	gate := &gatedReader{Reader: mgr.GetAPIReader(), release: make(chan struct{})}
	v := &webhook.Validator{Decoder: admission.NewDecoder(mgr.GetScheme()), Cache: mgr.GetCache(), Live: gate}
	misses, allowed := counter(t, "podpolicy_namespace_cache_misses_total"), counter(t, "podpolicy_decisions_total", "outcome", "allowed")
	const n = 50
	var wg sync.WaitGroup
	results := make(chan admission.Response, n)
	for range n {
		wg.Go(func() { results <- v.Handle(context.Background(), podRequest(t, ns)) })
	}
	// A miss is counted once it has joined the read in flight; the read is held until all have.
	testenv.Eventually(t, "50 misses waiting on the live read", func() error {
		if got := counter(t, "podpolicy_namespace_cache_misses_total") - misses; got != n {
			return fmt.Errorf("%v misses so far", got)
		}
		return nil
	})
	close(gate.release)
	wg.Wait()
	close(results)
	for r := range results {
		if !r.Allowed {
			t.Errorf("denied: %+v", r.Result)
		}
	}
	if got := gate.gets.Load(); got != 1 {
		t.Errorf("live GETs = %d, want 1 for %d concurrent misses", got, n)
	}
	if d := counter(t, "podpolicy_decisions_total", "outcome", "allowed") - allowed; d != n {
		t.Errorf("allowed decisions +%v, want +%d", d, n)
	}
}

// A Namespace that does not exist is a clear denial after one live read, not an error to retry.
func TestMissingNamespaceIsADenial(t *testing.T) {
	mgr := env.Manager(t)
	gate := &gatedReader{Reader: mgr.GetAPIReader(), release: make(chan struct{})}
	close(gate.release)
	v := &webhook.Validator{Decoder: admission.NewDecoder(mgr.GetScheme()), Cache: mgr.GetCache(), Live: gate}
	resp := v.Handle(context.Background(), podRequest(t, "ghost"))
	if resp.Allowed || resp.Result.Code != 403 || resp.Result.Message != `namespace "ghost" does not exist` {
		t.Errorf("response = %+v, want a denial: the namespace does not exist", resp.Result)
	}
	if got := gate.gets.Load(); got != 1 {
		t.Errorf("live GETs = %d, want 1", got)
	}
}

// A request naming no namespace (the API server never sends one; a hand-made AdmissionReview
// does) is a malformed request: a 400 counted as invalid, not a failed read counted as an error.
func TestNoNamespaceIsABadRequest(t *testing.T) {
	mgr := env.Manager(t)
	v := &webhook.Validator{Decoder: admission.NewDecoder(mgr.GetScheme()), Cache: mgr.GetCache(), Live: mgr.GetAPIReader()}
	invalid, errored := counter(t, "podpolicy_decisions_total", "outcome", "invalid"), counter(t, "podpolicy_decisions_total", "outcome", "error")
	resp := v.Handle(context.Background(), podRequest(t, ""))
	if resp.Allowed || resp.Result.Code != 400 || resp.Result.Message != "the request names no namespace; a Pod is namespaced" {
		t.Errorf("response = %+v, want a 400 naming the missing namespace", resp.Result)
	}
	if d := counter(t, "podpolicy_decisions_total", "outcome", "invalid") - invalid; d != 1 {
		t.Errorf("invalid decisions +%v, want +1", d)
	}
	if d := counter(t, "podpolicy_decisions_total", "outcome", "error") - errored; d != 0 {
		t.Errorf("error decisions +%v, want +0", d)
	}
}
