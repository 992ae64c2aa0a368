// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	monitoringv1 "github.com/prometheus-operator/prometheus-operator/pkg/apis/monitoring/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/yaml"

	"github.com/kpatterns/kpatterns/shared/app"
)

// TestSecureMetrics: run's default /metrics is HTTPS and asks the API server who the caller is
// (TokenReview) and whether it may get /metrics (SubjectAccessReview), with the pattern's own
// generated RBAC: no token or a wrong one is refused (401, and the wrong one logged once, not
// per request), a ServiceAccount without the reader role is forbidden, one bound to the generated
// kpatterns-<pattern>-metrics-reader ClusterRole reads the metrics.
func TestSecureMetrics(t *testing.T) {
	if kindRun {
		t.Skip("scrapes a local process; on kind the metrics Service is cluster-internal")
	}
	ns := envconf.RandomName("metrics", 12)
	addr := "127.0.0.1:" + freePort(t)
	f := withPattern(features.New("secure metrics"), "mirror", ns, "--metrics-bind-address", addr, "--watch-namespaces", ns).
		Assess("only an authorized ServiceAccount's token reads /metrics", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			for _, sa := range []string{"scraper", "stranger"} {
				if err := c.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa, Namespace: ns}}); err != nil {
					t.Fatal(err)
				}
			}
			binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-scraper"},
				Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "scraper", Namespace: ns}},
				RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: app.MetricsReaderRole("mirror")}}
			if err := c.Create(ctx, binding); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), binding) })
			token := func(sa string) string { return serviceAccountToken(ctx, t, cfg, ns, sa) }
			// The certificate is self-signed (generated in memory by controller-runtime): what
			// is tested here is who may read, not the serving certificate's chain.
			scrape := func(bearer string) (int, string) { return getMetrics(ctx, t, "https://"+addr+"/metrics", bearer, true) }
			// The metrics server is a runnable of its own, listening once it has generated its
			// key pair: /readyz (the probe server) can answer first.
			waitFor(t, "the metrics listener", func(ctx context.Context) (bool, error) {
				conn, err := net.Dial("tcp", addr)
				if err != nil {
					return false, nil
				}
				return true, conn.Close()
			})
			if code, _ := scrape(""); code != http.StatusUnauthorized {
				t.Errorf("no token: HTTP %d, want 401", code)
			}
			// A wrong token is a 401 like none, and a scraper sending it does not fill the log.
			for range 5 {
				if code, _ := scrape("not-a-token"); code != http.StatusUnauthorized {
					t.Errorf("a wrong token: HTTP %d, want 401", code)
				}
			}
			if b, err := os.ReadFile(filepath.Join(logs, "mirror.log")); err != nil {
				t.Error(err)
			} else if n := strings.Count(string(b), "not authenticated"); n != 1 {
				t.Errorf("5 requests with a wrong token logged %d lines about it, want 1:\n%s", n, b)
			}
			if code, _ := scrape(token("stranger")); code != http.StatusForbidden {
				t.Errorf("a ServiceAccount without the reader role: HTTP %d, want 403", code)
			}
			code, body := scrape(token("scraper"))
			if code != http.StatusOK || !strings.Contains(body, "controller_runtime_reconcile_total") {
				t.Errorf("the reader's token: HTTP %d, want 200 with controller metrics; body starts %.200q", code, body)
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}

// serviceAccountToken is a ten-minute token of a ServiceAccount, as the kubelet projects one.
func serviceAccountToken(ctx context.Context, t *testing.T, cfg *envconf.Config, ns, sa string) string {
	t.Helper()
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
		&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return tr.Status.Token
}

// getMetrics GETs url with a bearer token (none if empty): the status and the body.
func getMetrics(ctx context.Context, t *testing.T, url, bearer string, insecureSkipVerify bool) (int, string) {
	t.Helper()
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: insecureSkipVerify}}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	if bearer != "" {
		req.Header.Set("Authorization", "Bearer "+bearer)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = resp.Body.Close() }()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// scrapedThroughServiceMonitor scrapes a deployed pattern as Prometheus does with the ServiceMonitor
// `install --service-monitor` rendered (its schema: prometheus-operator's CRD, generated from its
// API module): the Services its selector picks, their ready endpoints on the endpoint's port, its
// scheme, path and TLS settings, and the token of a ServiceAccount ("prometheus") bound to the
// pattern's metrics-reader ClusterRole. Every replica answers, the leader with its controllers'
// metrics; without a token, 401.
func scrapedThroughServiceMonitor(ctx context.Context, t *testing.T, cfg *envconf.Config, p, ns string) {
	t.Helper()
	c := clientFor(t, cfg)
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind))
	if err := c.Get(ctx, client.ObjectKey{Namespace: deployedNamespace, Name: "kpatterns-" + p}, u); err != nil {
		t.Fatalf("the ServiceMonitor install --service-monitor rendered: %v", err)
	}
	sm := &monitoringv1.ServiceMonitor{}
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, sm); err != nil {
		t.Fatal(err)
	}
	selector, err := metav1.LabelSelectorAsSelector(&sm.Spec.Selector)
	if err != nil {
		t.Fatal(err)
	}
	services := &corev1.ServiceList{}
	if err := c.List(ctx, services, client.InNamespace(sm.Namespace), client.MatchingLabelsSelector{Selector: selector}); err != nil {
		t.Fatal(err)
	}
	if len(services.Items) != 1 || len(sm.Spec.Endpoints) != 1 {
		t.Fatalf("the ServiceMonitor selects %d Services with %d endpoints, want the metrics Service and one", len(services.Items), len(sm.Spec.Endpoints))
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: ns + "-prometheus"},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: "prometheus", Namespace: ns}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: app.MetricsReaderRole(p)}}
	for _, o := range []client.Object{&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "prometheus", Namespace: ns}}, binding} {
		if err := c.Create(ctx, o); client.IgnoreAlreadyExists(err) != nil {
			t.Fatal(err)
		}
	}
	t.Cleanup(func() { _ = c.Delete(context.Background(), binding) })
	token := serviceAccountToken(ctx, t, cfg, ns, "prometheus")
	ep := sm.Spec.Endpoints[0]
	insecure := ep.TLSConfig != nil && ptr.Deref(ep.TLSConfig.InsecureSkipVerify, false)
	d := &appsv1.Deployment{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: deployedNamespace, Name: p}, d); err != nil {
		t.Fatal(err)
	}
	var targets []string
	waitFor(t, "the metrics Service's ready endpoints, one per replica", func(ctx context.Context) (bool, error) {
		slices := &discoveryv1.EndpointSliceList{}
		if err := c.List(ctx, slices, client.InNamespace(sm.Namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: services.Items[0].Name}); err != nil {
			return false, err
		}
		targets = targets[:0]
		for _, s := range slices.Items {
			for _, port := range s.Ports {
				if ptr.Deref(port.Name, "") != ep.Port {
					continue
				}
				for _, e := range s.Endpoints {
					if ptr.Deref(e.Conditions.Ready, false) {
						targets = append(targets, net.JoinHostPort(e.Addresses[0], strconv.Itoa(int(ptr.Deref(port.Port, 0)))))
					}
				}
			}
		}
		return len(targets) == int(*d.Spec.Replicas), nil
	})
	leaders := 0 // a standby has no controller metrics until it leads (they start with the controller)
	for _, target := range targets {
		url := strings.ToLower(ep.Scheme.String()) + "://" + target + ep.Path
		if code, _ := getMetrics(ctx, t, url, "", insecure); code != http.StatusUnauthorized {
			t.Errorf("%s without a token: HTTP %d, want 401", url, code)
		}
		code, body := getMetrics(ctx, t, url, token, insecure)
		if code != http.StatusOK || !strings.Contains(body, "go_goroutines") {
			t.Errorf("%s with the token of a ServiceAccount bound to %s: HTTP %d, want 200 with metrics; body starts %.200q",
				url, app.MetricsReaderRole(p), code, body)
		}
		if strings.Contains(body, "controller_runtime_reconcile_total") {
			leaders++
		}
	}
	if leaders != 1 {
		t.Errorf("%d of %d replicas serve controller metrics, want the leader's", leaders, len(targets))
	}
	t.Logf("%s scraped through its ServiceMonitor as %s: %d targets %v, %d with controller metrics", p, app.MetricsReaderRole(p), len(targets), targets, leaders)
}

// installServiceMonitorCRD installs prometheus-operator's ServiceMonitor CRD, generated from its
// API module (go tool task generate:servicemonitor-crd), as a cluster with prometheus-operator
// has it.
func installServiceMonitorCRD(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(root, "e2e", "testdata", "monitoring.coreos.com_servicemonitors.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(b, crd); err != nil {
		t.Fatal(err)
	}
	installCRD(ctx, t, cfg, crd, monitoringv1.SchemeGroupVersion.WithKind(monitoringv1.ServiceMonitorsKind+"List"))
}
