// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/podpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// TestPodPolicy: Pods that the ReplicaSet controller creates for Deployments are admitted or denied
// by their Namespace's labels, which podpolicy (as its ServiceAccount: namespaces get/list/watch)
// reads from its informer cache.
func TestPodPolicy(t *testing.T) {
	const ns = "e2e-podpolicy"
	f := withPattern(features.New("podpolicy"), "podpolicy", ns).
		Assess("in a namespace labelled enforce and allow-pods, a Deployment's Pods are admitted", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			label := `{"metadata":{"labels":{"` + webhook.EnforceLabel + `":"true","` + webhook.AllowPodsLabel + `":"true"}}}`
			if err := c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(label))); err != nil {
				t.Fatal(err)
			}
			d := deploymentUsing(ns, "web", "none", false)
			d.Spec.Template.Spec.Containers[0].EnvFrom = nil
			d.Spec.Replicas = ptr.To[int32](2)
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "2 Pods admitted and available", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
				return err == nil && d.Status.AvailableReplicas == 2, err
			})
			return ctx
		}).
		Assess("a privileged Pod is denied: the ReplicaSet's FailedCreate event says why", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			d := deploymentUsing(ns, "priv", "none", false)
			d.Spec.Template.Spec.Containers[0].EnvFrom = nil
			d.Spec.Template.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
			if err := c.Create(ctx, d); err != nil {
				t.Fatal(err)
			}
			want := "container app is privileged; namespace " + ns + " does not allow it"
			waitFor(t, "a FailedCreate event on the ReplicaSet", func(ctx context.Context) (bool, error) {
				list := &eventsv1.EventList{}
				if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
					return false, err
				}
				for _, e := range list.Items {
					if e.Regarding.Kind == "ReplicaSet" && strings.HasPrefix(e.Regarding.Name, "priv-") &&
						e.Reason == "FailedCreate" && strings.Contains(e.Note, want) {
						return true, nil
					}
				}
				return false, nil
			})
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app": "priv"}); err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 0 {
				t.Errorf("%d privileged Pods were admitted", len(pods.Items))
			}
			if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil || d.Status.AvailableReplicas != 0 {
				t.Errorf("Deployment priv: available %d, err %v", d.Status.AvailableReplicas, err)
			}
			return ctx
		})
	testEnv.Test(t, f.Feature())
}

// BenchmarkPodAdmissionLatency is podpolicy's BenchmarkAdmissionLatency on the local cluster, the
// webhook as its own process: dry-run Pod creates at 50/s and 200/s into a namespace labelled
// enforce and allow-pods and, as the baseline in the same run, into one without the labels.
//
//	go test -run '^$' -bench PodAdmissionLatency -benchtime 1x ./e2e/
func BenchmarkPodAdmissionLatency(b *testing.B) {
	ctx := context.Background()
	cfg := testEnv.EnvConf()
	const governed, plain = "e2e-podpolicy-bench", "e2e-podpolicy-bench-plain"
	rc := rest.CopyConfig(cfg.Client().RESTConfig())
	rc.QPS = -1 // the load must not be throttled by client-go's default limiter (5/s)
	c, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		b.Fatal(err)
	}
	for _, ns := range []*corev1.Namespace{
		localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: governed, Labels: map[string]string{webhook.EnforceLabel: "true", webhook.AllowPodsLabel: "true"}}}),
		testNamespace(plain),
	} {
		if err := c.Create(ctx, ns); err != nil {
			b.Fatal(err)
		}
		defer func() { _ = c.Delete(ctx, ns) }()
	}
	stop := runPattern(ctx, b, cfg, "podpolicy")
	defer func() {
		removeWebhooks(ctx, b, cfg, "podpolicy")
		stop()
	}()
	create := func(ns string) func(rate int) func(int) error {
		return func(rate int) func(int) error {
			return func(i int) error {
				p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-%d-%d", rate, i), Namespace: ns},
					Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}
				return c.Create(ctx, p, client.DryRunAll)
			}
		}
	}
	testenv.CompareLatency(b, []int{50, 200}, create(plain), create(governed))
}
