// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"reflect"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// worker runs the pattern's controllers over one set of ranges, in a manager of its own: its
// cache lists and watches only those ranges. A change of ranges stops it (its controllers finish
// the reconciles in flight) and starts another, which lists its ranges afresh.
type worker struct {
	cancel context.CancelFunc
	done   chan error
	once   sync.Once
	err    error // what stop returned, returned again by a later stop
}

// startWorker starts a worker for held. base are the manager options of the process (cache
// defaults, controller options); its leader election, metrics, probes and webhooks stay the
// process's, and grace bounds how long the worker's controllers may take to stop.
func startWorker(ctx context.Context, parent manager.Manager, o Options, base manager.Options, held Set, grace time.Duration) (*worker, error) {
	opts := manager.Options{
		Scheme:                  parent.GetScheme(),
		MapperProvider:          func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return parent.GetRESTMapper(), nil },
		Cache:                   base.Cache,
		Controller:              base.Controller,
		Metrics:                 metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress:  "0",
		GracefulShutdownTimeout: &grace,
	}
	opts.Cache.ByObject = maps.Clone(opts.Cache.ByObject)
	o.CacheOptions(&opts.Cache)
	// One controller name per worker at a time: the previous worker has stopped.
	opts.Controller.SkipNameValidation = ptr.To(true)
	switch o.Mode {
	case Server:
		sel := held.Selector(o.Field)
		opts.Cache.NewInformer = func(lw toolscache.ListerWatcher, obj runtime.Object, resync time.Duration, idx toolscache.Indexers) toolscache.SharedIndexInformer {
			if sameType(obj, o.Object) {
				lw = withShardSelector(lw, sel)
			}
			return toolscache.NewSharedIndexInformer(lw, obj, resync, idx)
		}
	case Label:
		by := cache.ByObject{}
		for obj, b := range opts.Cache.ByObject {
			if sameType(obj, o.Object) {
				by = b
				delete(opts.Cache.ByObject, obj)
			}
		}
		if by.Label == nil { // the pattern caches the kind whole
			by.Label = labels.Everything()
		}
		by.Label = withRequirement(by.Label, ShardLabel, selection.In, held.Values()...)
		opts.Cache.ByObject[o.Object] = by
		opts.NewClient = labellingClient(o)
	}
	mgr, err := manager.New(parent.GetConfig(), opts)
	if err != nil {
		return nil, err
	}
	if err := o.Setup(mgr); err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(ctx)
	w := &worker{cancel: cancel, done: make(chan error, 1)}
	go func() { w.done <- mgr.Start(ctx) }()
	return w, nil
}

// stop stops the worker and waits for it: when it returns nil, no reconcile of it runs. An error
// means a reconcile may still run (it outlived the grace period): the member must not give its
// ranges up, only exit. A second stop returns what the first did, at once.
func (w *worker) stop() error {
	if w == nil {
		return nil
	}
	w.once.Do(func() {
		w.cancel()
		w.err = <-w.done
	})
	return w.err
}

// withShardSelector makes lw list and watch only the ranges of sel (Server mode). This, and the
// cache option that lets it in (NewInformer), is all controller-runtime needs here; its cache
// options take label and field selectors but no shard selector yet.
func withShardSelector(lw toolscache.ListerWatcher, sel string) toolscache.ListerWatcher {
	inner := toolscache.ToListerWatcherWithContext(lw)
	return &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
			opts.ShardSelector = sel
			return inner.ListWithContext(ctx, opts)
		},
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			opts.ShardSelector = sel
			return inner.WatchWithContext(ctx, opts)
		},
	}
}

// labellingClient (Label mode) labels every object of the split kind that the pattern creates
// with its range, so that a child (in its owner's range: labelKey) is in its member's cache from
// its first event, with no write of the sharder's.
func labellingClient(o Options) client.NewClientFunc {
	return func(cfg *rest.Config, co client.Options) (client.Client, error) {
		c, err := client.NewWithWatch(cfg, co)
		if err != nil {
			return nil, err
		}
		return interceptor.NewClient(c, interceptor.Funcs{
			Create: func(ctx context.Context, c client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
				if sameType(obj, o.Object) {
					l := obj.GetLabels()
					if l == nil {
						l = map[string]string{}
					}
					l[ShardLabel] = rangeLabel(obj)
					obj.SetLabels(l)
				}
				return c.Create(ctx, obj, opts...)
			},
		}), nil
	}
}

// checkServer fails unless the API server filters by shard selector: one that does not know it
// (the feature gate ShardedListAndWatch off) ignores the parameter and would send every member
// everything. A list that the selector filtered says so in its shardInfo.
func checkServer(ctx context.Context, mgr manager.Manager, o Options) error {
	gvk, err := apiutil.GVKForObject(o.Object, mgr.GetScheme())
	if err != nil {
		return err
	}
	gvk.Kind += "List"
	obj, err := mgr.GetScheme().New(gvk)
	if err != nil {
		return err
	}
	list, ok := obj.(client.ObjectList)
	if !ok {
		return fmt.Errorf("shard: %s is not a list", gvk)
	}
	raw := &metav1.ListOptions{ShardSelector: All.Selector(o.Field)}
	if err := mgr.GetAPIReader().List(ctx, list, &client.ListOptions{Raw: raw, Limit: 1}); err != nil {
		return fmt.Errorf("shard: listing %s with a shard selector: %w", gvk.Kind, err)
	}
	if sl, ok := list.(metav1.ShardedListInterface); !ok || sl.GetShardInfo() == nil {
		return fmt.Errorf("shard: the API server ignored the shard selector: enable its feature gate ShardedListAndWatch, or shard by label (--sharding=label)")
	}
	return nil
}

func sameType(a, b runtime.Object) bool { return reflect.TypeOf(a) == reflect.TypeOf(b) }
