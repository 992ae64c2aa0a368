// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller reconciles a Bundle: one ConfigMap per entry of spec.entries, ensured by
// server-side apply, and the ConfigMaps of entries that left the spec pruned — each delete guarded
// by ownership, UID and resourceVersion.
package controller

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	"github.com/kpatterns/kpatterns/shared/stages"
	"github.com/kpatterns/kpatterns/shared/status"
)

// Name is the pattern's name: field manager kpatterns-childset, children labelled
// app.kubernetes.io/managed-by=kpatterns-childset.
const Name = "childset"

const (
	// BundleUIDLabel on a child holds its Bundle's UID: children are listed by it, never by a
	// name a later Bundle could reuse.
	BundleUIDLabel = "patterns.kpatterns.dev/bundle-uid"
	// KeyAnnotation on a child holds the entry's key (the name only holds its hash).
	KeyAnnotation = "patterns.kpatterns.dev/bundle-key"
	// ConfigMapByBundleUIDIndex indexes the cached children by BundleUIDLabel.
	ConfigMapByBundleUIDIndex = "childset.configMapByBundleUID"
)

// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=bundles,verbs=list;watch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=bundles/status,verbs=patch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=bundles/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// State is what the stages of one Bundle reconcile share.
type State struct {
	*stages.Scope[*v1alpha1.Bundle]
}

// Stages of a Bundle. Pruning does not wait for the children stage: removing what left the spec
// is safe whatever happened to the other entries.
var Stages = []stages.Stage[*State]{
	{Name: "Children", Run: children},
	{Name: "Prune", Run: prune},
}

// Reconciler reconciles Bundles through Stages.
type Reconciler struct{ stages.Clients }

// NewReconciler returns the Bundle reconciler, or an error if Stages is malformed.
func NewReconciler(mgr ctrl.Manager) (*Reconciler, error) {
	if err := stages.Validate(Stages); err != nil {
		return nil, err
	}
	return &Reconciler{stages.NewClients(mgr, Name)}, nil
}

// Reconcile fetches the Bundle, leaves a deleted one to garbage collection (its children carry its
// controller reference) and runs Stages. The status is patched once, deferred, only if it
// changed, whatever path the reconcile returns by.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	b := &v1alpha1.Bundle{}
	if err := r.Client.Get(ctx, req.NamespacedName, b); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !b.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	patcher := status.NewPatcher(r.Client, b)
	defer patcher.PatchOnReturn(ctx, b, &retErr)
	return stages.Run(ctx, patcher, &State{Scope: stages.NewScope(&r.Clients, b)}, Stages)
}

// CacheOptions keeps only this pattern's own children in the ConfigMap informer.
func CacheOptions(o *cache.Options) { stages.CacheChildren(o, Name, &corev1.ConfigMap{}) }

// IndexConfigMapByBundleUID indexes a child under its Bundle's UID.
func IndexConfigMapByBundleUID(obj client.Object) []string {
	if uid := obj.GetLabels()[BundleUIDLabel]; uid != "" {
		return []string{uid}
	}
	return nil
}

// SetupIndexes registers the field index the reconciler lists children by on indexer, the cache
// it reads (the manager's: mgr.GetFieldIndexer()).
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &corev1.ConfigMap{}, ConfigMapByBundleUIDIndex, IndexConfigMapByBundleUID)
}

// Setup registers the index and the controller: Bundle spec changes and any change to a child it
// controls (its deletion included) reconcile the Bundle.
func Setup(mgr ctrl.Manager) error {
	if err := SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r, err := NewReconciler(mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Bundle{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		Complete(r)
}

// ChildName is the ConfigMap of an entry: the Bundle's name and a hash of (Bundle UID, key), so
// it is a valid name for any key and differs for any two keys and any two Bundles — a Bundle
// deleted and re-created under the same name gets new names, never its predecessor's children.
func ChildName(b *v1alpha1.Bundle, key string) string {
	sum := sha256.Sum256([]byte(string(b.UID) + "/" + key)) // a UID holds no "/": unambiguous
	return b.Name + "-" + hex.EncodeToString(sum[:8])
}

// desired maps each entry's child name to its key.
func desired(b *v1alpha1.Bundle) map[string]string {
	names := make(map[string]string, len(b.Spec.Entries))
	for key := range b.Spec.Entries {
		names[ChildName(b, key)] = key
	}
	return names
}

func children(ctx context.Context, s *State) stages.Result {
	b := s.Object
	names := desired(b)
	b.Status.DesiredChildren, b.Status.ReadyChildren = int32(len(b.Spec.Entries)), 0
	var errs []error
	for _, name := range slices.Sorted(maps.Keys(names)) {
		key := names[name]
		ac := corev1ac.ConfigMap(name, b.Namespace).
			WithLabels(map[string]string{BundleUIDLabel: string(b.UID)}).
			WithAnnotations(map[string]string{KeyAnnotation: key}).
			WithData(map[string]string{key: b.Spec.Entries[key]})
		if err := s.Ensure(ctx, ac, &corev1.ConfigMap{}); err != nil {
			errs = append(errs, fmt.Errorf("entry %s: %w", key, err))
			continue
		}
		b.Status.ReadyChildren++
	}
	if len(errs) > 0 {
		return stages.Failed(errors.Join(errs...))
	}
	return stages.Done(fmt.Sprintf("%d/%d ConfigMaps hold their entries", b.Status.ReadyChildren, b.Status.DesiredChildren))
}

// prune deletes the children whose entry left the spec. They are listed from the cache by this
// Bundle's UID; each delete is guarded (Scope.DeleteChild): a labelled ConfigMap this Bundle does
// not control is reported, never deleted.
func prune(ctx context.Context, s *State) stages.Result {
	b := s.Object
	list := &corev1.ConfigMapList{}
	if err := s.Reader().List(ctx, list, client.InNamespace(b.Namespace), client.MatchingFields{ConfigMapByBundleUIDIndex: string(b.UID)}); err != nil {
		return stages.Failed(err)
	}
	names := desired(b)
	stale := func(o client.Object) bool { _, want := names[o.GetName()]; return !want }
	var errs []error
	for i := range list.Items {
		if err := s.DeleteChild(ctx, &list.Items[i], stale); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return stages.Failed(errors.Join(errs...))
	}
	return stages.Done("no ConfigMap of a removed entry is left")
}
