// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// WorkloadSpec selects the Pods to summarize.
type WorkloadSpec struct {
	// Selector matches Pods in the Workload's namespace that carry every one of these labels.
	// +kubebuilder:validation:MinProperties=1
	// +required
	Selector map[string]string `json:"selector"`
}

// PodCounts counts Pods by phase; every count is written, zero included.
type PodCounts struct {
	// +optional
	Pending int32 `json:"pending"`
	// +optional
	Running int32 `json:"running"`
	// +optional
	Succeeded int32 `json:"succeeded"`
	// +optional
	Failed int32 `json:"failed"`
	// +optional
	Unknown int32 `json:"unknown"`
}

// WorkloadStatus summarizes the selected Pods.
type WorkloadStatus struct {
	// ObservedGeneration is the generation this summary describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Total is the number of selected Pods.
	// Always written, zero included.
	// +optional
	Total int32 `json:"total"`
	// Ready is the number of selected Pods whose Ready condition is True.
	// Always written, zero included.
	// +optional
	Ready int32 `json:"ready"`
	// Phases counts the selected Pods by phase.
	// Always written, zero included.
	// +optional
	Phases PodCounts `json:"phases"`
	// Conditions: Ready is True when at least one Pod is selected and all of them are ready.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// Workload reports on existing Pods it does not own.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Pods-Ready",type=integer,JSONPath=`.status.ready`
// +kubebuilder:printcolumn:name="Total",type=integer,JSONPath=`.status.total`
// +kubebuilder:printcolumn:name="Running",type=integer,JSONPath=`.status.phases.running`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type Workload struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec WorkloadSpec `json:"spec"`
	// +optional
	Status WorkloadStatus `json:"status,omitempty"`
}

// WorkloadList is a list of Workloads.
// +kubebuilder:object:root=true
type WorkloadList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Workload `json:"items"`
}
