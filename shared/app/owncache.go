package app

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// namespaces holds, per manager NewManager built, the namespaces its cache watches (nil: all).
var namespaces sync.Map // manager.Manager → map[string]cache.Config

// OwnCache builds a cache a pattern keeps for itself beside the manager's: for projections — a
// transform that keeps only what this pattern reads — which the shared cache could not hold
// without starving another pattern composed into the same process (see MergeCache). It watches the
// namespaces the manager's cache watches and strips managedFields as it does; configure sets its
// per-kind options (transforms, selectors). The manager starts it with its own caches and waits
// for it to sync before any controller starts, and /readyz waits for it too. Read from it, and
// watch it with source.Kind; writes go through the manager's client as always.
func OwnCache(mgr manager.Manager, name string, configure func(*cache.Options)) (cache.Cache, error) {
	o := cache.Options{Scheme: mgr.GetScheme(), Mapper: mgr.GetRESTMapper(), HTTPClient: mgr.GetHTTPClient(),
		DefaultTransform: cache.TransformStripManagedFields()}
	if ns, ok := namespaces.Load(mgr); ok {
		o.DefaultNamespaces = ns.(map[string]cache.Config)
	}
	configure(&o)
	c, err := cache.New(mgr.GetConfig(), o)
	if err != nil {
		return nil, err
	}
	if err := mgr.Add(ownCache{c}); err != nil {
		return nil, err
	}
	err = mgr.AddReadyzCheck(name+"-cache", func(req *http.Request) error {
		ctx, cancel := context.WithTimeout(req.Context(), time.Second)
		defer cancel()
		if !c.WaitForCacheSync(ctx) {
			return errors.New(name + " cache has not synced")
		}
		return nil
	})
	return c, err
}

// ownCache makes the manager treat the cache as one of its caches (hasCache): started first,
// synced before the controllers start.
type ownCache struct{ cache.Cache }

func (c ownCache) GetCache() cache.Cache { return c.Cache }
