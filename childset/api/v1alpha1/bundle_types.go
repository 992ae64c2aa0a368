// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BundleSpec is what the user asks for.
type BundleSpec struct {
	// Entries: one ConfigMap per entry, holding the value under the entry's key. Keys must be valid
	// ConfigMap keys; at most 100 entries.
	// +kubebuilder:validation:MaxProperties=100
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[-._a-zA-Z0-9]+$') && size(k) <= 253)",message="entry keys must be valid ConfigMap keys: letters, digits, '-', '_' or '.', at most 253 characters"
	// +optional
	Entries map[string]string `json:"entries,omitempty"`
}

// BundleStatus is what the controller observed.
type BundleStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, ChildrenReady and PruneReady.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// DesiredChildren is the number of entries: one ConfigMap each.
	// +optional
	DesiredChildren int32 `json:"desiredChildren,omitempty"`

	// ReadyChildren is the number of entries whose ConfigMap holds the entry.
	// +optional
	ReadyChildren int32 `json:"readyChildren,omitempty"`
}

// Bundle keeps one ConfigMap per entry and prunes the ConfigMaps of entries that left it.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 236",message="a Bundle's name is at most 236 characters: its children are named <bundle>-<16 hex digits>"
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Desired",type=integer,JSONPath=`.status.desiredChildren`
// +kubebuilder:printcolumn:name="Children",type=integer,JSONPath=`.status.readyChildren`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Bundle struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec BundleSpec `json:"spec,omitzero"`
	// +optional
	Status BundleStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (the stages reconciler maintains them).
func (b *Bundle) GetConditions() []metav1.Condition { return b.Status.Conditions }

// SetConditions replaces the status conditions.
func (b *Bundle) SetConditions(c []metav1.Condition) { b.Status.Conditions = c }

// SetObservedGeneration records the generation the status describes.
func (b *Bundle) SetObservedGeneration(g int64) { b.Status.ObservedGeneration = g }

// BundleList is a list of Bundles.
// +kubebuilder:object:root=true
type BundleList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Bundle `json:"items"`
}
