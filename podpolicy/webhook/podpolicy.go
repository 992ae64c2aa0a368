// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook admits Pods by their Namespace's labels, reading the Namespace from a
// per-replica informer cache: every replica serves, each with its own cache of the Namespaces the
// webhook can be asked about (those labelled patterns.kpatterns.dev/enforce=true). A miss — a
// Namespace labelled an instant before its first Pod, not yet in the cache — falls back to one
// live GET, and concurrent misses for the same Namespace share that GET.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/sync/singleflight"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kpatterns/kpatterns/shared/admit"
)

const (
	// Name is the pattern's name.
	Name = "podpolicy"
	// EnforceLabel=true on a Namespace sends its Pod creations to this webhook (namespaceSelector).
	EnforceLabel = "patterns.kpatterns.dev/enforce"
	// AllowPodsLabel=true on a governed Namespace allows Pods at all.
	AllowPodsLabel = "patterns.kpatterns.dev/allow-pods"
	// AllowPrivilegedLabel=true allows privileged containers.
	AllowPrivilegedLabel = "patterns.kpatterns.dev/allow-privileged"
	// AllowHostNamespacesLabel=true allows hostNetwork, hostPID and hostIPC.
	AllowHostNamespacesLabel = "patterns.kpatterns.dev/allow-host-namespaces"
	// ValidatePath is the handler's path, as in the marker below.
	ValidatePath = "/validate-v1-pod"
	// liveReadTimeout bounds the shared live GET of a miss, whichever request started it.
	liveReadTimeout = 3 * time.Second
)

// +kubebuilder:webhook:path=/validate-v1-pod,mutating=false,failurePolicy=fail,sideEffects=None,groups="",resources=pods,verbs=create,versions=v1,name=validate.podpolicy.patterns.kpatterns.dev,admissionReviewVersions=v1,timeoutSeconds=5,patch=`{"namespaceSelector":{"matchLabels":{"patterns.kpatterns.dev/enforce":"true"}}}`

// Namespaces are cached (list/watch) and, on a miss, read live (get); nothing else.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch

var podGVK = corev1.SchemeGroupVersion.WithKind("Pod")

// Metrics, on the manager's metrics endpoint.
var (
	cacheHits = prometheus.NewCounter(prometheus.CounterOpts{Name: "podpolicy_namespace_cache_hits_total",
		Help: "Admission requests whose Namespace was in the informer cache."})
	cacheMisses = prometheus.NewCounter(prometheus.CounterOpts{Name: "podpolicy_namespace_cache_misses_total",
		Help: "Admission requests whose Namespace was not in the informer cache."})
	liveReads = prometheus.NewCounter(prometheus.CounterOpts{Name: "podpolicy_namespace_live_reads_total",
		Help: "Live GETs of a Namespace after a miss (concurrent misses for one Namespace share one)."})
	decisions = prometheus.NewCounterVec(prometheus.CounterOpts{Name: "podpolicy_decisions_total",
		Help: "Admission decisions by outcome: allowed, denied, invalid (a malformed request, 400), error."}, []string{"outcome"})
)

func init() { metrics.Registry.MustRegister(cacheHits, cacheMisses, liveReads, decisions) }

// CacheOptions narrows the cache to what the webhook can be asked about: Namespaces labelled
// EnforceLabel=true, holding only their name, UID and labels. A read of anything else from the
// cache fails (ReaderFailOnMissingInformer) instead of quietly starting an informer on first use:
// the cache holds exactly what Setup registered, synced before the replica is ready.
func CacheOptions(o *cache.Options) {
	o.ReaderFailOnMissingInformer = true
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[&corev1.Namespace{}] = cache.ByObject{
		Label:     labels.SelectorFromSet(labels.Set{EnforceLabel: "true"}),
		Transform: StripNamespace,
	}
}

// StripNamespace keeps what the policy reads (and what the informer needs to track the object).
func StripNamespace(obj any) (any, error) {
	ns, ok := obj.(*corev1.Namespace)
	if !ok { // a tombstone, say: left as it is
		return obj, nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns.Name, UID: ns.UID, ResourceVersion: ns.ResourceVersion, Labels: ns.Labels}}, nil
}

// Setup registers the handler, reading Namespaces from the manager's cache and, on a miss, live
// from its API reader. The Namespace informer is created here, before the manager starts, so the
// manager's readiness check (informers synced) covers it: no replica answers from an empty cache.
func Setup(mgr ctrl.Manager) error {
	if _, err := mgr.GetCache().GetInformer(context.Background(), &corev1.Namespace{}); err != nil {
		return err
	}
	admit.Register(mgr, ValidatePath, &Validator{Decoder: admission.NewDecoder(mgr.GetScheme()),
		Cache: mgr.GetCache(), Live: mgr.GetAPIReader()})
	return nil
}

// Validator admits a Pod by its Namespace's labels: Pods at all only with AllowPodsLabel=true,
// privileged containers only with AllowPrivilegedLabel=true, hostNetwork/hostPID/hostIPC only with
// AllowHostNamespacesLabel=true. Every violation is named in one denial.
type Validator struct {
	Decoder admission.Decoder
	Cache   client.Reader // the informer cache: Namespaces labelled EnforceLabel=true
	Live    client.Reader // a live reader, for a miss
	misses  singleflight.Group
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	resp := v.handle(ctx, req)
	outcome := "allowed"
	switch {
	case resp.Result != nil && resp.Result.Code == http.StatusBadRequest:
		outcome = "invalid"
	case resp.Result != nil && resp.Result.Code >= 400 && resp.Result.Code != http.StatusForbidden:
		outcome = "error"
	case !resp.Allowed:
		outcome = "denied"
	}
	decisions.WithLabelValues(outcome).Inc()
	return resp
}

func (v *Validator) handle(ctx context.Context, req admission.Request) admission.Response {
	pod := &corev1.Pod{}
	if resp, ok := admit.Decode(v.Decoder, req.Kind, podGVK, req.Object, pod); !ok {
		return resp
	}
	if req.Namespace == "" { // the API server always names a Pod's namespace: a malformed request
		return admission.Errored(http.StatusBadRequest, errors.New("the request names no namespace; a Pod is namespaced"))
	}
	ns, err := v.namespace(ctx, req.Namespace)
	if apierrors.IsNotFound(err) {
		return admission.Denied(fmt.Sprintf("namespace %q does not exist", req.Namespace))
	}
	if err != nil { // transient: the API server answers with failurePolicy Fail, the creator retries
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading namespace %q: %w", req.Namespace, err))
	}
	if reasons := violations(ns, pod); len(reasons) > 0 {
		return admission.Denied(strings.Join(reasons, "; "))
	}
	return admission.Allowed("").WithWarnings(warnings(ns, pod)...)
}

// warnings name what an admitted Pod does that its Namespace allows but should be rare: a
// privileged container.
func warnings(ns *corev1.Namespace, pod *corev1.Pod) []string {
	var out []string
	for _, c := range privileged(pod) {
		out = append(out, fmt.Sprintf("container %s is privileged, as namespace %s allows (label %s=true)", c, ns.Name, AllowPrivilegedLabel))
	}
	return out
}

// privileged names the Pod's privileged containers, init containers first.
func privileged(pod *corev1.Pod) []string {
	var out []string
	for _, c := range slices.Concat(pod.Spec.InitContainers, pod.Spec.Containers) {
		if c.SecurityContext != nil && c.SecurityContext.Privileged != nil && *c.SecurityContext.Privileged {
			out = append(out, c.Name)
		}
	}
	return out
}

// namespace reads name from the cache; on a miss, one live GET shared by every concurrent miss for
// the same name. The GET has its own deadline, so one caller's cancelled request does not fail the
// others waiting on it; each caller still stops waiting when its own request ends.
func (v *Validator) namespace(ctx context.Context, name string) (*corev1.Namespace, error) {
	ns := &corev1.Namespace{}
	err := v.Cache.Get(ctx, client.ObjectKey{Name: name}, ns)
	if err == nil {
		cacheHits.Inc()
		return ns, nil
	}
	if !apierrors.IsNotFound(err) {
		return nil, err
	}
	read := v.misses.DoChan(name, func() (any, error) {
		liveReads.Inc()
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), liveReadTimeout)
		defer cancel()
		live := &corev1.Namespace{}
		return live, v.Live.Get(ctx, client.ObjectKey{Name: name}, live)
	})
	cacheMisses.Inc() // after DoChan: a counted miss has joined (or started) the read in flight
	select {
	case r := <-read:
		if r.Err != nil {
			return nil, r.Err
		}
		return r.Val.(*corev1.Namespace), nil // shared by the callers: read-only
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// violations lists what the Namespace's labels do not allow in the Pod.
func violations(ns *corev1.Namespace, pod *corev1.Pod) []string {
	allows := func(label string) bool { return ns.Labels[label] == "true" }
	if !allows(AllowPodsLabel) {
		return []string{fmt.Sprintf("namespace %s does not allow Pods (label %s=true)", ns.Name, AllowPodsLabel)}
	}
	var out []string
	if !allows(AllowPrivilegedLabel) {
		for _, c := range privileged(pod) {
			out = append(out, fmt.Sprintf("container %s is privileged; namespace %s does not allow it (label %s=true)", c, ns.Name, AllowPrivilegedLabel))
		}
	}
	if !allows(AllowHostNamespacesLabel) {
		var host []string
		for field, on := range map[string]bool{"hostNetwork": pod.Spec.HostNetwork, "hostPID": pod.Spec.HostPID, "hostIPC": pod.Spec.HostIPC} {
			if on {
				host = append(host, field)
			}
		}
		if len(host) > 0 {
			slices.Sort(host)
			out = append(out, fmt.Sprintf("%s: namespace %s does not allow host namespaces (label %s=true)", strings.Join(host, ", "), ns.Name, AllowHostNamespacesLabel))
		}
	}
	return out
}
