// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync/atomic"

	"github.com/open-policy-agent/cert-controller/pkg/rotator"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/certwatcher"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Where a deployed webhook pattern's serving certificate comes from (`--certs`). Every way ends in
// the Secret WebhookSecretName(pattern), which the Pods mount at CertDir and controller-runtime's
// certificate watcher serves from, rotated without a restart.
const (
	// CertsSelf: the pattern keeps its own CA and serving certificate in the Secret and injects the
	// CA into its webhook configurations, renewing both before they expire (cert-controller, as
	// Gatekeeper does). Nothing to install first; the default.
	CertsSelf = "self"
	// CertsCertManager: cert-manager issues the certificate (a self-signed Issuer and a
	// Certificate are rendered) and its CA injector fills the caBundle.
	CertsCertManager = "cert-manager"
	// CertsManual: you create the Secret (`certs` writes one) and pass its CA with --ca-file.
	CertsManual = "manual"
)

// certsMode resolves --certs for a Deployment that serves webhooks: self unless --ca-file says
// manual.
func certsMode(o Options) (string, error) {
	switch o.Certs {
	case "":
		if o.CAFile != "" {
			return CertsManual, nil
		}
		return CertsSelf, nil
	case CertsSelf, CertsCertManager:
		if o.CAFile != "" {
			return "", fmt.Errorf("--ca-file goes with --certs=%s or --webhook-url: with --certs=%s the caBundle is injected", CertsManual, o.Certs)
		}
		return o.Certs, nil
	case CertsManual:
		if o.CAFile == "" {
			return "", fmt.Errorf("--certs=%s needs --ca-file, the CA that signed the Secret's certificate", CertsManual)
		}
		return o.Certs, nil
	default:
		return "", fmt.Errorf("--certs %q: want %s, %s or %s", o.Certs, CertsSelf, CertsCertManager, CertsManual)
	}
}

// certObjects are what a mode needs besides the Secret's mount: for self, the Secret (empty until
// the pattern fills it) and the RBAC cert-controller needs — get, update, list and watch of that
// Secret by name (its cache lists and watches with a field selector on the name: see
// AddCertRotator), so the pattern can read no other Secret; get and update of the pattern's
// webhook configurations by name, and list and watch of them, which cert-controller's cache does
// without a name; for cert-manager, an Issuer and a Certificate.
func certObjects(p Pattern, o Options, mode string, labels map[string]string, resources []string) []client.Object {
	name := "kpatterns-" + p.Name
	meta := func(ns, n string) metav1.ObjectMeta { return metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels} }
	host := ServiceHost(p.Name, o.Namespace)
	switch mode {
	case CertsSelf:
		subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.Name, Namespace: o.Namespace}}
		certs := name + "-certs"
		admission := "admissionregistration.k8s.io"
		return []client.Object{
			&corev1.Secret{ObjectMeta: meta(o.Namespace, WebhookSecretName(p.Name))},
			&rbacv1.Role{ObjectMeta: meta(o.Namespace, certs), Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{WebhookSecretName(p.Name)},
					Verbs: []string{"get", "list", "watch", "update"}},
			}},
			&rbacv1.RoleBinding{ObjectMeta: meta(o.Namespace, certs), Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: certs}},
			&rbacv1.ClusterRole{ObjectMeta: meta("", certs), Rules: []rbacv1.PolicyRule{
				{APIGroups: []string{admission}, Resources: resources, ResourceNames: []string{name}, Verbs: []string{"get", "update"}},
				{APIGroups: []string{admission}, Resources: resources, Verbs: []string{"list", "watch"}},
			}},
			&rbacv1.ClusterRoleBinding{ObjectMeta: meta("", certs), Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: certs}},
		}
	case CertsCertManager:
		object := func(kind, n string, spec map[string]any) *unstructured.Unstructured {
			u := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "cert-manager.io/v1", "kind": kind, "spec": spec}}
			u.SetName(n)
			u.SetNamespace(o.Namespace)
			u.SetLabels(labels)
			return u
		}
		return []client.Object{
			object("Issuer", name+"-selfsigned", map[string]any{"selfSigned": map[string]any{}}),
			object("Certificate", name+"-serving", map[string]any{
				"secretName": WebhookSecretName(p.Name),
				"dnsNames":   []any{host, host + ".cluster.local"},
				"issuerRef":  map[string]any{"name": name + "-selfsigned", "kind": "Issuer"},
			}),
		}
	}
	return nil
}

// certManagerCertificate is the Certificate whose CA cert-manager's injector puts in the caBundle.
func certManagerCertificate(p Pattern, namespace string) string {
	return namespace + "/kpatterns-" + p.Name + "-serving"
}

// servingCert is the webhook server's certificate with --certs=self: the server starts with the
// manager and its GetCertificate (a TLS option, controller-runtime's way to take the certificate
// over) refuses handshakes until cert-controller has written the certificate and injected its CA
// (ready); from then on it serves what controller-runtime's certificate watcher reads from the
// directory, rotations included. The readiness check (AddProbes: ServesValidCertificate) fails
// until then, so no call is routed to the Pod before it can answer it.
type servingCert struct {
	ready   chan struct{}
	dir     string
	watcher atomic.Pointer[certwatcher.CertWatcher]
}

func (s *servingCert) GetCertificate(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	w := s.watcher.Load()
	if w == nil {
		return nil, errors.New("the serving certificate is not issued yet")
	}
	return w.GetCertificate(hello)
}

// Start waits for the certificate, then watches its files until ctx ends.
func (s *servingCert) Start(ctx context.Context) error {
	select {
	case <-s.ready:
	case <-ctx.Done():
		return nil
	}
	w, err := certwatcher.New(filepath.Join(s.dir, corev1.TLSCertKey), filepath.Join(s.dir, corev1.TLSPrivateKeyKey))
	if err != nil {
		return err
	}
	s.watcher.Store(w)
	return w.Start(ctx)
}

// NeedLeaderElection: every replica serves.
func (s *servingCert) NeedLeaderElection() bool { return false }

// AddCertRotator adds cert-controller's rotator to mgr when `run --certs=self` (the Deployment
// rendered with --certs=self passes it): it creates the CA and serving certificate in the Secret
// WebhookSecretName(pattern) if they are missing or due, injects the CA into the pattern's webhook
// configurations, and lets the webhook server start once both are in place. Every replica runs it
// (no leader election), as Gatekeeper does: the Secret's resourceVersion settles a race. Without
// --certs=self it does nothing: the certificate is files in --cert-dir.
func AddCertRotator(mgr manager.Manager, p Pattern, o RunOptions) error {
	if o.Certs == "" {
		return nil
	}
	if o.Certs != CertsSelf {
		return fmt.Errorf("run --certs %q: want %s (or nothing: files in --cert-dir)", o.Certs, CertsSelf)
	}
	server, ok := mgr.GetWebhookServer().(*webhook.DefaultServer)
	if !ok {
		return fmt.Errorf("run --certs=self: the manager's webhook server is a %T, not the one ManagerOptions made", mgr.GetWebhookServer())
	}
	cert := &servingCert{ready: make(chan struct{}), dir: o.CertDir}
	server.Options.TLSOpts = append(server.Options.TLSOpts, func(c *tls.Config) { c.GetCertificate = cert.GetCertificate })
	if err := mgr.Add(cert); err != nil {
		return err
	}
	mutating, validating, err := webhookConfigs(p.Config)
	if err != nil {
		return err
	}
	var hooks []rotator.WebhookInfo
	if len(mutating) > 0 {
		hooks = append(hooks, rotator.WebhookInfo{Name: "kpatterns-" + p.Name, Type: rotator.Mutating})
	}
	if len(validating) > 0 {
		hooks = append(hooks, rotator.WebhookInfo{Name: "kpatterns-" + p.Name, Type: rotator.Validating})
	}
	host := ServiceHost(p.Name, o.Namespace)
	secret := types.NamespacedName{Namespace: o.Namespace, Name: WebhookSecretName(p.Name)}
	return rotator.AddRotator(secretScoped{Manager: mgr, cfg: scopeSecretLists(mgr.GetConfig(), secret)}, &rotator.CertRotator{
		SecretKey:      secret,
		CertDir:        o.CertDir,
		CAName:         "kpatterns-" + p.Name + "-ca",
		CAOrganization: "kpatterns",
		DNSName:        host,
		ExtraDNSNames:  []string{host + ".cluster.local", p.Name + "." + o.Namespace},
		IsReady:        cert.ready,
		Webhooks:       hooks,
		FieldOwner:     "kpatterns-" + p.Name + "-certs",
		ControllerName: "kpatterns-" + p.Name + "-certs",
	})
}

// secretScoped is the manager as cert-controller sees it: the same manager, but a rest.Config
// whose list and watch requests for the operator namespace's Secrets name the pattern's own
// Secret in a field selector. cert-controller (v0.16) builds its cache from mgr.GetConfig() with
// no per-kind options, and would otherwise list every Secret of the namespace; with the selector,
// RBAC's resourceNames authorizes its list and watch, and the pattern can read no other Secret.
type secretScoped struct {
	manager.Manager
	cfg *rest.Config
}

func (m secretScoped) GetConfig() *rest.Config { return m.cfg }

// scopeSecretLists returns a copy of cfg whose collection GETs (list, watch) of key's namespace's
// Secrets carry fieldSelector=metadata.name=<key.Name>, unless they have a field selector.
func scopeSecretLists(cfg *rest.Config, key types.NamespacedName) *rest.Config {
	c := rest.CopyConfig(cfg)
	selector := fields.OneTermEqualSelector(metav1.ObjectNameField, key.Name).String()
	path := "/api/v1/namespaces/" + key.Namespace + "/secrets"
	c.Wrap(func(next http.RoundTripper) http.RoundTripper {
		return roundTripper(func(r *http.Request) (*http.Response, error) {
			if r.Method == http.MethodGet && r.URL.Path == path && !r.URL.Query().Has("fieldSelector") {
				r = r.Clone(r.Context())
				q := r.URL.Query()
				q.Set("fieldSelector", selector)
				r.URL.RawQuery = q.Encode()
			}
			return next.RoundTrip(r)
		})
	})
	return c
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }
