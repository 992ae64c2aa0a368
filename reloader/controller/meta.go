// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"maps"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Meta is the metadata of a Source or Workload: what the reloader reads of an object's metadata,
// in place of metav1.ObjectMeta (104 bytes, not 232, and the decoder skips labels, owner
// references and managed fields). It is the object's metav1.Object: the fields it does not hold
// read as empty, and setting them does nothing.
type Meta struct {
	Name              string       `json:"name,omitempty"`
	Namespace         string       `json:"namespace,omitempty"`
	UID               types.UID    `json:"uid,omitempty"`
	ResourceVersion   string       `json:"resourceVersion,omitempty"`
	DeletionTimestamp *metav1.Time `json:"deletionTimestamp,omitempty"`
	// Annotations are as the API server sends them, until Project keeps only the reloader's, as
	// key-value pairs in kept (a map of one entry takes ten times the space).
	Annotations map[string]string `json:"annotations,omitempty"`
	kept        []string
}

// keep replaces Annotations with the pairs of those of keys it holds; keeping again keeps them.
func (m *Meta) keep(keys ...string) {
	if m.Annotations == nil {
		return
	}
	m.kept = nil
	for _, k := range keys {
		if v, ok := m.Annotations[k]; ok {
			m.kept = append(m.kept, k, v)
		}
	}
	m.kept, m.Annotations = slices.Clip(m.kept), nil
}

// annotation is the value of annotation key, projected or not.
func (m *Meta) annotation(key string) (string, bool) {
	for i := 0; i < len(m.kept); i += 2 {
		if m.kept[i] == key {
			return m.kept[i+1], true
		}
	}
	v, ok := m.Annotations[key]
	return v, ok
}

func (m *Meta) deepCopy() Meta {
	out := *m
	out.DeletionTimestamp = m.DeletionTimestamp.DeepCopy()
	out.Annotations = maps.Clone(m.Annotations)
	out.kept = slices.Clone(m.kept)
	return out
}

func (m *Meta) GetName() string                             { return m.Name }
func (m *Meta) SetName(name string)                         { m.Name = name }
func (m *Meta) GetNamespace() string                        { return m.Namespace }
func (m *Meta) SetNamespace(namespace string)               { m.Namespace = namespace }
func (m *Meta) GetUID() types.UID                           { return m.UID }
func (m *Meta) SetUID(uid types.UID)                        { m.UID = uid }
func (m *Meta) GetResourceVersion() string                  { return m.ResourceVersion }
func (m *Meta) SetResourceVersion(version string)           { m.ResourceVersion = version }
func (m *Meta) GetDeletionTimestamp() *metav1.Time          { return m.DeletionTimestamp }
func (m *Meta) SetDeletionTimestamp(timestamp *metav1.Time) { m.DeletionTimestamp = timestamp }
func (m *Meta) SetAnnotations(annotations map[string]string) {
	m.Annotations, m.kept = annotations, nil
}
func (m *Meta) GetGenerateName() string                       { return "" }
func (m *Meta) SetGenerateName(string)                        {}
func (m *Meta) GetGeneration() int64                          { return 0 }
func (m *Meta) SetGeneration(int64)                           {}
func (m *Meta) GetSelfLink() string                           { return "" }
func (m *Meta) SetSelfLink(string)                            {}
func (m *Meta) GetCreationTimestamp() metav1.Time             { return metav1.Time{} }
func (m *Meta) SetCreationTimestamp(metav1.Time)              {}
func (m *Meta) GetDeletionGracePeriodSeconds() *int64         { return nil }
func (m *Meta) SetDeletionGracePeriodSeconds(*int64)          {}
func (m *Meta) GetLabels() map[string]string                  { return nil }
func (m *Meta) SetLabels(map[string]string)                   {}
func (m *Meta) GetFinalizers() []string                       { return nil }
func (m *Meta) SetFinalizers([]string)                        {}
func (m *Meta) GetOwnerReferences() []metav1.OwnerReference   { return nil }
func (m *Meta) SetOwnerReferences([]metav1.OwnerReference)    {}
func (m *Meta) GetManagedFields() []metav1.ManagedFieldsEntry { return nil }
func (m *Meta) SetManagedFields([]metav1.ManagedFieldsEntry)  {}

// GetAnnotations returns the annotations: as sent until projected, then those kept (a new map).
func (m *Meta) GetAnnotations() map[string]string {
	if m.kept == nil {
		return m.Annotations
	}
	out := make(map[string]string, len(m.kept)/2)
	for i := 0; i < len(m.kept); i += 2 {
		out[m.kept[i]] = m.kept[i+1]
	}
	return out
}
