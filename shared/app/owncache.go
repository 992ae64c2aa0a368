// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"net/http"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/cluster"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// OwnCache builds a cache a pattern keeps for itself beside the manager's: for projections — a
// transform that keeps only what this pattern reads — which the shared cache could not hold
// without starving another pattern composed into the same process (see MergeCache). It watches
// namespaces (empty: all; pass the manager's --watch-namespaces) and strips managedFields as the
// manager's cache does; configure sets its per-kind options (transforms, selectors).
//
// The cache is that of a cluster.Cluster added to the manager, as controller-runtime's
// examples/multiclustersync adds one: the manager starts a Cluster's cache with its own and waits
// for it to sync before any controller starts; /readyz waits for it too. The Cluster shares the
// manager's scheme, REST mapper and HTTP client. Read from the cache, and watch it with
// source.Kind; writes go through the manager's client as always.
//
// configure may give the cache a scheme of its own (cache.Options.Scheme), whose types for a kind
// have only the fields the pattern reads: the cache then reads JSON, the one encoding that decodes
// into any Go type (the API's Go types are read as protobuf otherwise), and those types are what
// it serves.
func OwnCache(mgr manager.Manager, name string, namespaces []string, configure func(*cache.Options)) (cache.Cache, error) {
	cl, err := cluster.New(mgr.GetConfig(), func(o *cluster.Options) {
		o.Scheme, o.HTTPClient = mgr.GetScheme(), mgr.GetHTTPClient()
		o.MapperProvider = func(*rest.Config, *http.Client) (meta.RESTMapper, error) { return mgr.GetRESTMapper(), nil }
		o.Cache = ownCacheOptions(mgr, namespaces, configure)
		o.NewCache = newOwnCache(mgr)
	})
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(cl); err != nil {
		return nil, err
	}
	return cl.GetCache(), mgr.AddReadyzCheck(name+"-cache", synced(name+"'s own caches", cl.GetCache()))
}

// NewOwnCache builds a cache as OwnCache does, but neither adds it to the manager nor starts it:
// for a pattern that starts and stops caches as what it watches changes (the reloader's cache of
// one namespace, started when the namespace comes to match its --namespace-selector and stopped
// when it no longer does). Start it with a context that ends when it is no longer needed.
func NewOwnCache(mgr manager.Manager, namespaces []string, configure func(*cache.Options)) (cache.Cache, error) {
	return newOwnCache(mgr)(mgr.GetConfig(), ownCacheOptions(mgr, namespaces, configure))
}

// ownCacheOptions are an own cache's options: the manager's scheme, HTTP client and REST mapper,
// managedFields stripped, over namespaces (empty: all), then configure's.
func ownCacheOptions(mgr manager.Manager, namespaces []string, configure func(*cache.Options)) cache.Options {
	o := cache.Options{Scheme: mgr.GetScheme(), HTTPClient: mgr.GetHTTPClient(), Mapper: mgr.GetRESTMapper(),
		DefaultTransform: cache.TransformStripManagedFields()}
	for _, ns := range namespaces {
		if o.DefaultNamespaces == nil {
			o.DefaultNamespaces = map[string]cache.Config{}
		}
		o.DefaultNamespaces[ns] = cache.Config{}
	}
	configure(&o)
	return o
}

// newOwnCache builds an own cache: reading JSON when its scheme is not the manager's.
func newOwnCache(mgr manager.Manager) cache.NewCacheFunc {
	return func(cfg *rest.Config, opts cache.Options) (cache.Cache, error) {
		if opts.Scheme != nil && opts.Scheme != mgr.GetScheme() {
			cfg = rest.CopyConfig(cfg)
			cfg.ContentType = runtime.ContentTypeJSON
		}
		return cache.New(cfg, opts)
	}
}
