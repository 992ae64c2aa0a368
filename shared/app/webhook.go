// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"sort"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

// Webhook serving: a pattern declares its handlers with +kubebuilder:webhook markers (controller-gen
// writes config/webhook/manifests.yaml) and registers them in Setup on mgr.GetWebhookServer().
const (
	// WebhookPort is where `run` serves admission requests by default.
	WebhookPort = 9443
	// CertDir is where `run` reads tls.crt and tls.key by default: the mount path of the TLS
	// Secret in the rendered Deployment (controller-runtime's default).
	CertDir = "/tmp/k8s-webhook-server/serving-certs"
	// WebhookTimeoutSeconds bounds each admission call when a marker sets no timeout.
	WebhookTimeoutSeconds = 5
	// WebhookDrainSeconds is how long a terminating webhook replica goes on serving before SIGTERM
	// (a preStop sleep): long enough for its endpoint's removal to reach the API server, and for
	// a call already sent to it to finish within WebhookTimeoutSeconds.
	WebhookDrainSeconds = 5
	// namespaceNameLabel is set by the API server on every Namespace.
	namespaceNameLabel = "kubernetes.io/metadata.name"
)

// webhookConfigs reads the webhook configurations controller-gen wrote (none if the pattern has
// no webhook markers).
func webhookConfigs(config fs.FS) ([]*admissionregistrationv1.MutatingWebhookConfiguration, []*admissionregistrationv1.ValidatingWebhookConfiguration, error) {
	objs, err := readObjects(config, "webhook/manifests.yaml", map[string]func() client.Object{
		"MutatingWebhookConfiguration":   func() client.Object { return &admissionregistrationv1.MutatingWebhookConfiguration{} },
		"ValidatingWebhookConfiguration": func() client.Object { return &admissionregistrationv1.ValidatingWebhookConfiguration{} },
	})
	var mutating []*admissionregistrationv1.MutatingWebhookConfiguration
	var validating []*admissionregistrationv1.ValidatingWebhookConfiguration
	for _, o := range objs {
		switch o := o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			mutating = append(mutating, o)
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			validating = append(validating, o)
		}
	}
	return mutating, validating, err
}

// readGlob reads the files of config matching pattern, sorted by name, as readObjects does.
func readGlob(config fs.FS, pattern string, kinds map[string]func() client.Object) ([]client.Object, error) {
	if config == nil {
		return nil, nil
	}
	files, err := fs.Glob(config, pattern)
	if err != nil {
		return nil, err
	}
	sort.Strings(files)
	var out []client.Object
	for _, f := range files {
		objs, err := readObjects(config, f, kinds)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}

// readObjects strictly decodes the YAML documents of file in config (none if config or file is
// missing) into objects of the given kinds; any other kind is an error.
func readObjects(config fs.FS, file string, kinds map[string]func() client.Object) ([]client.Object, error) {
	if config == nil {
		return nil, nil
	}
	b, err := fs.ReadFile(config, file)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []client.Object
	docs := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(b)))
	for {
		doc, err := docs.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("pattern config %s: %w", file, err)
		}
		var tm metav1.TypeMeta
		if err := utilyaml.Unmarshal(doc, &tm); err != nil || tm.Kind == "" {
			continue // an empty document, or comments only
		}
		newObj, ok := kinds[tm.Kind]
		if !ok {
			return nil, fmt.Errorf("pattern config %s: unexpected kind %s", file, tm.Kind)
		}
		obj := newObj()
		if err := utilyaml.UnmarshalStrict(doc, obj); err != nil {
			return nil, fmt.Errorf("pattern config %s: %w", file, err)
		}
		out = append(out, obj)
	}
}

// HasWebhooks reports whether the pattern serves admission webhooks.
func HasWebhooks(p Pattern) (bool, error) {
	m, v, err := webhookConfigs(p.Config)
	return len(m)+len(v) > 0, err
}

// WebhookObjects are the pattern's webhook configurations (and Service) as Objects renders them
// with --image or --webhook-url, rendered whatever o says: for a test environment that points
// them at its own server (envtest's WebhookInstallOptions).
func WebhookObjects(p Pattern, o Options) ([]client.Object, error) {
	return typed(webhookObjects(p, o, nil))
}

// webhookObjects renders the pattern's webhook configurations for o: named kpatterns-<pattern>,
// calling the Service <pattern>.<namespace> (or o.WebhookURL + path, for a webhook running out of
// the cluster), trusting o.CAFile, never called for the operator's own namespace or kube-system
// (so a broken webhook cannot block its own repair), and bounded by a timeout. The Service comes
// with them unless o.WebhookURL is set.
func webhookObjects(p Pattern, o Options, labels map[string]string) ([]client.Object, error) {
	mutating, validating, err := webhookConfigs(p.Config)
	if err != nil || len(mutating)+len(validating) == 0 {
		return nil, err
	}
	var caBundle []byte
	if o.CAFile != "" {
		if caBundle, err = os.ReadFile(o.CAFile); err != nil {
			return nil, fmt.Errorf("--ca-file: %w", err)
		}
	}
	if o.WebhookURL != "" && !strings.HasPrefix(o.WebhookURL, "https://") {
		return nil, fmt.Errorf("--webhook-url %q: the API server calls webhooks over https", o.WebhookURL)
	}
	clientConfig := func(cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.WebhookClientConfig {
		path := "/"
		if cc.Service != nil && cc.Service.Path != nil {
			path = *cc.Service.Path
		}
		out := admissionregistrationv1.WebhookClientConfig{CABundle: caBundle}
		if o.WebhookURL != "" {
			out.URL = ptr.To(strings.TrimSuffix(o.WebhookURL, "/") + path)
		} else {
			out.Service = &admissionregistrationv1.ServiceReference{Name: p.Name, Namespace: o.Namespace, Path: &path, Port: ptr.To[int32](443)}
		}
		return out
	}
	exclude := func(sel *metav1.LabelSelector) *metav1.LabelSelector { return excludeNamespaces(sel, o.Namespace) }
	timeout := func(t *int32) *int32 {
		if t == nil {
			return ptr.To[int32](WebhookTimeoutSeconds)
		}
		return t
	}
	name := "kpatterns-" + p.Name
	var annotations map[string]string
	if o.Certs == CertsCertManager && o.WebhookURL == "" { // cert-manager's CA injector fills the caBundle
		annotations = map[string]string{"cert-manager.io/inject-ca-from": certManagerCertificate(p, o.Namespace)}
	}
	var objs []client.Object
	for _, m := range mutating {
		m.ObjectMeta = metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}
		for i := range m.Webhooks {
			w := &m.Webhooks[i]
			w.ClientConfig, w.NamespaceSelector, w.TimeoutSeconds = clientConfig(w.ClientConfig), exclude(w.NamespaceSelector), timeout(w.TimeoutSeconds)
		}
		objs = append(objs, m)
	}
	for _, v := range validating {
		v.ObjectMeta = metav1.ObjectMeta{Name: name, Labels: labels, Annotations: annotations}
		for i := range v.Webhooks {
			w := &v.Webhooks[i]
			w.ClientConfig, w.NamespaceSelector, w.TimeoutSeconds = clientConfig(w.ClientConfig), exclude(w.NamespaceSelector), timeout(w.TimeoutSeconds)
		}
		objs = append(objs, v)
	}
	if o.WebhookURL == "" {
		objs = append(objs, &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: o.Namespace, Labels: labels},
			Spec: corev1.ServiceSpec{Selector: OperatorPods(p.Name),
				Ports: []corev1.ServicePort{{Name: "webhook", Port: 443, TargetPort: intstr.FromString("webhook")}}},
		})
	}
	return objs, nil
}

// webhookResources are the resources of the webhook configurations among objs.
func webhookResources(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		switch o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			out = append(out, "mutatingwebhookconfigurations")
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			out = append(out, "validatingwebhookconfigurations")
		}
	}
	return out
}

// WebhookServer is the TLS server `run` starts for a pattern with webhooks: certificates from
// certDir (tls.crt, tls.key), reloaded by controller-runtime's certificate watcher when they
// change (a rotated Secret is served without a restart), TLS 1.2 at least, and HTTP/1.1 only
// unless http2 (--enable-http2): kubebuilder's default since the HTTP/2 Rapid Reset and Stream
// Cancellation CVEs.
func WebhookServer(host string, port int, certDir string, http2 bool) webhook.Server {
	return webhook.NewServer(webhook.Options{Host: host, Port: port, CertDir: certDir, TLSOpts: tlsOptions(http2)})
}

// tlsOptions are the TLS settings of every server a pattern runs: TLS 1.2 at least, HTTP/2 only
// when asked for.
func tlsOptions(http2 bool) []func(*tls.Config) {
	return []func(*tls.Config){func(c *tls.Config) {
		c.MinVersion = tls.VersionTLS12
		if !http2 {
			c.NextProtos = []string{"http/1.1"}
		}
	}}
}
