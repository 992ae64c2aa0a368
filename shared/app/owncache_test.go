// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics/server"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// OwnCache's cache is one the manager starts with its own caches and waits for before anything
// else starts: a runnable (as a controller is) finds its informer synced and every object that
// existed before the start in it, and its scope (a label selector) holds.
func TestOwnCacheSyncsBeforeRunnables(t *testing.T) {
	env, err := testenv.Start(testenv.Pattern{Pattern: pattern})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	const n = 50
	for i := range n + 1 { // one more, outside the cache's scope
		own := map[string]string{"own": "yes"}
		if i == n {
			own = nil
		}
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("own-%d", i), Namespace: testenv.Namespace, Labels: own}}
		if err := env.Client.Create(ctx, cm); err != nil {
			t.Fatal(err)
		}
	}
	mgr, err := ctrl.NewManager(env.Admin, ctrl.Options{Metrics: server.Options{BindAddress: "0"}, HealthProbeBindAddress: "0"})
	if err != nil {
		t.Fatal(err)
	}
	own, err := app.OwnCache(mgr, "own", []string{testenv.Namespace}, func(o *cache.Options) {
		app.CacheByObject(o, &corev1.ConfigMap{}, cache.ByObject{Label: labels.SelectorFromSet(labels.Set{"own": "yes"})})
	})
	if err != nil {
		t.Fatal(err)
	}
	informer, err := own.GetInformer(ctx, &corev1.ConfigMap{}) // before the start: created, not waited for
	if err != nil {
		t.Fatal(err)
	}
	type seen struct {
		synced bool
		items  int
		err    error
	}
	first := make(chan seen, 1)
	err = mgr.Add(manager.RunnableFunc(func(ctx context.Context) error {
		s := seen{synced: informer.HasSynced()}
		list := &corev1.ConfigMapList{}
		s.err = own.List(ctx, list, client.InNamespace(testenv.Namespace))
		s.items = len(list.Items)
		first <- s
		return nil
	}))
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = mgr.Start(ctx) }()
	select {
	case s := <-first:
		if !s.synced || s.err != nil || s.items != n {
			t.Fatalf("a runnable's first look at the own cache: synced %t, %d ConfigMaps (%v), want synced and the %d in its scope", s.synced, s.items, s.err, n)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the manager did not start the runnable within 2 minutes")
	}
}
