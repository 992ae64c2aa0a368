// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"testing"

	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// BenchmarkReferencing maps one ConfigMap event to its Deployments with 100 and with 10,000
// opted-in Deployments in the cache (each referencing its own ConfigMap; 3 reference the one
// that changes). "index" is the reloader's field-index lookup; "scan" is the baseline a cache
// without indexes forces: list every Deployment in the namespace and check its references.
// Compare each method's 10,000/100 ratio: about 1 for the index, about 100 for the scan.
func BenchmarkReferencing(b *testing.B) {
	_, c := start(b, defaults)
	ctx := context.Background()
	mapToDeployments := controller.MapSourceToWorkloads(c, controller.Workloads[0], controller.ConfigMap)
	for _, n := range []int{100, 10000} {
		ns := "bench-" + rand.String(6)
		if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			b.Fatal(err)
		}
		var g errgroup.Group
		g.SetLimit(16)
		for i := range n {
			g.Go(func() error {
				ref := fmt.Sprintf("cm-%d", i)
				if i < 3 {
					ref = "hot"
				}
				labels := map[string]string{"app": fmt.Sprint(i)}
				return env.Client.Create(ctx, &appsv1.Deployment{
					ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("d-%d", i), Namespace: ns, Labels: map[string]string{controller.OptIn: "true"}},
					Spec: appsv1.DeploymentSpec{Replicas: new(int32), Selector: &metav1.LabelSelector{MatchLabels: labels},
						Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
							Containers: []corev1.Container{{Name: "app", Image: "nginx", EnvFrom: []corev1.EnvFromSource{{
								ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: ref}}}}}}}}},
				})
			})
		}
		if err := g.Wait(); err != nil {
			b.Fatal(err)
		}
		hot := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "hot", Namespace: ns}}
		testenv.Eventually(b, "cache holds every Deployment", func() error {
			list := &appsv1.DeploymentList{}
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			if len(list.Items) != n {
				return fmt.Errorf("%d of %d cached", len(list.Items), n)
			}
			return nil
		})
		b.Run(fmt.Sprintf("index/deployments=%d", n), func(b *testing.B) {
			for b.Loop() {
				if got := len(mapToDeployments(ctx, hot)); got != 3 {
					b.Fatalf("%d Deployments, want 3", got)
				}
			}
		})
		b.Run(fmt.Sprintf("scan/deployments=%d", n), func(b *testing.B) {
			for b.Loop() {
				list := &appsv1.DeploymentList{}
				if err := c.List(ctx, list, client.InNamespace(ns), client.UnsafeDisableDeepCopy); err != nil {
					b.Fatal(err)
				}
				found := 0
				for i := range list.Items {
					for _, key := range controller.IndexWorkloadBySource(controller.Workloads[0])(&list.Items[i]) {
						if key == "configmap/hot" {
							found++
						}
					}
				}
				if found != 3 {
					b.Fatalf("%d Deployments, want 3", found)
				}
			}
		})
	}
}
