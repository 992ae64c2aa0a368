// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ConfigProfileSpec selects a case and the values layered on top of it.
type ConfigProfileSpec struct {
	// Image of the Deployment that consumes the generated configuration.
	// +kubebuilder:validation:MinLength=1
	// +required
	Image string `json:"image"`

	// Suspended, when true, matches first: nothing is generated or rolled until it is false again.
	// +optional
	Suspended bool `json:"suspended,omitempty"`

	// Maintenance, when true, matches the maintenance case before any other but suspended.
	// +optional
	Maintenance bool `json:"maintenance,omitempty"`

	// ConfigFrom names a ConfigMap in the profile's namespace, labelled
	// patterns.kpatterns.dev/conditional=input, whose data is the configuration (the input case).
	// +kubebuilder:validation:MaxLength=253
	// +optional
	ConfigFrom string `json:"configFrom,omitempty"`

	// Environment "production" matches the production case; "development", "staging" or empty
	// the default case. Any other value matches no case: the profile reports NoMatchingCase.
	// +kubebuilder:validation:MaxLength=63
	// +optional
	Environment string `json:"environment,omitempty"`

	// Settings are added to the matched case's configuration and win over its values.
	// +kubebuilder:validation:MaxProperties=256
	// +kubebuilder:validation:XValidation:rule="self.all(k, k.matches('^[-._a-zA-Z0-9]+$') && size(k) <= 253)",message="settings keys must be valid ConfigMap keys: letters, digits, '-', '_' or '.', at most 253 characters"
	// +optional
	Settings map[string]string `json:"settings,omitempty"`
}

// ConfigProfileStatus records which case matched and what was rolled out.
type ConfigProfileStatus struct {
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, and <Stage>Ready for every stage.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// MatchedCase is the first case whose condition held.
	// +optional
	MatchedCase string `json:"matchedCase,omitempty"`

	// ConfigDigest is the digest of the generated configuration stamped on the Pod template.
	// +optional
	ConfigDigest string `json:"configDigest,omitempty"`
}

// ConfigProfile generates a configuration from the first matching case into a ConfigMap and rolls
// an owned Deployment whenever that configuration changes.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:validation:XValidation:rule="size(self.metadata.name) <= 63",message="a ConfigProfile's name must be at most 63 characters"
// +kubebuilder:printcolumn:name="Case",type=string,JSONPath=`.status.matchedCase`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ConfigProfile struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ConfigProfileSpec `json:"spec"`
	// +optional
	Status ConfigProfileStatus `json:"status,omitempty"`
}

// GetConditions returns the status conditions (the stages reconciler maintains them).
func (p *ConfigProfile) GetConditions() []metav1.Condition { return p.Status.Conditions }

// SetConditions replaces the status conditions.
func (p *ConfigProfile) SetConditions(c []metav1.Condition) { p.Status.Conditions = c }

// SetObservedGeneration records the generation the status describes.
func (p *ConfigProfile) SetObservedGeneration(g int64) { p.Status.ObservedGeneration = g }

// ConfigProfileList is a list of ConfigProfiles.
// +kubebuilder:object:root=true
type ConfigProfileList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ConfigProfile `json:"items"`
}
