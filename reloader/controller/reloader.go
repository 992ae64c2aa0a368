// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller rolls opted-in workloads — Deployments, StatefulSets, DaemonSets, CronJobs — when the
// data of a ConfigMap or Secret they reference changes. It owns nothing: it records on the
// workload's own metadata the digests of the data it last saw, and writes the Pod template only
// when that data changed since, so starting it never restarts anything. It caches projections
// (digests of values, references of templates: see Project), never a value.
package controller

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/stages"
)

const (
	// Name is the pattern's name; its field manager is kpatterns-reloader.
	Name = "reloader"
	// OptIn labels the workloads the reloader manages (value "true"); only those are cached.
	OptIn = "patterns.kpatterns.dev/reloader"
	// DigestsAnnotation on the workload's own metadata records a short digest of each referenced
	// source as last seen ("configmap/a=<16 hex>,secret/b=<16 hex>"): the baseline a change is
	// detected against, and the names a rollout event reports. The Pod template carries the
	// combined digest under digest.Annotation, written only on a change.
	DigestsAnnotation = "patterns.kpatterns.dev/config-digests"
	// ReasonRollingOut is the reason of the Normal event on a workload the reloader rolls.
	ReasonRollingOut = "RollingOut"
	// IgnoreAnnotation "true" on a ConfigMap or Secret: its changes never roll anything.
	IgnoreAnnotation = "patterns.kpatterns.dev/reloader-ignore"
	// PausedAnnotation "true" on a workload holds its rollouts; PausedUntilAnnotation (an RFC 3339
	// time) holds them until then. Changes made meanwhile roll once when the pause ends, also
	// across restarts: the record of what was last rolled is left as it was.
	PausedAnnotation      = "patterns.kpatterns.dev/reloader-paused"
	PausedUntilAnnotation = "patterns.kpatterns.dev/reloader-paused-until"
	// ReasonInvalidPause is the reason of the Warning event on a workload whose pause time does
	// not parse: it is held as paused.
	ReasonInvalidPause = "InvalidPause"
	// Ignored is an ignored source's entry in DigestsAnnotation.
	Ignored = "ignored"
	// ReasonSourceMissing is the reason of the Warning event on a workload one of whose required
	// sources does not exist: nothing is written or rolled until it does.
	ReasonSourceMissing = "SourceMissing"
	// ReasonInvalidSources is the reason of the Warning event on a workload whose
	// SourcesAnnotation has entries that name no source: they are left out.
	ReasonInvalidSources = "InvalidSources"
)

// Rollouts counts the rollouts the reloader made, by workload kind and namespace
// (kpatterns_reloader_rollouts_total on /metrics).
var Rollouts = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "kpatterns_reloader_rollouts_total",
	Help: "Rollouts the reloader made: Pod templates it changed for changed data of their sources.",
}, []string{"kind", "namespace"})

func init() { metrics.Registry.MustRegister(Rollouts) }

// +kubebuilder:rbac:groups="",resources=configmaps;secrets,verbs=list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments;statefulsets;daemonsets,verbs=list;watch;patch
// +kubebuilder:rbac:groups=batch,resources=cronjobs,verbs=list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// DefaultCoalesceWindow is the default of --coalesce-window.
const DefaultCoalesceWindow = time.Second

// Options are the pattern's flags of `run`.
type Options struct {
	// CoalesceWindow: a workload rolled less than this long ago is rolled again only when the
	// window has passed, with the data current then — a burst of changes makes a few rollouts,
	// not one per change. A change after a quiet window rolls at once.
	CoalesceWindow time.Duration
	// MaxRolloutsPerSecond bounds the rollouts of all workloads together (0: no bound): a change
	// to a source thousands of workloads read restarts them a few at a time. Every one is rolled
	// in the end; each waits for a slot of its own.
	MaxRolloutsPerSecond float64
	// ColdStandby: a standby starts its sources only once it leads (controller-runtime's default),
	// holding less memory while it waits and listing everything when it takes over. By default a
	// standby warms up: its caches synced and its queue filled before it leads.
	ColdStandby bool
	// WatchNamespaces are the namespaces the reloader's own cache watches (empty: all): the
	// manager's --watch-namespaces.
	WatchNamespaces []string
	// ArgoRollouts reloads Argo Rollouts' Rollouts too (RolloutKind): run --with argo-rollouts.
	ArgoRollouts bool
	// NamespaceSelector (labels; empty: every namespace) chooses the namespaces whose sources and
	// workloads are cached, and so rolled, following their labels: run --with namespace-selector
	// (NamespaceSelectorFeature).
	NamespaceSelector string
	// Namespace is the operator's, where KeySecret is (empty: app.OperatorNamespace()).
	Namespace string
	key       []byte // LoadKey's, set by Setup
}

// BindFlags binds the options to run's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.CoalesceWindow, "coalesce-window", DefaultCoalesceWindow, "least time between two rollouts of one workload; changes in between are rolled together when it has passed")
	fs.Float64Var(&o.MaxRolloutsPerSecond, "max-rollouts-per-second", 0, "most rollouts per second of all workloads together (0: no bound)")
	fs.StringVar(&o.NamespaceSelector, "namespace-selector", "", "with --with "+NamespaceSelectorFeature.Name+": the labels of the namespaces whose sources and workloads are cached and rolled (default "+DefaultNamespaceSelector+")")
	fs.BoolVar(&o.ColdStandby, "cold-standby", false, "a standby starts its sources only when it leads (less memory while it waits; a full list at takeover)")
}

// Enable turns on the features run was given (--with): ArgoRolloutsFeature, and
// NamespaceSelectorFeature with DefaultNamespaceSelector unless --namespace-selector says otherwise.
// --namespace-selector without its feature is an error: the Namespaces it reads are not granted.
func (o *Options) Enable(with []string) error {
	o.ArgoRollouts = slices.Contains(with, ArgoRolloutsFeature.Name)
	switch selecting := slices.Contains(with, NamespaceSelectorFeature.Name); {
	case !selecting && o.NamespaceSelector != "":
		return errors.New("--namespace-selector needs --with " + NamespaceSelectorFeature.Name + " (which grants listing and watching Namespaces)")
	case selecting && o.NamespaceSelector == "":
		o.NamespaceSelector = DefaultNamespaceSelector
	}
	return nil
}

// CacheOptions is the reloader's own cache (app.OwnCache) of the built-in Workloads; CacheOptionsOf
// of other kinds.
func CacheOptions(o *cache.Options) { CacheOptionsOf(Workloads)(o) }

// CacheOptionsOf is the reloader's own cache of kinds: its scheme (CacheScheme), opted-in
// workloads only, every ConfigMap and Secret (any may be referenced), all projected (Project).
func CacheOptionsOf(kinds []WorkloadKind) func(*cache.Options) {
	return func(o *cache.Options) {
		o.Scheme = CacheScheme(kinds)
		optIn := labels.SelectorFromSet(labels.Set{OptIn: "true"})
		for _, w := range kinds {
			app.CacheByObject(o, w.Cached(), cache.ByObject{Label: optIn, Transform: Project})
		}
		app.CacheByObject(o, &Source[corev1.ConfigMap]{}, cache.ByObject{Transform: Project})
		app.CacheByObject(o, &Source[corev1.Secret]{}, cache.ByObject{Transform: Project})
	}
}

// MapSourceToWorkloads maps a ConfigMap or Secret to the cached workloads of w's kind in its
// namespace that reference it, by a scan of them. Not a field index: its entries — one set per
// reference, each under two keys — took more memory than the workloads themselves
// (BenchmarkCacheHeap). The scan costs about 0.1 µs a workload (BenchmarkReferencing: 1.1 ms over
// 10,000 in one namespace, on 2 cores; the list holds the cached workloads, not copies) once per
// change of a source, and nothing for the sources that exist when the reloader starts
// (SourceChanged).
func MapSourceToWorkloads(c client.Reader, w WorkloadKind, kind Kind) handler.MapFunc {
	return func(ctx context.Context, src client.Object) []reconcile.Request {
		list := w.CachedList()
		if err := c.List(ctx, list, client.InNamespace(src.GetNamespace()), client.UnsafeDisableDeepCopy); err != nil {
			logf.FromContext(ctx).Error(err, "listing the workloads that may reference a source", "kind", w.Kind, "source", Ref{Kind: kind, Name: src.GetName()}.Key())
			return nil
		}
		var reqs []reconcile.Request
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if wl := o.(cachedWorkload); references(wl, kind, src.GetName()) {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(wl)})
			}
			return nil
		})
		return reqs
	}
}

// references says whether a cached workload references the source: its Pod template, or its
// SourcesAnnotation.
func references(obj cachedWorkload, kind Kind, name string) bool {
	w := obj.workload()
	if slices.ContainsFunc(w.References, func(r Ref) bool { return r.Kind == kind && r.Name == name }) {
		return true
	}
	if _, ok := w.annotation(SourcesAnnotation); !ok {
		return false
	}
	refs, _ := WorkloadRefs(obj)
	return slices.ContainsFunc(refs, func(r Ref) bool { return r.Kind == kind && r.Name == name })
}

// SourceChanged passes every event of a source but the creations of an informer's initial list:
// when the reloader starts, every workload is reconciled anyway, and mapping each source that
// exists then would scan the workloads once per source.
var SourceChanged = predicate.Funcs{CreateFunc: func(e event.CreateEvent) bool { return !e.IsInInitialList }}

// Setup builds the reloader's store and one controller per workload kind (Controllers) reading
// it: its own cache (CacheOptions), or with a NamespaceSelector one cache per selected namespace.
func Setup(mgr ctrl.Manager, o Options) error {
	if o.Namespace == "" {
		o.Namespace = app.OperatorNamespace()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	key, err := LoadKey(ctx, mgr.GetAPIReader(), mgr.GetClient(), o.Namespace)
	if err != nil {
		return err
	}
	o.key = key
	configure, err := uncompressed(mgr.GetConfig(), CacheOptionsOf(o.Kinds()))
	if err != nil {
		return err
	}
	if o.NamespaceSelector != "" {
		selector, err := labels.Parse(o.NamespaceSelector)
		if err != nil {
			return fmt.Errorf("--namespace-selector: %w", err)
		}
		s, err := selectNamespaces(mgr, o, selector, configure)
		if err != nil {
			return err
		}
		return controllers(mgr, s, func(w WorkloadKind) []source.Source { return []source.Source{s.source(w)} }, s.changes, o)
	}
	c, err := app.OwnCache(mgr, Name, o.WatchNamespaces, configure)
	if err != nil {
		return err
	}
	if err := mgr.Add(freeAfterSync{c}); err != nil {
		return err
	}
	ch := newChanges()
	return controllers(mgr, c, func(w WorkloadKind) []source.Source { return watches(c, w, ch) }, ch, o)
}

// freeAfterSync returns the start's garbage to the OS once, when the cache has synced: the first
// lists, decoded and reduced to the store, leave pages the Go runtime would give back only
// gradually, so the process would sit near its start's peak for a while instead of the store's size.
type freeAfterSync struct{ c cache.Cache }

func (f freeAfterSync) Start(ctx context.Context) error {
	if f.c.WaitForCacheSync(ctx) {
		debug.FreeOSMemory()
	}
	return nil
}

// NeedLeaderElection is false: a standby's cache syncs too (warm-up).
func (freeAfterSync) NeedLeaderElection() bool { return false }

// uncompressed is configure with an HTTP client of its own (one for all the reloader's caches)
// that does not ask for gzip: Go's transport decompresses a gzip response through a 32 KB window
// kept as long as the response is read, one per watch — 1.9 MB of the 11.8 MB heap of a reloader
// over 10 namespaces' caches (a heap profile of BenchmarkNamespaceSelectorHeap). The price is the
// bytes of lists and watch events on the wire, uncompressed.
func uncompressed(cfg *rest.Config, configure func(*cache.Options)) (func(*cache.Options), error) {
	cfg = rest.CopyConfig(cfg)
	cfg.DisableCompression = true
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return nil, err
	}
	return func(o *cache.Options) { configure(o); o.HTTPClient = hc }, nil
}

// controllers adds one controller per workload kind to mgr, reading through read, watching what
// sources gives for its kind, and naming the changed keys from what ch kept.
func controllers(mgr ctrl.Manager, read client.Reader, sources func(WorkloadKind) []source.Source, ch *changes, o Options) error {
	var limit *rollouts
	if o.MaxRolloutsPerSecond > 0 {
		limit = &rollouts{limiter: rate.NewLimiter(rate.Limit(o.MaxRolloutsPerSecond), 1)}
	}
	for _, w := range o.Kinds() {
		r := &Reconciler{Workload: w, Cache: read, Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Name),
			CoalesceWindow: o.CoalesceWindow, limit: limit, changes: ch, Key: o.key}
		b := ctrl.NewControllerManagedBy(mgr).Named(Name + "-" + strings.ToLower(w.Kind)).
			// A standby starts its sources too (controller-runtime's warm-up; not --cold-standby): its caches of
			// sources and workloads are synced and its queue filled before it is elected, so a new
			// leader acts on the first change without a full list. The durable record makes the
			// queued reconciles of converged workloads cost nothing.
			WithOptions(controller.Options{EnableWarmup: ptr.To(!o.ColdStandby)})
		for _, src := range sources(w) {
			b = b.WatchesRawSource(src)
		}
		if err := b.Complete(r); err != nil {
			return err
		}
	}
	return nil
}

// watches are what a controller of kind w watches in cache c: its workloads, and the sources
// they may reference (mapped to them by a scan of c; their changes kept in ch).
func watches(c cache.Cache, w WorkloadKind, ch *changes) []source.Source {
	return []source.Source{
		source.Kind(c, w.Cached(), &handler.EnqueueRequestForObject{}),
		source.Kind(c, client.Object(&Source[corev1.ConfigMap]{}), sourceEvents(c, w, ConfigMap, ch), SourceChanged),
		source.Kind(c, client.Object(&Source[corev1.Secret]{}), sourceEvents(c, w, Secret, ch), SourceChanged),
	}
}

// Reconciler keeps one kind of workload's annotations current.
type Reconciler struct {
	Workload       WorkloadKind
	Cache          client.Reader // the reloader's own cache
	Client         client.Client // writes
	Recorder       events.EventRecorder
	CoalesceWindow time.Duration
	rolled         sync.Map
	limit          *rollouts // shared by every kind's reconciler; nil: no bound
	changes        *changes  // shared too: the sources' recent changes, for the events
	Key            []byte    // the digests' (LoadKey)
	keyID          sync.Once // KeyID(Key), recorded beside the digests: id
	id             string
}

func (r *Reconciler) keyOf() string {
	r.keyID.Do(func() { r.id = KeyID(r.Key) })
	return r.id
}

// digests are the digests of the sources refs name in namespace ns, read from the cache, the
// sources read (by Ref.Key), and the required ones that do not exist (an optional one
// missing digests as "absent").
func (r *Reconciler) digests(ctx context.Context, ns string, refs []Ref) (digests []string, sources map[string]client.Object, missing []string, err error) {
	sources = map[string]client.Object{}
	digests = Digests(r.Key, refs, func(ref Ref) client.Object {
		var src client.Object = &Source[corev1.ConfigMap]{}
		if ref.Kind == Secret {
			src = &Source[corev1.Secret]{}
		}
		getErr := r.Cache.Get(ctx, client.ObjectKey{Namespace: ns, Name: ref.Name}, src)
		switch {
		case apierrors.IsNotFound(getErr):
			if !ref.Optional {
				missing = append(missing, ref.Key())
			}
			return nil
		case getErr != nil:
			err = getErr
			return nil
		}
		sources[ref.Key()] = src
		return src
	})
	return digests, sources, missing, err
}

// Reconcile compares the digests of the workload's sources with those it last saw (DigestsAnnotation)
// and writes only on a difference: the template too when the same sources' data changed (a
// rollout), the metadata alone when there was no baseline yet or the references changed (the
// template's own edit rolls those Pods, with current data). Equal digests write nothing.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	w := r.Workload
	obj := w.Cached()
	if err := r.Cache.Get(ctx, req.NamespacedName, obj); err != nil {
		r.rolled.Delete(req.NamespacedName)
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil
	}
	refs, err := WorkloadRefs(obj)
	if err != nil { // the other sources still count
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonInvalidSources, "Rollout", "%v", err)
	}
	digests, sources, missing, err := r.digests(ctx, req.Namespace, refs)
	if err != nil {
		return reconcile.Result{}, err
	}
	if len(missing) > 0 {
		// A required source is missing (deleted, or not created yet): new Pods could not start,
		// so nothing is written. Its creation reconciles again: with the data last seen, nothing
		// rolls; with other data, one rollout.
		r.Recorder.Eventf(obj, nil, corev1.EventTypeWarning, ReasonSourceMissing, "Rollout",
			"required %s missing: nothing rolls until it exists (new Pods could not start)", strings.Join(missing, ", "))
		return reconcile.Result{}, nil
	}
	now, before, recordedKey := seen(refs, digests), obj.GetAnnotations()[DigestsAnnotation], obj.GetAnnotations()[DigestKeyAnnotation]
	if now == before && (now == "" || recordedKey == r.keyOf()) {
		return reconcile.Result{}, nil
	}
	meta := map[string]string{}
	if now != "" {
		meta[DigestsAnnotation] = now
		meta[DigestKeyAnnotation] = r.keyOf()
	}
	rolled := obj.(cachedWorkload).workload().Rolled // kept as it is, unless this rolls
	var changed []string
	beforeKey := r.Key
	switch recordedKey {
	case r.keyOf():
		changed = changedSources(before, now)
	case "": // an earlier version's unkeyed record: compared as such, then rewritten keyed
		beforeKey = nil
		changed = changedSources(before, seen(refs, Digests(nil, refs, func(ref Ref) client.Object { return sources[ref.Key()] })))
	default: // made with another key (KeySecret was deleted): a new baseline
	}
	roll := before != "" && now != "" && len(changed) > 0
	if roll {
		if res, held := r.hold(obj, req); held { // nothing written: the record still differs then
			return res, nil
		}
		rolled = w.Roll(obj, digests)
	}
	// Server-side apply owns just the record and the value that rolls; that value applied
	// unchanged changes nothing, so only a rollout changes the template or spec (and generation).
	if err := r.Client.Apply(ctx, w.Apply(obj.GetName(), obj.GetNamespace(), meta, rolled), client.FieldOwner(stages.FieldManager(Name)), client.ForceOwnership); err != nil {
		return reconcile.Result{}, err
	}
	if roll {
		r.rolled.Store(req.NamespacedName, time.Now())
		Rollouts.WithLabelValues(w.Kind, req.Namespace).Inc()
		r.Recorder.Eventf(obj, nil, corev1.EventTypeNormal, ReasonRollingOut, "Rollout", "rolling out for changed data of %s",
			strings.Join(r.changes.explain(beforeKey, req.Namespace, refs, sources, before, changed), ", "))
	}
	return reconcile.Result{}, nil
}
