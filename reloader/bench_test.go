// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"slices"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/rand"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// BenchmarkReferencing maps one ConfigMap event to its Deployments with 100 and with 10,000
// opted-in Deployments in the cache (each referencing its own ConfigMap; 3 reference the one that
// changes): a scan of the namespace's cached Deployments (MapSourceToWorkloads). The cost of one
// source change grows with the workloads in its namespace: compare the 10,000/100 ratio with 100.
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
			list := &controller.WorkloadList[appsv1.Deployment]{}
			if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
				return err
			}
			if len(list.Items) != n {
				return fmt.Errorf("%d of %d cached", len(list.Items), n)
			}
			return nil
		})
		b.Run(fmt.Sprintf("deployments=%d", n), func(b *testing.B) {
			for b.Loop() {
				if got := len(mapToDeployments(ctx, hot)); got != 3 {
					b.Fatalf("%d Deployments, want 3", got)
				}
			}
		})
	}
}

// BenchmarkCacheHeap measures the live heap the reloader's own cache (CacheOptions)
// holds per cached object: an empty namespace, then 2,000 ConfigMaps of 10 keys × 100 B and 2,000
// opted-in Deployments, each referencing three of them (its own by envFrom, the next one's key by
// env valueFrom, and a shared one as a volume), each in a cache of its own; B/object is the live
// heap after a forced GC above the empty namespace's, over the objects cached. With
// KPATTERNS_HEAP_PROFILE=FILE it writes the heap profile of the full cache there.
//
//	go test -run '^$' -bench CacheHeap -benchtime 1x ./reloader/
func BenchmarkCacheHeap(b *testing.B) {
	ctx := context.Background()
	if os.Getenv("KPATTERNS_HEAP_PROFILE") != "" {
		runtime.MemProfileRate = 1 // every allocation sampled: a cache is many small objects
	}
	live := func(ns string) float64 {
		var c cache.Cache
		env.IdleManager(b, func(mgr manager.Manager) (err error) {
			c, err = app.OwnCache(mgr, "bench", []string{ns}, controller.CacheOptions)
			return err
		})
		if !c.WaitForCacheSync(testenv.Bounded(b)) {
			b.Fatal("the cache did not sync")
		}
		for _, obj := range []client.ObjectList{&controller.SourceList[corev1.ConfigMap]{}, &controller.WorkloadList[appsv1.Deployment]{}} { // every informer started
			if err := c.List(ctx, obj); err != nil {
				b.Fatal(err)
			}
		}
		runtime.GC()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(sample)
		if p := os.Getenv("KPATTERNS_HEAP_PROFILE"); p != "" && ns != "" {
			f, err := os.Create(p)
			if err != nil {
				b.Fatal(err)
			}
			defer func() { _ = f.Close() }()
			if err := pprof.WriteHeapProfile(f); err != nil {
				b.Fatal(err)
			}
		}
		return float64(sample[0].Value.Uint64())
	}
	const n = 2000
	empty := env.Namespace(b)
	full := env.Namespace(b)
	fill(b, full, n)
	for b.Loop() {
		idle := live(empty)
		b.ReportMetric((live(full)-idle)/(2*n+1), "B/object")
	}
}

// fill creates in ns n ConfigMaps of 10 keys × 100 B and n opted-in Deployments, each referencing
// three (its own by envFrom, the next one's key by env valueFrom, and a shared one as a volume).
func fill(b *testing.B, ns string, n int) {
	ctx := context.Background()
	var g errgroup.Group
	g.SetLimit(16)
	value := strings.Repeat("v", 100)
	g.Go(func() error {
		return env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}, Data: map[string]string{"k": value}})
	})
	for i := range n {
		g.Go(func() error {
			data := map[string]string{}
			for k := range 10 {
				data[fmt.Sprintf("key-%d", k)] = value
			}
			name, next := fmt.Sprintf("app-%04d", i), fmt.Sprintf("app-%04d", (i+1)%n)
			if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}); err != nil {
				return err
			}
			labels := map[string]string{"app": name}
			return env.Client.Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: map[string]string{controller.OptIn: "true"}},
				Spec: appsv1.DeploymentSpec{Replicas: new(int32), Selector: &metav1.LabelSelector{MatchLabels: labels},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
						Volumes: []corev1.Volume{{Name: "shared", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
							LocalObjectReference: corev1.LocalObjectReference{Name: "shared"}}}}},
						Containers: []corev1.Container{{Name: "app", Image: "nginx",
							EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}},
							Env: []corev1.EnvVar{{Name: "NEXT", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
								LocalObjectReference: corev1.LocalObjectReference{Name: next}, Key: "key-0"}}}}}}}}},
			})
		})
	}
	if err := g.Wait(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkNamespaceSelectorHeap measures what --namespace-selector saves: the live heap of the
// whole reloader (its caches, controllers and queues) over 10 namespaces of 200 ConfigMaps and 200
// Deployments each (fill), with 1 of the 10 selected and with all 10, above that of a reloader
// that selects none; and without a selector (one cache of every namespace). Each runs alone, and
// is measured once it reconciled every Deployment it selects, with nothing left queued.
//
//	go test -run '^$' -bench NamespaceSelectorHeap -benchtime 1x ./reloader/
func BenchmarkNamespaceSelectorHeap(b *testing.B) {
	const namespaces, perNamespace = 10, 200
	label := "kpatterns.bench/ns-" + rand.String(6)
	for i := range namespaces {
		ns := env.Namespace(b)
		if err := env.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}},
			client.RawPatch(types.MergePatchType, fmt.Appendf(nil, `{"metadata":{"labels":{%q:"%d"}}}`, label, i))); err != nil {
			b.Fatal(err)
		}
		fill(b, ns, perNamespace)
	}
	live := func(b *testing.B, selector string, selected int) float64 {
		o := defaults
		o.NamespaceSelector = selector
		added, _ := queue(b, "Deployment")
		env.ManagerWith(b, func(mgr manager.Manager) error { return controller.Setup(mgr, o) })
		testenv.Eventually(b, "every selected Deployment reconciled", func() error {
			adds, depth := queue(b, "Deployment")
			if adds-added < float64(selected*perNamespace) || depth > 0 {
				return fmt.Errorf("%v of %d Deployments queued, %v waiting", adds-added, selected*perNamespace, depth)
			}
			return nil
		})
		runtime.GC()
		sample := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		metrics.Read(sample)
		return float64(sample[0].Value.Uint64())
	}
	// Every Deployment's record is written first: what is measured are reloaders with nothing to write.
	b.Run("records", func(b *testing.B) {
		for b.Loop() {
			live(b, "", namespaces)
			testenv.Eventually(b, "every Deployment recorded", func() error {
				list := &appsv1.DeploymentList{}
				if err := env.Client.List(context.Background(), list, client.MatchingLabels{controller.OptIn: "true"}); err != nil {
					return err
				}
				for _, d := range list.Items {
					if d.Annotations[controller.DigestsAnnotation] == "" {
						return fmt.Errorf("%s/%s has no record yet", d.Namespace, d.Name)
					}
				}
				return nil
			})
		}
	})
	var none float64
	for _, c := range []struct {
		name, selector string
		selected       int
	}{{"none", label + "=none", 0}, {"1-of-10", label + "=0", 1}, {"10-of-10", label, 10}, {"no-selector", "", namespaces}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				heap := live(b, c.selector, c.selected)
				if c.name == "none" {
					none = heap
				}
				b.ReportMetric(heap/1e6, "MB-live")
				b.ReportMetric((heap-none)/1e6, "MB-above-none")
			}
		})
	}
}

// queue is how many requests the reloader's controller of kind has queued since the process
// started, and how many wait now (workqueue_adds_total, workqueue_depth).
func queue(b *testing.B, kind string) (adds, depth float64) {
	families, err := crmetrics.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	name := controller.Name + "-" + strings.ToLower(kind)
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if !slices.ContainsFunc(m.GetLabel(), func(l *dto.LabelPair) bool { return l.GetName() == "name" && l.GetValue() == name }) {
				continue
			}
			switch f.GetName() {
			case "workqueue_adds_total":
				adds += m.GetCounter().GetValue()
			case "workqueue_depth":
				depth += m.GetGauge().GetValue()
			}
		}
	}
	return adds, depth
}
