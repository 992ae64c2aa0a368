// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ExternalRecordSpec is what the external system should hold.
type ExternalRecordSpec struct {
	// Value the external record holds.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=1024
	// +required
	Value string `json:"value"`
}

// ExternalRecordStatus is what the controller observed.
type ExternalRecordStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (the external record holds spec.value).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ExternalID is the key of the record in the external system: the object's UID.
	// +optional
	ExternalID string `json:"externalID,omitempty"`

	// Repairs counts the times the record was found missing or changed and put back.
	// +optional
	Repairs int32 `json:"repairs,omitempty"`

	// LastRepairTime is when the record was last put back.
	// +optional
	LastRepairTime *metav1.Time `json:"lastRepairTime,omitempty"`
}

// ExternalRecord stands for a record in an external system: created once the object holds its
// finalizer, checked and repaired periodically, deleted before the finalizer is removed.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Repairs",type=integer,JSONPath=`.status.repairs`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ExternalRecord struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec ExternalRecordSpec `json:"spec"`
	// +optional
	Status ExternalRecordStatus `json:"status,omitempty"`
}

// ExternalRecordList is a list of ExternalRecords.
// +kubebuilder:object:root=true
type ExternalRecordList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ExternalRecord `json:"items"`
}

// GetConditions returns the status conditions.
func (r *ExternalRecord) GetConditions() []metav1.Condition { return r.Status.Conditions }
