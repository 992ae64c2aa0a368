// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// The feature namespace-selector: the reloader caches sources and workloads only in the namespaces
// whose labels match --namespace-selector, one cache per namespace, started when a namespace comes
// to match and stopped when it no longer does. A cache over all namespaces, filtered afterwards,
// would hold every namespace's objects all the same (Stakater Reloader #321); a cache over a list
// of namespaces fixed at start would not follow their labels.

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kpatterns/kpatterns/shared/app"
)

// NamespaceSelectorFeature is `--with namespace-selector`: only then may the reloader list and
// watch Namespaces (config/rbac/features.yaml), and only then does run take --namespace-selector.
var NamespaceSelectorFeature = app.Feature{Name: "namespace-selector",
	Help: "cache and roll only in the namespaces whose labels match --namespace-selector (default " + DefaultNamespaceSelector + ")"}

// DefaultNamespaceSelector selects the namespaces the feature namespace-selector caches when
// --namespace-selector is not given.
const DefaultNamespaceSelector = OptIn + "=true"

// ReasonNotSelected is the reason of the Normal event on a Namespace whose labels stopped matching
// --namespace-selector: its cache is stopped, and nothing in it rolls until they match again.
const ReasonNotSelected = "NotSelected"

// SelectedNamespaces is the number of namespaces the reloader caches under --namespace-selector
// (kpatterns_reloader_selected_namespaces on /metrics).
var SelectedNamespaces = prometheus.NewGauge(prometheus.GaugeOpts{
	Name: "kpatterns_reloader_selected_namespaces",
	Help: "Namespaces whose labels match --namespace-selector: the reloader caches their sources and workloads.",
})

func init() { metrics.Registry.MustRegister(SelectedNamespaces) }

// cacheSyncTimeout bounds the first list of a namespace's cache, as controller-runtime's
// CacheSyncTimeout bounds a controller's: past it the namespace is retried with backoff.
const cacheSyncTimeout = 2 * time.Minute

// namespaces are the caches of the selected namespaces: the namespace controller's reconciler,
// the reader the workload reconcilers read through, and each workload controller's source.
type namespaces struct {
	mgr       ctrl.Manager
	selector  labels.Selector
	kinds     []WorkloadKind
	configure func(*cache.Options) // a namespace's cache (CacheOptionsOf, uncompressed)
	meta      client.Reader        // the namespaces' metadata
	recorder  events.EventRecorder
	changes   *changes        // the sources' recent changes, for the rollout events
	ctx       context.Context // the manager's (Start): every namespace's cache ends with it
	started   chan struct{}   // closed once ctx is set

	mu      sync.RWMutex
	caches  map[string]selected // by namespace
	sources []*namespaceSource  // one per workload controller
}

// selected is one selected namespace's cache and what stops it.
type selected struct {
	cache.Cache
	stop context.CancelFunc
}

// selectNamespaces adds to mgr the controller that follows the namespaces' labels, and returns the
// reader of their caches and the source of each workload kind's controller, watching them.
func selectNamespaces(mgr ctrl.Manager, o Options, selector labels.Selector, configure func(*cache.Options)) (*namespaces, error) {
	if len(o.WatchNamespaces) > 0 {
		return nil, errors.New("--namespace-selector chooses namespaces by their labels: it cannot be combined with --watch-namespaces")
	}
	nsCache, err := app.OwnCache(mgr, Name+"-namespaces", nil, func(*cache.Options) {})
	if err != nil {
		return nil, err
	}
	s := &namespaces{mgr: mgr, selector: selector, kinds: o.Kinds(), configure: configure, meta: nsCache, recorder: mgr.GetEventRecorder(Name), changes: newChanges(),
		started: make(chan struct{}), caches: map[string]selected{}}
	SelectedNamespaces.Set(0)
	if err := mgr.Add(s); err != nil {
		return nil, err
	}
	// A standby starts the selected namespaces' caches too, unless --cold-standby: as warm as the
	// reloader's one cache is without a selector.
	return s, ctrl.NewControllerManagedBy(mgr).Named(Name + "-namespaces").
		// Several namespaces' caches list at once: a start waits for the API server, not the CPU.
		WithOptions(controller.Options{NeedLeaderElection: ptr.To(o.ColdStandby), MaxConcurrentReconciles: 4}).
		WatchesRawSource(source.Kind(nsCache, client.Object(namespaceMetadata()), &handler.EnqueueRequestForObject{}, predicate.LabelChangedPredicate{})).
		Complete(s)
}

// namespaceMetadata is a Namespace as the metadata client reads it: labels are all that is read.
func namespaceMetadata() *metav1.PartialObjectMetadata {
	ns := &metav1.PartialObjectMetadata{}
	ns.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("Namespace"))
	return ns
}

// Start keeps the manager's context, which every namespace's cache is started under.
func (s *namespaces) Start(ctx context.Context) error {
	s.ctx = ctx
	close(s.started)
	<-ctx.Done()
	return nil
}

// NeedLeaderElection is false: a standby's namespace controller may start caches before it leads.
func (s *namespaces) NeedLeaderElection() bool { return false }

// Reconcile starts the cache of a namespace whose labels match and stops that of one whose labels
// no longer match (or that is gone).
func (s *namespaces) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	select {
	case <-s.started:
	case <-ctx.Done():
		return reconcile.Result{}, ctx.Err()
	}
	ns := namespaceMetadata()
	err := s.meta.Get(ctx, req.NamespacedName, ns)
	if client.IgnoreNotFound(err) != nil {
		return reconcile.Result{}, err
	}
	want := err == nil && s.selector.Matches(labels.Set(ns.GetLabels()))
	s.mu.RLock()
	_, has := s.caches[req.Name]
	s.mu.RUnlock()
	switch {
	case want && !has:
		return reconcile.Result{}, s.start(ctx, req.Name)
	case !want && has:
		s.mu.Lock()
		s.caches[req.Name].stop()
		delete(s.caches, req.Name)
		SelectedNamespaces.Set(float64(len(s.caches)))
		s.mu.Unlock()
		if err == nil {
			s.recorder.Eventf(ns, nil, corev1.EventTypeNormal, ReasonNotSelected, "Select",
				"labels no longer match %s: the reloader stopped caching this namespace's sources and workloads", s.selector)
		}
	}
	return reconcile.Result{}, nil
}

// start starts namespace ns's cache, waits for its first list, and has every workload controller
// watch it.
func (s *namespaces) start(ctx context.Context, ns string) error {
	c, err := app.NewOwnCache(s.mgr, []string{ns}, s.configure)
	if err != nil {
		return err
	}
	cacheCtx, stop := context.WithCancel(s.ctx)
	go func() {
		if err := c.Start(cacheCtx); err != nil {
			logf.FromContext(ctx).Error(err, "the cache of a selected namespace stopped", "namespace", ns)
		}
	}()
	syncCtx, cancel := context.WithTimeout(ctx, cacheSyncTimeout)
	defer cancel()
	for _, obj := range cachedKinds(s.kinds) { // every informer started now: all synced before any is watched
		if _, err := c.GetInformer(syncCtx, obj); err != nil {
			stop()
			return fmt.Errorf("namespace %s: %w", ns, err)
		}
	}
	if !c.WaitForCacheSync(syncCtx) {
		stop()
		return fmt.Errorf("the cache of namespace %s did not sync within %s (is listing its sources or workloads forbidden?)", ns, cacheSyncTimeout)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.caches[ns] = selected{Cache: c, stop: stop}
	SelectedNamespaces.Set(float64(len(s.caches)))
	for _, src := range s.sources {
		if err := src.watch(c); err != nil {
			return err
		}
	}
	return nil
}

// cachedKinds are the objects a namespace's cache holds: the workload kinds', and the sources.
func cachedKinds(kinds []WorkloadKind) []client.Object {
	objs := []client.Object{&Source[corev1.ConfigMap]{}, &Source[corev1.Secret]{}}
	for _, w := range kinds {
		objs = append(objs, w.Cached())
	}
	return objs
}

// Get reads from the cache of key's namespace: NotFound when it is not selected.
func (s *namespaces) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	s.mu.RLock()
	c, ok := s.caches[key.Namespace]
	s.mu.RUnlock()
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{}, key.Name)
	}
	return c.Get(ctx, key, obj, opts...)
}

// List lists one namespace's cache: nothing when it is not selected.
func (s *namespaces) List(ctx context.Context, list client.ObjectList, opts ...client.ListOption) error {
	ns := (&client.ListOptions{}).ApplyOptions(opts).Namespace
	if ns == "" {
		return errors.New("the reloader's namespace caches are listed one namespace at a time")
	}
	s.mu.RLock()
	c, ok := s.caches[ns]
	s.mu.RUnlock()
	if !ok {
		return nil
	}
	return c.List(ctx, list, opts...)
}

// source is a workload controller's source over every selected namespace's cache, now and later.
func (s *namespaces) source(w WorkloadKind) source.Source {
	src := &namespaceSource{s: s, w: w}
	s.mu.Lock()
	s.sources = append(s.sources, src)
	s.mu.Unlock()
	return src
}

// namespaceSource is one workload controller's source: once the controller starts it, it watches
// each selected namespace's cache (watches) as that cache starts. A stopped cache sends nothing
// more; its informers' handlers go with it.
type namespaceSource struct {
	s     *namespaces // its lock guards ctx and queue too
	w     WorkloadKind
	ctx   context.Context
	queue workqueue.TypedRateLimitingInterface[reconcile.Request]
}

// Start watches the caches started so far, and those started later as they start.
func (src *namespaceSource) Start(ctx context.Context, queue workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
	src.s.mu.Lock()
	defer src.s.mu.Unlock()
	src.ctx, src.queue = ctx, queue
	for _, c := range src.s.caches {
		if err := src.watch(c); err != nil {
			return err
		}
	}
	return nil
}

// watch has the controller watch cache c (synced), once it started this source; with the
// namespaces' lock held.
func (src *namespaceSource) watch(c cache.Cache) error {
	if src.queue == nil {
		return nil
	}
	for _, kind := range watches(c, src.w, src.s.changes) {
		// Not waited for: c's informers synced, so its events flow as soon as the handler is added,
		// and a wait (client-go polls every 100 ms) would hold every reader of the caches.
		if err := kind.Start(src.ctx, src.queue); err != nil {
			return err
		}
	}
	return nil
}

func (src *namespaceSource) String() string {
	return "the selected namespaces' " + src.w.Kind + "s and sources"
}
