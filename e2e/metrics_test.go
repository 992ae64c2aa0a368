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
	"strings"
	"testing"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

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
			cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
			if err != nil {
				t.Fatal(err)
			}
			token := func(sa string) string {
				tr, err := cs.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa,
					&authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)}}, metav1.CreateOptions{})
				if err != nil {
					t.Fatal(err)
				}
				return tr.Status.Token
			}
			// The certificate is self-signed (generated in memory by controller-runtime): what
			// is tested here is who may read, not the serving certificate's chain.
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
			scrape := func(bearer string) (int, string) {
				req, err := http.NewRequestWithContext(ctx, http.MethodGet, "https://"+addr+"/metrics", nil)
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
