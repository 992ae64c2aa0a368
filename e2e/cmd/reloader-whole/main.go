// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command reloader-whole is the reloader with a whole-object cache: the baseline of
// TestReloaderMemory (docs/reloader-memory.md). The same controllers and RBAC as reloader's, and
// run's common flags (not the reloader's own: their defaults). Its cache holds ConfigMaps,
// Secrets and opted-in workloads as the API server sends them (without managedFields, which every
// pattern's cache drops), and its reconcilers project a source when they read it, so the digests
// — and so the writes — are the reloader's.
package main

import (
	"context"
	"reflect"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/reloader/config"
	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
)

func main() { app.Main(config.Pattern, run) }

func run(ctx context.Context, cfg *rest.Config, o app.RunOptions) error {
	opts, err := app.ManagerOptions(config.Pattern, o)
	if err != nil {
		return err
	}
	mgr, err := ctrl.NewManager(cfg, opts)
	if err != nil {
		return err
	}
	if err := app.AddProbes(mgr, opts); err != nil {
		return err
	}
	optIn := labels.SelectorFromSet(labels.Set{controller.OptIn: "true"})
	c, err := app.OwnCache(mgr, controller.Name, o.WatchNamespaces, func(co *cache.Options) {
		for _, w := range controller.Workloads {
			app.CacheByObject(co, w.New(), cache.ByObject{Label: optIn})
		}
	})
	if err != nil {
		return err
	}
	if err := controller.SetupIndexes(ctx, c); err != nil {
		return err
	}
	err = controller.Controllers(mgr, c, projecting{c}, controller.Options{CoalesceWindow: controller.DefaultCoalesceWindow})
	if err != nil {
		return err
	}
	return app.Start(ctx, mgr)
}

// projecting reads whole objects and hands the reconcilers ConfigMaps and Secrets as
// controller.Project makes them.
type projecting struct{ client.Reader }

func (p projecting) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if err := p.Reader.Get(ctx, key, obj, opts...); err != nil {
		return err
	}
	switch obj.(type) {
	case *corev1.ConfigMap, *corev1.Secret:
		projected, err := controller.Project(obj)
		if err != nil {
			return err
		}
		reflect.ValueOf(obj).Elem().Set(reflect.ValueOf(projected).Elem())
	}
	return nil
}
