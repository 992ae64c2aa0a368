// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller mirrors every ConfigMap labelled patterns.kpatterns.dev/mirror=true into a
// controller-owned child <source>-mirror in the same namespace, replacing the child's data and
// binaryData as a whole so that keys deleted from the source disappear from the child.
package controller

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/app"
)

const (
	// Name is the pattern's name.
	Name = "mirror"
	// Label marks sources (value "true", set by users) and children (value "child", set here).
	Label = "patterns.kpatterns.dev/mirror"
	// Source and Child are the values of Label.
	Source = "true"
	Child  = "child"
	// Suffix is appended to a source's name to name its child.
	Suffix = "-mirror"
	// ReasonChildConflict is the reason of the Warning event for a foreign <source>-mirror.
	ReasonChildConflict = "ChildConflict"
	// ForeignRetry is how often a source whose <source>-mirror is foreign and unlabelled (so not in
	// the cache, and its removal raises no event) tries again.
	ForeignRetry = 2 * time.Minute
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;update;delete
// Setting blockOwnerDeletion on a child needs this where OwnerReferencesPermissionEnforcement is on.
// +kubebuilder:rbac:groups="",resources=configmaps/finalizers,verbs=update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Reconciler converges one source ConfigMap's child.
type Reconciler struct {
	Client    client.Client // reads from the informer cache
	APIReader client.Reader // live reads, only where the contract says so
	Recorder  events.EventRecorder
}

// CacheOptions keeps only sources and children in the ConfigMap informer.
func CacheOptions(o *cache.Options) {
	req, err := labels.NewRequirement(Label, selection.In, []string{Source, Child})
	if err != nil {
		panic(err) // constant input
	}
	app.CacheByObject(o, &corev1.ConfigMap{}, cache.ByObject{Label: labels.NewSelector().Add(*req)})
}

// Setup registers the controller with a manager whose cache was built with CacheOptions.
func Setup(mgr ctrl.Manager) error {
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(Name)}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		Watches(&corev1.ConfigMap{}, EnqueueSource).
		Complete(r)
}

// EnqueueSource is the ConfigMap event handler: it enqueues the source each ConfigMap event
// concerns (MapConfigMapToSource). A child's create or update is enqueued at low priority: it is
// mostly the echo of mirror's own write and finds nothing to do, so with a backlog (a start over many sources) the sources still waiting
// for their child go first instead of each echo taking a turn between them. A child's deletion,
// and every source event, keep their usual priority (low only for the initial list and resyncs).
var EnqueueSource = handler.Funcs{
	CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueue(ctx, q, e.Object)
	},
	UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		enqueue(ctx, q, e.ObjectOld)
		enqueue(ctx, q, e.ObjectNew)
	},
	DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range MapConfigMapToSource(ctx, e.Object) {
			q.Add(req)
		}
	},
}

func enqueue(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], obj client.Object) {
	pq, ok := q.(priorityqueue.PriorityQueue[reconcile.Request])
	for _, req := range MapConfigMapToSource(ctx, obj) {
		if ok && obj.GetLabels()[Label] == Child {
			pq.AddWithOpts(priorityqueue.AddOpts{Priority: ptr.To(handler.LowPriority)}, req)
		} else {
			q.Add(req)
		}
	}
}

// MapConfigMapToSource maps a cached ConfigMap event to the source it concerns: a source to itself, a child
// (owned or not) to the source its name derives from. The queue is keyed by source, so a burst
// of events for one source and its child coalesces into one reconcile.
func MapConfigMapToSource(_ context.Context, obj client.Object) []reconcile.Request {
	name := obj.GetName()
	switch obj.GetLabels()[Label] {
	case Source:
	case Child:
		if !strings.HasSuffix(name, Suffix) {
			return nil
		}
		name = strings.TrimSuffix(name, Suffix)
	default:
		return nil
	}
	return []reconcile.Request{{NamespacedName: client.ObjectKey{Namespace: obj.GetNamespace(), Name: name}}}
}

// Reconcile converges the child of the source named by req.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	childKey := client.ObjectKey{Namespace: req.Namespace, Name: req.Name + Suffix}
	src := &corev1.ConfigMap{}
	err := r.Client.Get(ctx, req.NamespacedName, src)
	if apierrors.IsNotFound(err) || (err == nil && src.Labels[Label] != Source) {
		return reconcile.Result{}, r.unmirror(ctx, req.NamespacedName, childKey)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	if src.DeletionTimestamp != nil {
		return reconcile.Result{}, nil // the garbage collector removes the child with it
	}

	child := &corev1.ConfigMap{}
	err = r.Client.Get(ctx, childKey, child)
	if apierrors.IsNotFound(err) {
		return r.create(ctx, src, childKey)
	}
	if err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{}, r.converge(ctx, src, child)
}

// converge replaces the child's data when it differs, guarded by the resourceVersion it was read
// with: a concurrent writer makes the update fail with a conflict, and the queue retries with a
// fresh read instead of overwriting the other write.
func (r *Reconciler) converge(ctx context.Context, src, child *corev1.ConfigMap) error {
	owner := metav1.GetControllerOf(child)
	if owner == nil || owner.UID != src.UID {
		if owner != nil && owner.Kind == "ConfigMap" && owner.Name == src.Name {
			return nil // the child of an earlier source of this name: the garbage collector removes it
		}
		r.conflict(src, child.Name)
		return nil
	}
	if converged(src, child) {
		return nil
	}
	updated := child.DeepCopy()
	if err := desired(src, updated, r.Client.Scheme()); err != nil {
		return err
	}
	if err := r.Client.Update(ctx, updated); err != nil {
		return fmt.Errorf("updating %s: %w", child.Name, err)
	}
	return nil
}

// create creates a missing child. AlreadyExists means a child outside the cache: a foreign object
// (reported, never touched) or ours without our label (repaired); the one live read tells which.
func (r *Reconciler) create(ctx context.Context, src *corev1.ConfigMap, key client.ObjectKey) (reconcile.Result, error) {
	child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace}}
	if err := desired(src, child, r.Client.Scheme()); err != nil {
		return reconcile.Result{}, err
	}
	err := r.Client.Create(ctx, child)
	if !apierrors.IsAlreadyExists(err) {
		return reconcile.Result{}, err
	}
	live := &corev1.ConfigMap{}
	if err := r.APIReader.Get(ctx, key, live); err != nil {
		return reconcile.Result{}, err
	}
	if owner := metav1.GetControllerOf(live); owner != nil && owner.UID == src.UID {
		return reconcile.Result{}, r.converge(ctx, src, live)
	}
	r.conflict(src, key.Name)
	// A foreign child without our label is not in the cache, so its removal raises no event here.
	return reconcile.Result{RequeueAfter: ForeignRetry}, nil
}

// unmirror deletes the child of a ConfigMap that is no longer a source (label removed). A source
// that is gone from the cache may have been deleted, relabelled, or the cache may lag: one live
// read of its metadata tells. A deleted source's child is left to the garbage collector.
func (r *Reconciler) unmirror(ctx context.Context, srcKey, childKey client.ObjectKey) error {
	child := &corev1.ConfigMap{}
	if err := r.Client.Get(ctx, childKey, child); err != nil {
		return client.IgnoreNotFound(err)
	}
	owner := metav1.GetControllerOf(child)
	if owner == nil || owner.Kind != "ConfigMap" || owner.Name != srcKey.Name {
		return nil
	}
	live := &metav1.PartialObjectMetadata{}
	live.SetGroupVersionKind(corev1.SchemeGroupVersion.WithKind("ConfigMap"))
	if err := r.APIReader.Get(ctx, srcKey, live); err != nil {
		return client.IgnoreNotFound(err)
	}
	if live.UID != owner.UID || live.Labels[Label] == Source {
		return nil // another source's child (garbage collected), or the cache has not caught up
	}
	err := r.Client.Delete(ctx, child, client.Preconditions{UID: &child.UID, ResourceVersion: &child.ResourceVersion})
	return client.IgnoreNotFound(err)
}

func (r *Reconciler) conflict(src *corev1.ConfigMap, child string) {
	r.Recorder.Eventf(src, nil, corev1.EventTypeWarning, ReasonChildConflict, "Mirror",
		"ConfigMap %s exists and is not owned by this source; it is left unchanged", child)
}

// desired sets what the mirror owns on a child: its label, the controller ownerReference, and the
// complete data and binaryData of the source. A child another controller owns is an error; the
// callers never pass one (they report it as a conflict instead).
func desired(src, child *corev1.ConfigMap, scheme *runtime.Scheme) error {
	if child.Labels == nil {
		child.Labels = map[string]string{}
	}
	child.Labels[Label] = Child
	if err := controllerutil.SetControllerReference(src, child, scheme); err != nil {
		return err
	}
	child.Data = src.Data
	child.BinaryData = src.BinaryData
	return nil
}

// converged reports whether a child owned by src needs no write.
func converged(src, child *corev1.ConfigMap) bool {
	return child.Labels[Label] == Child &&
		apiequality.Semantic.DeepEqual(emptyNil(src.Data), emptyNil(child.Data)) &&
		apiequality.Semantic.DeepEqual(emptyNil(src.BinaryData), emptyNil(child.BinaryData))
}

func emptyNil[V any](m map[string]V) map[string]V {
	if len(m) == 0 {
		return nil
	}
	return m
}
