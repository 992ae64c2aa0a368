// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os/exec"
	"path/filepath"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// TestDeployPolicy drives the admission rules through the cluster's kube-apiserver, with the
// pattern serving as its ServiceAccount: locally out of the cluster, called by URL on 127.0.0.1.
func TestDeployPolicy(t *testing.T) {
	const ns = "e2e-deploypolicy"
	web := func() *appsv1.Deployment {
		sel := map[string]string{"app": "web"}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}}
	}
	// update re-reads and retries on a conflict (the deployment controller writes the object too);
	// a denial is returned as it is.
	update := func(ctx context.Context, c client.Client, mutate func(*appsv1.Deployment)) error {
		return retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d := web()
			if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
				return err
			}
			mutate(d)
			return c.Update(ctx, d)
		})
	}
	scale := func(ctx context.Context, c client.Client, n int32) error {
		return c.SubResource("scale").Update(ctx, web(), client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}))
	}
	f := withPattern(features.New("deploypolicy"), "deploypolicy", ns).
		Assess("a new Deployment is labelled team=unassigned", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			d := web()
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			if d.Labels[webhook.TeamLabel] != webhook.Unassigned {
				t.Fatalf("labels = %v", d.Labels)
			}
			return ctx
		}).
		Assess("kubectl scale past the namespace's ceiling is denied, within it allowed", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: webhook.PolicyConfigMap, Namespace: ns},
				Data: map[string]string{webhook.MaxReplicasKey: "3"}}); err != nil {
				t.Fatal(err)
			}
			testenv.Denied(t, scale(ctx, c, 5), "namespace policy allows at most 3 replicas")
			if err := scale(ctx, c, 3); err != nil {
				t.Fatalf("scale to 3: %v", err)
			}
			return ctx
		}).
		Assess("the defaulted team may become a real one, once; then it is denied", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := update(ctx, c, func(d *appsv1.Deployment) { d.Labels[webhook.TeamLabel] = "payments" }); err != nil {
				t.Fatalf("team=unassigned → payments: %v", err)
			}
			err := update(ctx, c, func(d *appsv1.Deployment) { d.Labels[webhook.TeamLabel] = "search" })
			testenv.Denied(t, err, "label team=payments is set and may not be changed or removed")
			return ctx
		}).
		Assess("a protected Deployment cannot be deleted until unprotected", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := update(ctx, c, func(d *appsv1.Deployment) { d.Annotations = map[string]string{webhook.ProtectAnnotation: "true"} }); err != nil {
				t.Fatal(err)
			}
			testenv.Denied(t, c.Delete(ctx, web()), "remove the protection annotation before deleting")
			if err := c.Get(ctx, client.ObjectKeyFromObject(web()), web()); err != nil {
				t.Fatalf("the protected Deployment is gone: %v", err)
			}
			if err := update(ctx, c, func(d *appsv1.Deployment) { delete(d.Annotations, webhook.ProtectAnnotation) }); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete(ctx, web()); err != nil {
				t.Fatalf("delete after unprotecting: %v", err)
			}
			return ctx
		}).
		Assess("a renewed certificate is served without a restart, and admission goes on", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			w := webhooks["deploypolicy"]
			if w == nil {
				t.Skip("the webhook runs in the cluster (kind): its Secret is rotated by whoever issues it")
			}
			served := func() *x509.Certificate {
				conn, err := tls.Dial("tcp", "127.0.0.1:"+w.Port, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = conn.Close() }()
				return conn.ConnectionState().PeerCertificates[0]
			}
			before := served()
			renew := exec.CommandContext(ctx, filepath.Join(bins, "deploypolicy"), "certs", "--dir", w.Dir, "--hosts", "127.0.0.1", "--renew")
			if out, err := renew.CombinedOutput(); err != nil {
				t.Fatalf("certs --renew: %v: %s", err, out)
			}
			waitFor(t, "the renewed certificate is served", func(context.Context) (bool, error) {
				return served().SerialNumber.Cmp(before.SerialNumber) != 0, nil
			})
			d := web()
			d.Name = "after-rotation"
			if err := clientFor(t, cfg).Create(ctx, d); err != nil {
				t.Fatalf("admission after the rotation: %v", err)
			}
			if d.Labels[webhook.TeamLabel] != webhook.Unassigned {
				t.Fatalf("labels after the rotation = %v", d.Labels)
			}
			return ctx
		})
	testEnv.Test(t, f.Feature())
}

// BenchmarkAdmissionLatency is deploypolicy's benchmark of the same name on the local cluster:
// the webhook runs as its own process (as its ServiceAccount, called by URL), apart from the load.
// Dry-run creates (the webhooks declare sideEffects: None, so admission runs; nothing is stored
// and no controller works on them) at 50/s and 200/s for 5 s each into a governed namespace, and,
// as the baseline in the same run, into the operator namespace the webhooks exclude.
//
//	go test -run '^$' -bench AdmissionLatency -benchtime 1x ./e2e/
func BenchmarkAdmissionLatency(b *testing.B) {
	ctx := context.Background()
	cfg := testEnv.EnvConf()
	const governed = "e2e-admission-bench"
	rc := rest.CopyConfig(cfg.Client().RESTConfig())
	rc.QPS = -1 // the load must not be throttled by client-go's default limiter (5/s)
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	if err := c.Create(ctx, testNamespace(governed)); err != nil {
		b.Fatal(err)
	}
	stop := runPattern(ctx, b, cfg, "deploypolicy")
	defer func() {
		removeWebhooks(ctx, b, cfg, "deploypolicy")
		stop()
		_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: governed}})
	}()
	create := func(ns string) func(rate int) func(int) error {
		return func(int) func(int) error {
			return func(i int) error {
				d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d", i), Namespace: ns},
					Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "bench"}},
						Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "bench"}},
							Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}}
				return c.Create(ctx, d, client.DryRunAll)
			}
		}
	}
	testenv.CompareLatency(b, []int{50, 200}, create(operatorNamespace), create(governed))
}
