// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	"k8s.io/client-go/discovery"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/klog/v2"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// NewScheme returns a scheme with client-go's types and the given API groups' (a pattern's
// AddToScheme, say): the one scheme constructor of managers, tests, the e2e suite and the demo.
func NewScheme(addToScheme ...func(*runtime.Scheme) error) (*runtime.Scheme, error) {
	s := runtime.NewScheme()
	for _, add := range append([]func(*runtime.Scheme) error{clientgoscheme.AddToScheme}, addToScheme...) {
		if add == nil {
			continue
		}
		if err := add(s); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// scheme knows what `manifests` and `install` write: client-go's types and CRDs.
var scheme = func() *runtime.Scheme {
	s, err := NewScheme(apiextensionsv1.AddToScheme)
	utilruntime.Must(err) // constant input
	return s
}()

// RunOptions are the flags of `run`.
type RunOptions struct {
	Options
	AsServiceAccount bool
	LeaderElect      bool
	// LeaseDuration, RenewDeadline and RetryPeriod time leader election (0: controller-runtime's
	// 15 s, 10 s, 2 s). A standby takes over at most LeaseDuration after a leader dies without
	// releasing the Lease; a leader shut down cleanly releases it at once.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Workers is each controller's MaxConcurrentReconciles (0: controller-runtime's 1). The
	// queue never hands one object to two workers at once.
	Workers     int
	ProbeAddr   string
	MetricsAddr string
	// PprofAddr serves net/http/pprof (controller-runtime's PprofBindAddress; "0" or empty: off).
	// Plain HTTP without authentication: bind it to a loopback address.
	PprofAddr string
	// MetricsSecure serves /metrics over HTTPS to callers the API server authenticates and
	// authorizes (get on the /metrics non-resource URL); false is plain HTTP, for local runs.
	MetricsSecure bool
	WebhookHost   string
	WebhookPort   int
	// EnableHTTP2 lets the webhook and metrics servers speak HTTP/2 (off: HTTP/1.1 only).
	EnableHTTP2 bool
	// KubeAPIQPS bounds the requests per second to the API server on this side (0: no bound, the
	// API server's Priority and Fairness decides): a first start over thousands of objects that
	// each need a write spreads them out.
	KubeAPIQPS float64
	CertDir    string
	Zap        zap.Options
}

// ServesWebhooks reports whether run serves the pattern's admission webhooks: not with
// --admission=policy, where admission policies enforce its rules and no webhook server starts.
func (o RunOptions) ServesWebhooks() bool { return o.Admission != AdmissionPolicy }

// ServiceAccountUser is the user name a pattern's ServiceAccount authenticates as.
func ServiceAccountUser(namespace, pattern string) string {
	return "system:serviceaccount:" + namespace + ":" + pattern
}

// Run is `run`: it sets up logging, loads the kubeconfig (impersonating the ServiceAccount with
// --as-service-account), fails fast in one line when the API server does not answer or a CRD of
// the pattern is missing, and hands over to the pattern's run.
func Run(ctx context.Context, p Pattern, o RunOptions, run RunFunc) error {
	log := zap.New(zap.UseFlagOptions(&o.Zap))
	ctrl.SetLogger(log)
	klog.SetLogger(log)

	cfg, err := restConfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	limitQPS(cfg, o.KubeAPIQPS)
	if o.AsServiceAccount {
		cfg = Impersonate(cfg, o.Namespace, p.Name)
	}
	if err := ping(ctx, cfg); err != nil {
		return err
	}
	if err := CheckCRDs(cfg, p); err != nil {
		return err
	}
	log.Info("starting", "pattern", p.Name, "namespace", o.Namespace, "watchNamespaces", o.WatchNamespaces,
		"leaderElection", o.LeaderElect && !p.AdmissionOnly, "user", cfg.Impersonate.UserName, "goMemoryLimit", SetMemoryLimit())
	return run(ctx, cfg, o)
}

// MemoryLimitEnv carries the container's memory limit into run (the Deployment sets it from the
// downward API's limits.memory).
const MemoryLimitEnv = "KPATTERNS_MEMORY_LIMIT"

// SetMemoryLimit sets the Go runtime's soft memory limit to 90 % of $KPATTERNS_MEMORY_LIMIT (bytes),
// so the collector works harder as the heap nears the container's limit instead of the kernel
// killing the process; the rest is headroom for what the Go heap does not count (stacks, the
// runtime's own). GOMEMLIMIT, when set, is the runtime's and wins. It returns the limit in force
// ("" when none was set).
func SetMemoryLimit() string {
	n, err := strconv.ParseInt(os.Getenv(MemoryLimitEnv), 10, 64)
	if os.Getenv("GOMEMLIMIT") != "" || err != nil || n <= 0 {
		return ""
	}
	limit := n / 10 * 9
	debug.SetMemoryLimit(limit)
	return strconv.FormatInt(limit, 10)
}

// Impersonate returns a copy of cfg that acts as the pattern's ServiceAccount.
func Impersonate(cfg *rest.Config, namespace, pattern string) *rest.Config {
	cfg = rest.CopyConfig(cfg)
	cfg.Impersonate = rest.ImpersonationConfig{
		UserName: ServiceAccountUser(namespace, pattern),
		Groups:   []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"},
	}
	return cfg
}

// ManagerOptions are the manager options the flags of `run` select: the cache's defaults
// (managedFields stripped, --watch-namespaces), leader election through the Lease
// kpatterns-<name> (not for an admission-only pattern), the probe and metrics addresses, the
// webhook server when the pattern has webhooks, and the reconcile workers. The pattern adds its
// scheme and its cache scope.
func ManagerOptions(p Pattern, o RunOptions) (ctrl.Options, error) {
	cacheOpts := cache.Options{DefaultTransform: cache.TransformStripManagedFields()}
	if len(o.WatchNamespaces) > 0 {
		cacheOpts.DefaultNamespaces = map[string]cache.Config{}
		for _, ns := range o.WatchNamespaces {
			cacheOpts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	webhooks, err := HasWebhooks(p)
	if err != nil {
		return ctrl.Options{}, err
	}
	if o.Admission, err = admissionMode(p, o.Admission); err != nil {
		return ctrl.Options{}, err
	}
	if o.Admission == AdmissionPolicy { // the pattern's main registers no webhook (ServesWebhooks)
		webhooks = false
	}
	var server webhook.Server
	if webhooks { // with --certs=self, AddCertRotator gives it its certificate
		server = WebhookServer(o.WebhookHost, o.WebhookPort, o.CertDir, o.EnableHTTP2)
	}
	if err := o.checkLeaseTiming(); err != nil {
		return ctrl.Options{}, err
	}
	if o.Workers < 0 {
		return ctrl.Options{}, fmt.Errorf("--max-concurrent-reconciles %d: want 1 or more", o.Workers)
	}
	return ctrl.Options{
		Cache:                         cacheOpts,
		WebhookServer:                 server,
		LeaderElection:                o.LeaderElect && !p.AdmissionOnly,
		LeaderElectionID:              LeaseName(p.Name),
		LeaderElectionNamespace:       o.Namespace,
		LeaderElectionReleaseOnCancel: true,
		LeaseDuration:                 nonZero(o.LeaseDuration),
		RenewDeadline:                 nonZero(o.RenewDeadline),
		RetryPeriod:                   nonZero(o.RetryPeriod),
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		Metrics:                       metricsOptions(o),
		Controller:                    config.Controller{MaxConcurrentReconciles: o.Workers},
	}, nil
}

// LeaseName is the leader-election Lease of a pattern.
func LeaseName(pattern string) string { return "kpatterns-" + pattern }

// AddProbes adds /healthz (the process answers) and /readyz: ready once the informers have synced
// — before that a controller would act on a partial view — and, when opts has a webhook server,
// while it serves a certificate that is valid now, since the API server may call it at once and
// only an endpoint that is ready gets its calls.
func AddProbes(mgr manager.Manager, opts ctrl.Options) error {
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("informers", synced("informer caches", mgr.GetCache())); err != nil {
		return err
	}
	if s, ok := opts.WebhookServer.(*webhook.DefaultServer); ok {
		port := s.Options.Port
		if port == 0 {
			port = webhook.DefaultPort
		}
		return mgr.AddReadyzCheck("webhooks", ServesValidCertificate(s.Options.Host, port))
	}
	if opts.WebhookServer != nil {
		return mgr.AddReadyzCheck("webhooks", mgr.GetWebhookServer().StartedChecker())
	}
	return nil
}

// ServesValidCertificate is a readiness check of a webhook server: it answers TLS on host:port
// with a certificate that is valid now. A certificate that expired — a rotation that never
// arrived — takes the Pod out of its Service's endpoints instead of failing every call.
func ServesValidCertificate(host string, port int) healthz.Checker {
	addr := net.JoinHostPort(host, strconv.Itoa(port))
	return func(*http.Request) error {
		// Who signed the certificate is the API server's to check (the caBundle); this reads what is served.
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate's validity
		if err != nil {
			return fmt.Errorf("webhook server on %s: %w", addr, err)
		}
		defer func() { _ = conn.Close() }()
		leaf := conn.ConnectionState().PeerCertificates[0]
		if now := time.Now(); now.Before(leaf.NotBefore) || now.After(leaf.NotAfter) {
			return fmt.Errorf("the webhook server's certificate is valid from %s to %s, not now", leaf.NotBefore.Format(time.RFC3339), leaf.NotAfter.Format(time.RFC3339))
		}
		return nil
	}
}

// synced is a readiness check that passes once c has synced.
func synced(what string, c cache.Cache) healthz.Checker {
	return func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New(what + " have not synced")
		}
		return nil
	}
}

// metricsOptions serves /metrics as kubebuilder scaffolds it: HTTPS (a self-signed certificate,
// generated in memory) with authentication and authorization delegated to the API server, unless
// plain HTTP was asked for.
func metricsOptions(o RunOptions) metricsserver.Options {
	m := metricsserver.Options{BindAddress: o.MetricsAddr, TLSOpts: tlsOptions(o.EnableHTTP2)}
	if o.MetricsSecure {
		m.SecureServing = true
		m.FilterProvider = metricsAuth
	}
	return m
}

// CheckCRDs fails fast, in one line, when a CRD the pattern needs is not installed (the
// manager would otherwise retry its informers until the cache sync timeout).
func CheckCRDs(cfg *rest.Config, p Pattern) error {
	crds, err := readCRDs(p.Config)
	if err != nil || len(crds) == 0 {
		return err
	}
	dc, err := discovery.NewDiscoveryClientForConfig(cfg)
	if err != nil {
		return err
	}
	for _, obj := range crds {
		crd := obj.(*apiextensionsv1.CustomResourceDefinition)
		for _, v := range crd.Spec.Versions {
			if !v.Served {
				continue
			}
			list, err := dc.ServerResourcesForGroupVersion(crd.Spec.Group + "/" + v.Name)
			if err != nil && !apierrors.IsNotFound(err) {
				return err
			}
			if list == nil || !slices.ContainsFunc(list.APIResources, func(r metav1.APIResource) bool { return r.Name == crd.Spec.Names.Plural }) {
				return fmt.Errorf("%s/%s %s is not installed: run '%s install' first", crd.Spec.Group, v.Name, crd.Spec.Names.Kind, p.Name)
			}
		}
	}
	return nil
}

// restConfig loads an explicit kubeconfig, else what controller-runtime finds ($KUBECONFIG,
// in-cluster, ~/.kube/config). Either way client-go's client-side rate limiter is off unless the
// kubeconfig sets one (controller-runtime's rule: the API server's Priority and Fairness limits
// instead); without that, an explicit --kubeconfig got client-go's default of 5 requests/s, and a
// webhook's live reads queued behind it.
func restConfig(path string) (*rest.Config, error) {
	if path != "" {
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %w", path, err)
		}
		if cfg.QPS == 0 {
			cfg.QPS = -1
		}
		return cfg, nil
	}
	cfg, err := ctrl.GetConfig()
	if err != nil {
		return nil, fmt.Errorf("no kubeconfig: %w (set KUBECONFIG or --kubeconfig)", err)
	}
	return cfg, nil
}

// limitQPS sets client-go's client-side rate limit to qps (burst: one second's worth), if qps > 0.
func limitQPS(cfg *rest.Config, qps float64) {
	if qps > 0 {
		cfg.QPS, cfg.Burst = float32(qps), max(1, int(qps))
	}
}

// ping fails fast, in one line, when the API server does not answer.
func ping(ctx context.Context, cfg *rest.Config) error {
	c := rest.CopyConfig(cfg)
	c.Timeout = 10 * time.Second
	dc, err := discovery.NewDiscoveryClientForConfig(c)
	if err != nil {
		return err
	}
	if _, err := dc.ServerVersion(); err != nil {
		return fmt.Errorf("cannot reach the API server at %s: %w", cfg.Host, err)
	}
	return nil
}

// CacheByObject sets how the informer of obj's kind is scoped (label selector, transform):
// the building block of a pattern's Cache function.
func CacheByObject(o *cache.Options, obj client.Object, by cache.ByObject) {
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	o.ByObject[obj] = by
}

// checkLeaseTiming rejects leader-election timings client-go would refuse later, or that would
// make a leader lose its Lease while healthy: retry < renew deadline < lease duration.
func (o RunOptions) checkLeaseTiming() error {
	lease, renew, retry := o.LeaseDuration, o.RenewDeadline, o.RetryPeriod
	if lease == 0 && renew == 0 && retry == 0 {
		return nil
	}
	if lease <= 0 || renew <= 0 || retry <= 0 || retry >= renew || renew >= lease {
		return usageError{fmt.Errorf("leader election needs 0 < retry period (%s) < renew deadline (%s) < lease duration (%s)", retry, renew, lease)}
	}
	return nil
}

func nonZero(d time.Duration) *time.Duration {
	if d == 0 {
		return nil
	}
	return &d
}
