// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"runtime"
	"testing"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/testenv"
	"github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	"github.com/kpatterns/kpatterns/summary/controller"
)

// realisticPods creates n Pods shaped like a typical Deployment's (two containers with env,
// resources, probes and mounts), half of them Running and Ready.
func realisticPods(b *testing.B, ns string, n int) {
	b.Helper()
	ctx := context.Background()
	var g errgroup.Group
	g.SetLimit(16)
	for i := range n {
		g.Go(func() error {
			c := corev1.Container{Name: "app", Image: "registry.example.com/team/app:v1.2.3",
				Env:            []corev1.EnvVar{{Name: "LOG_LEVEL", Value: "info"}, {Name: "REGION", Value: "eu-west-1"}, {Name: "FEATURE_FLAGS", Value: "a,b,c,d"}},
				Resources:      corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080)}}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/app"}}}
			sidecar := c
			sidecar.Name = "proxy"
			p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("app-%d", i), Namespace: ns,
				Labels:      map[string]string{"app": "web", "pod-template-hash": "abc123", "team": "platform"},
				Annotations: map[string]string{"prometheus.io/scrape": "true", "prometheus.io/port": "9090"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{c, sidecar}, Volumes: []corev1.Volume{{Name: "config",
					VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "app"}}}}},
					TerminationGracePeriodSeconds: ptr.To[int64](30)}}
			if err := env.Client.Create(ctx, p); err != nil {
				return err
			}
			if i%2 == 0 {
				p.Status = corev1.PodStatus{Phase: corev1.PodRunning, Conditions: []corev1.PodCondition{
					{Type: corev1.PodScheduled, Status: corev1.ConditionTrue}, {Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
					{Type: corev1.ContainersReady, Status: corev1.ConditionTrue}, {Type: corev1.PodReady, Status: corev1.ConditionTrue}}}
				return env.Client.Status().Update(ctx, p)
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkReconcile1000Pods is one reconcile of a converged Workload over 1,000 cached Pods.
func BenchmarkReconcile1000Pods(b *testing.B) {
	ns := env.Namespace(b)
	realisticPods(b, ns, 1000)
	mgr := env.Manager(b)
	ctx := context.Background()
	w := &v1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns}, Spec: v1alpha1.WorkloadSpec{Selector: map[string]string{"app": "web"}}}
	if err := env.Client.Create(ctx, w); err != nil {
		b.Fatal(err)
	}
	r := &controller.Reconciler{Client: mgr.GetClient()}
	req := reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)}
	// Until the summary is written and the cache has it, polling with a deadline.
	testenv.Eventually(b, "converged summary in the cache", func() error {
		if _, err := r.Reconcile(ctx, req); err != nil {
			return err
		}
		cached := &v1alpha1.Workload{}
		if err := mgr.GetClient().Get(ctx, req.NamespacedName, cached); err != nil {
			return err
		}
		if cached.Status.Total != 1000 {
			return fmt.Errorf("cached total %d", cached.Status.Total)
		}
		return nil
	})
	b.ResetTimer()
	for b.Loop() {
		if _, err := r.Reconcile(ctx, req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkPodCacheMemory measures the heap a Pod informer holds per cached Pod, with the
// summary's transform (StripPod) and, as the baseline in the same run, with managedFields
// stripped only. Report: bytes/pod for each, and their ratio.
func BenchmarkPodCacheMemory(b *testing.B) {
	ns := env.Namespace(b)
	const n = 1000
	realisticPods(b, ns, n)
	heap := func() int64 {
		runtime.GC()
		runtime.GC()
		var m runtime.MemStats
		runtime.ReadMemStats(&m)
		return int64(m.HeapAlloc)
	}
	measure := func(transform func(any) (any, error)) float64 {
		before := heap()
		c, err := cache.New(env.Admin, cache.Options{DefaultNamespaces: map[string]cache.Config{ns: {}},
			ByObject: map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: transform}}})
		if err != nil {
			b.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go func() { _ = c.Start(ctx) }()
		if !c.WaitForCacheSync(ctx) {
			b.Fatal("cache did not start")
		}
		list := &corev1.PodList{}
		if err := c.List(ctx, list); err != nil || len(list.Items) != n {
			b.Fatalf("cached %d Pods (%v)", len(list.Items), err)
		}
		list = nil
		after := heap()
		runtime.KeepAlive(c)
		return float64(after-before) / n
	}
	var stripped, full float64
	runs := 0
	for b.Loop() {
		full += measure(cache.TransformStripManagedFields())
		stripped += measure(controller.StripPod)
		runs++
	}
	b.ReportMetric(stripped/float64(runs), "bytes/pod-stripped")
	b.ReportMetric(full/float64(runs), "bytes/pod-baseline")
	b.ReportMetric(stripped/full, "ratio")
}
