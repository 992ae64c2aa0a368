// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package stages

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
)

// Labels and annotations Ensure sets on every child.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	// AppliedAnnotation is a digest of what was last applied: a change of the desired state (a
	// key removed, say) is seen even where the child still holds every desired field.
	AppliedAnnotation = "patterns.kpatterns.dev/applied"
)

// NotOwnedError reports a same-named child that the custom resource does not control. Stale
// means it is controlled by an earlier object of the same kind and name (deleted and re-created):
// the garbage collector is about to remove it.
type NotOwnedError struct {
	Kind, Name string
	Stale      bool
}

func (e *NotOwnedError) Error() string {
	if e.Stale {
		return fmt.Sprintf("%s %s belongs to an earlier object of this name; waiting for the garbage collector to remove it", e.Kind, e.Name)
	}
	return fmt.Sprintf("%s %s exists and is not controlled by this object; it is left unchanged", e.Kind, e.Name)
}

// createOnly is a resourceVersion no stored object has (etcd revisions are int64). An apply
// carrying it creates the object if it is absent (a create wipes the field) and fails with a
// Conflict if the object exists: the API server takes a set resourceVersion as a precondition.
const createOnly = "18446744073709551615"

// ApplyConfiguration is a typed apply configuration from k8s.io/client-go/applyconfigurations.
type ApplyConfiguration interface {
	runtime.ApplyConfiguration
	GetName() *string
	GetNamespace() *string
	GetKind() *string
	GetAPIVersion() *string
}

// Ensure makes the child described by desired exist as described, with a controller
// ownerReference to the stage's object, and leaves current holding the child as it is now.
//
//   - The child is read from the cache (into current). Converged — owned, the same desired state
//     applied last time, and every desired field still in place — means no request at all.
//   - Otherwise it is server-side applied with the reconciler's field manager, forcing ownership of
//     the desired fields only: fields other managers set (an annotation a user added) are kept.
//   - A child controlled by anything else is never written: a *NotOwnedError is returned. A child
//     missing from the cache is looked up live once before it is created, so a foreign object
//     outside the (label-selected) cache is not taken over; and the apply that follows may only
//     create, so one created in between is not taken over either (the write is a Conflict).
func (s *Scope[T]) Ensure(ctx context.Context, desired ApplyConfiguration, current client.Object) error {
	r := s.c
	u, err := s.desiredUnstructured(desired)
	if err != nil {
		return err
	}
	key := client.ObjectKey{Namespace: u.GetNamespace(), Name: u.GetName()}
	err = r.Client.Get(ctx, key, current)
	switch {
	case apierrors.IsNotFound(err):
		live := &metav1.PartialObjectMetadata{}
		live.SetGroupVersionKind(u.GroupVersionKind())
		err := r.APIReader.Get(ctx, key, live)
		if err == nil && !s.owns(live) {
			return s.notOwned(u, live)
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err != nil { // NotFound: the apply must create it, never update what appeared since
			u.SetResourceVersion(createOnly)
		}
	case err != nil:
		return err
	case !s.owns(current):
		return s.notOwned(u, current)
	case contains(current, u): // the applied-digest annotation is among the desired fields
		return nil
	}
	if err := r.Client.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner(r.FieldManager), client.ForceOwnership); err != nil {
		return err
	}
	return runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, current)
}

// desiredUnstructured adds the owner reference, label and digest annotation to desired.
func (s *Scope[T]) desiredUnstructured(desired ApplyConfiguration) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(desired)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(b)
	if err := controllerutil.SetControllerReference(s.Object, u, s.c.Client.Scheme()); err != nil {
		return nil, err
	}
	labels := u.GetLabels()
	if labels == nil {
		labels = map[string]string{}
	}
	labels[ManagedByLabel] = s.c.ManagedBy
	u.SetLabels(labels)
	annotations := u.GetAnnotations()
	if annotations == nil {
		annotations = map[string]string{}
	}
	annotations[AppliedAnnotation] = hex.EncodeToString(sum[:8])
	u.SetAnnotations(annotations)
	return u, nil
}

func (s *Scope[T]) notOwned(desired *unstructured.Unstructured, child metav1.Object) *NotOwnedError {
	ref := metav1.GetControllerOf(child)
	own := desired.GetOwnerReferences()[0]
	stale := ref != nil && ref.APIVersion == own.APIVersion && ref.Kind == own.Kind && ref.Name == own.Name
	return &NotOwnedError{Kind: desired.GetKind(), Name: desired.GetName(), Stale: stale}
}

func (s *Scope[T]) owns(child metav1.Object) bool {
	ref := metav1.GetControllerOf(child)
	return ref != nil && ref.UID == s.Object.GetUID()
}

// contains reports whether every field of want is in obj with the same value: maps by key (obj
// may hold more, set by others or defaulted by the server), lists element by element. Ownership
// was checked already, so ownerReferences are left out (others may add theirs).
func contains(obj client.Object, want *unstructured.Unstructured) bool {
	have, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return false
	}
	w := want.DeepCopy()
	unstructured.RemoveNestedField(w.Object, "metadata", "ownerReferences")
	return subset(w.Object, have)
}

func subset(want, have any) bool {
	switch w := want.(type) {
	case map[string]any:
		h, ok := have.(map[string]any)
		if !ok {
			return len(w) == 0 && have == nil
		}
		for k, v := range w {
			if !subset(v, h[k]) {
				return false
			}
		}
		return true
	case []any:
		h, ok := have.([]any)
		if !ok || len(h) != len(w) {
			return false
		}
		for i := range w {
			if !subset(w[i], h[i]) {
				return false
			}
		}
		return true
	default:
		return reflect.DeepEqual(normalize(want), normalize(have))
	}
}

// normalize lets JSON numbers compare equal whatever their Go type.
func normalize(v any) any {
	switch n := v.(type) {
	case int:
		return int64(n)
	case int32:
		return int64(n)
	case float64:
		if n == float64(int64(n)) {
			return int64(n)
		}
	}
	return v
}

// DeleteChild is Ensure's counterpart for a child that is no longer wanted (pruning): it deletes
// child — as read from the cache — if this object controls it and stale(child) holds.
//
//   - A child this object does not control is never deleted (a copied label is not proof of
//     ownership): a *NotOwnedError is returned.
//   - The delete carries the UID and resourceVersion of the copy it was decided on: a child changed
//     or re-created since is never deleted by name alone. NotFound is success.
//   - On a Conflict (the preconditions failed) the child is re-read live and the decision made
//     again on what is there now, up to 3 times.
func (s *Scope[T]) DeleteChild(ctx context.Context, child client.Object, stale func(client.Object) bool) error {
	for range 3 {
		if !s.owns(child) {
			gvk, err := s.c.Client.GroupVersionKindFor(child)
			if err != nil {
				return err
			}
			return &NotOwnedError{Kind: gvk.Kind, Name: child.GetName()}
		}
		if !stale(child) {
			return nil
		}
		uid, rv := child.GetUID(), child.GetResourceVersion()
		err := s.c.Client.Delete(ctx, child, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		if err == nil || apierrors.IsNotFound(err) {
			return nil
		}
		if !apierrors.IsConflict(err) {
			return err
		}
		fresh := child.DeepCopyObject().(client.Object)
		if err := s.c.APIReader.Get(ctx, client.ObjectKeyFromObject(child), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		child = fresh
	}
	return fmt.Errorf("%s kept changing while it was being pruned; retrying", child.GetName())
}
