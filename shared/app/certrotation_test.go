// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// run --certs=self, as its ServiceAccount with the RBAC install renders: the webhook server
// starts with the manager, is not ready while cert-controller has not issued the certificate,
// then serves the certificate cert-controller wrote to the Secret (mounted in the directory, as
// the kubelet mounts it), whose CA it injected into the webhook configurations.
func TestSelfCertsServeOnceIssued(t *testing.T) {
	p := admissionPattern()
	env, err := testenv.Start(testenv.Pattern{Pattern: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	objs, err := app.Objects(p, app.Options{Namespace: testenv.Namespace, Image: "x/y:1"})
	if err != nil {
		t.Fatal(err)
	}
	// The RBAC and the Secret a Deployment would have; the webhook configurations are testenv's
	// (calling a URL), which cert-controller finds by name all the same.
	var install []client.Object
	for _, o := range objs {
		switch o.(type) {
		case *corev1.Secret, *corev1.ServiceAccount:
			install = append(install, o)
		default:
			if o.GetObjectKind().GroupVersionKind().Group == "rbac.authorization.k8s.io" {
				install = append(install, o)
			}
		}
	}
	ctx := context.Background()
	if err := app.Install(ctx, env.Admin, install, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	port := freeLocalPort(t)
	o := app.RunOptions{Options: app.Options{Namespace: testenv.Namespace, Certs: app.CertsSelf}, CertDir: t.TempDir(),
		WebhookHost: "127.0.0.1", WebhookPort: port, ProbeAddr: "0", MetricsAddr: "0"}
	opts, err := app.ManagerOptions(p, o)
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := ctrl.NewManager(app.Impersonate(env.Admin, testenv.Namespace, p.Name), opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := app.AddProbes(mgr, opts); err != nil {
		t.Fatal(err)
	}
	if err := app.AddCertRotator(mgr, p, o); err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(runCtx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})

	// What the kubelet does for a Pod that mounts the Secret: its keys as files in the directory
	// (cert-controller is ready once they are there).
	go func() {
		for runCtx.Err() == nil {
			secret := &corev1.Secret{}
			if err := env.Client.Get(runCtx, client.ObjectKey{Namespace: testenv.Namespace, Name: app.WebhookSecretName(p.Name)}, secret); err == nil && len(secret.Data[corev1.TLSCertKey]) > 0 {
				for k, v := range secret.Data {
					_ = os.WriteFile(filepath.Join(o.CertDir, k), v, 0o600)
				}
				return
			}
			time.Sleep(100 * time.Millisecond)
		}
	}()
	ready := app.ServesValidCertificate("127.0.0.1", port)
	testenv.Eventually(t, "the webhook server ready with the issued certificate", func() error { return ready(nil) })
	secret := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: testenv.Namespace, Name: app.WebhookSecretName(p.Name)}, secret); err != nil {
		t.Fatal(err)
	}
	served, err := servedLeaf(net.JoinHostPort("127.0.0.1", strconv.Itoa(port)))
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(secret.Data[corev1.TLSCertKey])
	if block == nil || !bytes.Equal(block.Bytes, served.Raw) {
		t.Fatalf("the served certificate (serial %s) is not the Secret's", served.SerialNumber)
	}
	testenv.Eventually(t, "the CA injected into both webhook configurations", func() error {
		m := &admissionregistrationv1.MutatingWebhookConfiguration{}
		v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
		if err := errors.Join(env.Client.Get(ctx, client.ObjectKey{Name: "kpatterns-" + p.Name}, m),
			env.Client.Get(ctx, client.ObjectKey{Name: "kpatterns-" + p.Name}, v)); err != nil {
			return err
		}
		ca := secret.Data["ca.crt"]
		if !bytes.Equal(m.Webhooks[0].ClientConfig.CABundle, ca) || !bytes.Equal(v.Webhooks[0].ClientConfig.CABundle, ca) {
			return fmt.Errorf("caBundles not the Secret's ca.crt")
		}
		return nil
	})
}

func servedLeaf(addr string) (*x509.Certificate, error) {
	conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}
