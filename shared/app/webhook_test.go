// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// What controller-gen writes for a +kubebuilder:webhook marker pair.
const webhookYAML = `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions:
  - v1
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /mutate-apps-v1-deployment
  failurePolicy: Fail
  name: mutate.gadget.example.com
  rules:
  - apiGroups: [apps]
    apiVersions: [v1]
    operations: [CREATE, UPDATE]
    resources: [deployments]
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions:
  - v1
  clientConfig:
    service:
      name: webhook-service
      namespace: system
      path: /validate-apps-v1-deployment
  failurePolicy: Fail
  name: validate.gadget.example.com
  rules:
  - apiGroups: [apps]
    apiVersions: [v1]
    operations: [CREATE, UPDATE, DELETE]
    resources: [deployments, deployments/scale]
  sideEffects: None
  timeoutSeconds: 3
`

func admissionPattern() app.Pattern {
	return app.Pattern{Name: "gadget", AdmissionOnly: true, Config: fstest.MapFS{
		"rbac/role.yaml":         {Data: []byte(roleYAML)},
		"webhook/manifests.yaml": {Data: []byte(webhookYAML)},
	}}
}

func TestWebhookConfigurationsCallTheServiceAndSpareTheirOwnNamespace(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	objs, err := app.Objects(admissionPattern(), app.Options{Namespace: "ops", CAFile: ca, Image: "img"})
	if err != nil {
		t.Fatal(err)
	}
	var m *admissionregistrationv1.MutatingWebhookConfiguration
	var v *admissionregistrationv1.ValidatingWebhookConfiguration
	var svc *corev1.Service
	var dep *appsv1.Deployment
	var pdb *policyv1.PodDisruptionBudget
	for _, o := range objs {
		switch o := o.(type) {
		case *policyv1.PodDisruptionBudget:
			pdb = o
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			m = o
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			v = o
		case *corev1.Service:
			if !strings.HasSuffix(o.Name, "-metrics") {
				svc = o
			}
		case *appsv1.Deployment:
			dep = o
		case *rbacv1.Role:
			if strings.HasSuffix(o.Name, "leader-election") {
				t.Errorf("an admission-only pattern got a leader-election Role")
			}
		}
	}
	if m == nil || v == nil || svc == nil || dep == nil {
		t.Fatalf("rendered %d objects without both configurations, the Service and the Deployment", len(objs))
	}
	if m.Name != "kpatterns-gadget" || v.Name != "kpatterns-gadget" {
		t.Errorf("names %s, %s", m.Name, v.Name)
	}
	wantSel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"ops", "kube-system"}}}}
	mw, vw := m.Webhooks[0], v.Webhooks[0]
	if d := cmp.Diff(wantSel, mw.NamespaceSelector); d != "" {
		t.Errorf("namespaceSelector (-want +got):\n%s", d)
	}
	cc := mw.ClientConfig
	if cc.Service == nil || cc.Service.Name != "gadget" || cc.Service.Namespace != "ops" || *cc.Service.Path != "/mutate-apps-v1-deployment" ||
		*cc.Service.Port != 443 || string(cc.CABundle) != "PEM" || cc.URL != nil {
		t.Errorf("clientConfig = %+v", cc)
	}
	if *mw.TimeoutSeconds != app.WebhookTimeoutSeconds || *vw.TimeoutSeconds != 3 {
		t.Errorf("timeouts %d, %d: want the default, and the marker's", *mw.TimeoutSeconds, *vw.TimeoutSeconds)
	}
	if *mw.FailurePolicy != admissionregistrationv1.Fail || *mw.SideEffects != admissionregistrationv1.SideEffectClassNone ||
		!cmp.Equal(vw.Rules[0].Resources, []string{"deployments", "deployments/scale"}) {
		t.Errorf("markers not kept: %+v", vw)
	}
	if p := svc.Spec.Ports[0]; p.Port != 443 || p.TargetPort.StrVal != "webhook" {
		t.Errorf("Service port %+v", p)
	}
	// Every replica serves: two by default, one always left by a voluntary disruption, on two
	// nodes where there are two.
	if *dep.Spec.Replicas != 2 || pdb == nil || pdb.Spec.MinAvailable.IntValue() != 1 ||
		pdb.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != "gadget" ||
		dep.Spec.Template.Spec.Affinity.PodAntiAffinity.PreferredDuringSchedulingIgnoredDuringExecution[0].PodAffinityTerm.TopologyKey != corev1.LabelHostname {
		t.Errorf("replicas %d, PodDisruptionBudget %+v, affinity %+v: want 2, minAvailable 1, spread by hostname",
			*dep.Spec.Replicas, pdb, dep.Spec.Template.Spec.Affinity)
	}
	c := dep.Spec.Template.Spec.Containers[0]
	vol := dep.Spec.Template.Spec.Volumes
	if len(vol) != 1 || vol[0].Secret.SecretName != "gadget-webhook-tls" || c.VolumeMounts[0].MountPath != app.CertDir ||
		!c.VolumeMounts[0].ReadOnly || c.Ports[len(c.Ports)-1].ContainerPort != app.WebhookPort {
		t.Errorf("Deployment does not serve the mounted TLS Secret: %+v %+v", c, vol)
	}
	// A terminating replica serves on until its endpoint is gone; SIGTERM comes after.
	if l := c.Lifecycle; l == nil || l.PreStop == nil || l.PreStop.Sleep == nil || l.PreStop.Sleep.Seconds != app.WebhookDrainSeconds {
		t.Errorf("preStop = %+v, want a sleep of %d s", l, app.WebhookDrainSeconds)
	}
	if sc := c.SecurityContext; !*sc.RunAsNonRoot || !*sc.ReadOnlyRootFilesystem || *sc.AllowPrivilegeEscalation {
		t.Errorf("securityContext %+v", sc)
	}
}

// --certs: self (the default) renders the Secret cert-controller fills and RBAC limited by name
// where Kubernetes allows it, and no caBundle; cert-manager renders an Issuer, a Certificate and
// the CA injector's annotation; manual takes the caBundle from --ca-file. Mismatched flags fail.
func TestCertificateSources(t *testing.T) {
	ca := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(ca, []byte("PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	render := func(o app.Options) map[string]client.Object {
		t.Helper()
		o.Namespace, o.Image = "ops", "img"
		objs, err := app.Objects(admissionPattern(), o)
		if err != nil {
			t.Fatal(err)
		}
		out := map[string]client.Object{}
		for _, obj := range objs {
			out[obj.GetObjectKind().GroupVersionKind().Kind+"/"+obj.GetName()] = obj
		}
		return out
	}
	args := func(objs map[string]client.Object) []string {
		return objs["Deployment/gadget"].(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Args
	}
	caBundle := func(objs map[string]client.Object) []byte {
		return objs["ValidatingWebhookConfiguration/kpatterns-gadget"].(*admissionregistrationv1.ValidatingWebhookConfiguration).Webhooks[0].ClientConfig.CABundle
	}

	self := render(app.Options{})
	if _, ok := self["Secret/gadget-webhook-tls"]; !ok || !slices.Contains(args(self), "--certs=self") || caBundle(self) != nil {
		t.Errorf("self: Secret rendered %v, args %v, caBundle %q; want the Secret, run --certs=self, no caBundle", ok, args(self), caBundle(self))
	}
	role := self["Role/kpatterns-gadget-certs"].(*rbacv1.Role)
	wantRole := []rbacv1.PolicyRule{
		// its own Secret only: list and watch too, with a field selector on the name
		{APIGroups: []string{""}, Resources: []string{"secrets"}, ResourceNames: []string{"gadget-webhook-tls"}, Verbs: []string{"get", "list", "watch", "update"}},
	}
	if d := cmp.Diff(wantRole, role.Rules); d != "" {
		t.Errorf("self: Role (-want +got):\n%s", d)
	}
	cr := self["ClusterRole/kpatterns-gadget-certs"].(*rbacv1.ClusterRole)
	if r := cr.Rules[0]; !cmp.Equal(r.ResourceNames, []string{"kpatterns-gadget"}) || !cmp.Equal(r.Verbs, []string{"get", "update"}) ||
		!cmp.Equal(r.Resources, []string{"mutatingwebhookconfigurations", "validatingwebhookconfigurations"}) {
		t.Errorf("self: ClusterRole rule %+v", r)
	}
	if _, ok := self["ClusterRoleBinding/kpatterns-gadget-certs"]; !ok {
		t.Error("self: no ClusterRoleBinding for the certificate's RBAC")
	}

	cm := render(app.Options{Certs: app.CertsCertManager})
	cert, ok := cm["Certificate/kpatterns-gadget-serving"].(*unstructured.Unstructured)
	if !ok || cm["Issuer/kpatterns-gadget-selfsigned"] == nil {
		t.Fatalf("cert-manager: objects %v", slices.Collect(maps.Keys(cm)))
	}
	if secret, _, _ := unstructured.NestedString(cert.Object, "spec", "secretName"); secret != "gadget-webhook-tls" {
		t.Errorf("cert-manager: the Certificate's secretName is %q", secret)
	}
	if a := cm["MutatingWebhookConfiguration/kpatterns-gadget"].GetAnnotations()["cert-manager.io/inject-ca-from"]; a != "ops/kpatterns-gadget-serving" {
		t.Errorf("cert-manager: inject-ca-from = %q", a)
	}
	if slices.Contains(args(cm), "--certs=self") || cm["Secret/gadget-webhook-tls"] != nil {
		t.Errorf("cert-manager: args %v, or a Secret rendered: cert-manager writes it", args(cm))
	}

	manual := render(app.Options{CAFile: ca})
	if string(caBundle(manual)) != "PEM" || manual["Role/kpatterns-gadget-certs"] != nil {
		t.Errorf("manual: caBundle %q; want --ca-file's, and no certificate RBAC", caBundle(manual))
	}

	for _, o := range []app.Options{{Certs: app.CertsSelf, CAFile: ca}, {Certs: app.CertsManual}, {Certs: "vault"}} {
		o.Namespace, o.Image = "ops", "img"
		if _, err := app.Objects(admissionPattern(), o); err == nil {
			t.Errorf("--certs=%q --ca-file=%q accepted", o.Certs, o.CAFile)
		}
	}
}

func TestWebhookURLForAWebhookOutsideTheCluster(t *testing.T) {
	objs, err := app.Objects(admissionPattern(), app.Options{Namespace: "ops", WebhookURL: "https://127.0.0.1:9443/"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o := o.(type) {
		case *corev1.Service:
			t.Error("a Service rendered for a webhook URL")
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			if u := o.Webhooks[0].ClientConfig.URL; u == nil || *u != "https://127.0.0.1:9443/validate-apps-v1-deployment" || o.Webhooks[0].ClientConfig.Service != nil {
				t.Errorf("clientConfig = %+v", o.Webhooks[0].ClientConfig)
			}
		}
	}
	if _, err := app.Objects(admissionPattern(), app.Options{Namespace: "ops", WebhookURL: "http://127.0.0.1:9443"}); err == nil {
		t.Error("an http:// webhook URL was accepted")
	}
}

// Without --image or --webhook-url nothing would serve the webhooks: none is rendered, and the
// command says so.
func TestNoWebhooksWithoutAServer(t *testing.T) {
	objs, err := app.Objects(admissionPattern(), app.Options{Namespace: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range objs {
		switch o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration, *admissionregistrationv1.ValidatingWebhookConfiguration, *corev1.Service:
			t.Errorf("%T %s rendered with nothing to serve it", o, o.GetName())
		}
	}
	var stderr bytes.Buffer
	err = app.Execute(context.Background(), admissionPattern(), nil, nil, []string{"manifests"}, &bytes.Buffer{}, &stderr)
	if err != nil || !strings.Contains(stderr.String(), "no webhook configurations rendered") {
		t.Errorf("manifests: %v, stderr %q: want the webhooks' absence explained", err, stderr.String())
	}
}

func TestCertsCoverTheServiceAndRefuseToOverwrite(t *testing.T) {
	dir := t.TempDir()
	if err := app.WriteCerts("gadget", "ops", app.CertOptions{Dir: dir, Hosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, app.CertFile), filepath.Join(dir, app.KeyFile))
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	caPEM, err := os.ReadFile(filepath.Join(dir, app.CAFile))
	if err != nil || !roots.AppendCertsFromPEM(caPEM) {
		t.Fatalf("ca.crt: %v", err)
	}
	for _, host := range []string{"gadget.ops.svc", "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{Roots: roots, DNSName: host}); err != nil {
			t.Errorf("certificate for %s: %v", host, err)
		}
	}
	if err := app.WriteCerts("gadget", "ops", app.CertOptions{Dir: dir}); err == nil || !strings.Contains(err.Error(), "--force") {
		t.Errorf("overwrite without --force: %v", err)
	}
	if err := app.WriteCerts("gadget", "ops", app.CertOptions{Dir: dir, Force: true}); err != nil {
		t.Errorf("overwrite with --force: %v", err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, app.SecretFile)); err != nil || !strings.Contains(string(b), "name: gadget-webhook-tls") ||
		!strings.Contains(string(b), "type: kubernetes.io/tls") {
		t.Errorf("secret.yaml: %v\n%s", err, b)
	}
}

// A rotated certificate in the certificate directory is served without a restart (the Secret
// mounted in a Pod is updated in place by the kubelet in the same way); TLS 1.2 at least, and no
// HTTP/2 by default.
func TestRotatedCertificateIsServedWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	if err := app.WriteCerts("gadget", "ops", app.CertOptions{Dir: dir, Hosts: []string{"127.0.0.1"}}); err != nil {
		t.Fatal(err)
	}
	port := freeLocalPort(t)
	startWebhookServer(t, port, dir)

	served := func() (*x509.Certificate, uint16, error) {
		conn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"h2", "http/1.1"}}) //nolint:gosec // reads the served certificate
		if err != nil {
			return nil, 0, err
		}
		defer func() { _ = conn.Close() }()
		st := conn.ConnectionState()
		if st.NegotiatedProtocol == "h2" {
			t.Error("HTTP/2 negotiated without --enable-http2")
		}
		return st.PeerCertificates[0], st.Version, nil
	}
	var first *x509.Certificate
	testenv.Eventually(t, "the server answers", func() error {
		c, version, err := served()
		if err == nil && version < tls.VersionTLS12 {
			t.Errorf("TLS version %x", version)
		}
		first = c
		return err
	})
	if _, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port), &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS11}); err == nil { //nolint:gosec // checks that TLS 1.1 is refused
		t.Error("TLS 1.1 accepted")
	}
	if err := app.WriteCerts("gadget", "ops", app.CertOptions{Dir: dir, Hosts: []string{"127.0.0.1"}, Renew: true}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the rotated certificate is served", func() error {
		c, _, err := served()
		if err != nil {
			return err
		}
		if c.SerialNumber.Cmp(first.SerialNumber) == 0 {
			return errors.New("still the first certificate")
		}
		if err := c.CheckSignatureFrom(ca(t, dir)); err != nil {
			t.Errorf("the renewed certificate is not signed by the same CA: %v", err)
		}
		return nil
	})
}

// Readiness follows the served certificate: an expired one is not ready, its renewal is.
func TestReadinessNeedsAValidCertificate(t *testing.T) {
	dir := t.TempDir()
	if err := app.WriteCerts("gadget", "ops", app.CertOptions{Dir: dir, Hosts: []string{"127.0.0.1"}, Valid: -time.Second}); err != nil {
		t.Fatal(err)
	}
	port := freeLocalPort(t)
	ready := app.ServesValidCertificate("127.0.0.1", port)
	if err := ready(nil); err == nil {
		t.Fatal("ready with no server")
	}
	startWebhookServer(t, port, dir)
	testenv.Eventually(t, "the expired certificate is served and not ready", func() error {
		if err := ready(nil); err == nil || !strings.Contains(err.Error(), "not now") {
			return fmt.Errorf("readiness = %v, want the expired certificate reported", err)
		}
		return nil
	})
	if err := app.WriteCerts("gadget", "ops", app.CertOptions{Dir: dir, Hosts: []string{"127.0.0.1"}, Renew: true}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "ready with the renewed certificate", func() error { return ready(nil) })
}

func freeLocalPort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = l.Close() }()
	return l.Addr().(*net.TCPAddr).Port
}

// startWebhookServer serves the certificate in dir on 127.0.0.1:port until the test ends.
func startWebhookServer(t *testing.T, port int, dir string) {
	t.Helper()
	srv := app.WebhookServer("127.0.0.1", port, dir, false)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("webhook server: %v", err)
		}
	})
}

func ca(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, app.CAFile), filepath.Join(dir, app.CAKeyFile))
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	return c
}
