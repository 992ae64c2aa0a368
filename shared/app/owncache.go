// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// OwnCache builds a cache a pattern keeps for itself beside the manager's: for projections — a
// transform that keeps only what this pattern reads — which the shared cache could not hold
// without starving another pattern composed into the same process (see MergeCache). It watches
// namespaces (empty: all; pass the manager's --watch-namespaces) and strips managedFields as the
// manager's cache does; configure sets its per-kind options (transforms, selectors). The manager starts it with its own caches and waits
// for it to sync before any controller starts, and /readyz waits for it too. Read from it, and
// watch it with source.Kind; writes go through the manager's client as always.
func OwnCache(mgr manager.Manager, name string, namespaces []string, configure func(*cache.Options)) (cache.Cache, error) {
	o := cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		DefaultTransform: cache.TransformStripManagedFields()}
	for _, ns := range namespaces {
		if o.DefaultNamespaces == nil {
			o.DefaultNamespaces = map[string]cache.Config{}
		}
		o.DefaultNamespaces[ns] = cache.Config{}
	}
	configure(&o)
	c, err := cache.New(mgr.GetConfig(), o)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(ownCache{c}); err != nil {
		return nil, err
	}
	return c, mgr.AddReadyzCheck(name+"-cache", synced(name+"'s own caches", c))
}

// ownCache makes the manager treat the cache as one of its caches (hasCache): started first,
// synced before the controllers start.
type ownCache struct{ cache.Cache }

func (c ownCache) GetCache() cache.Cache { return c.Cache }
