// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// MaxTerms is how many leadership terms a Heartbeat keeps, the oldest dropped first.
const MaxTerms = 20

// Term is one replica's leadership, as that replica wrote it.
type Term struct {
	// Holder is the leader's identity: the holderIdentity of the leader-election Lease.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	Holder string `json:"holder"`

	// Acquired is when the replica became leader (its Acquired hook ran).
	// +required
	Acquired metav1.MicroTime `json:"acquired"`

	// LastBeat is the latest heartbeat the replica wrote while it led. The replica led at least
	// from Acquired to LastBeat.
	// +required
	LastBeat metav1.MicroTime `json:"lastBeat"`

	// Beats counts the heartbeats written in this term.
	// +kubebuilder:validation:Minimum=1
	// +required
	Beats int64 `json:"beats"`

	// Stopped is when the replica's leader exit hook marked the term ended, after its workers
	// stopped. Unset when the process was killed, or another replica had already started a term.
	// +optional
	Stopped *metav1.MicroTime `json:"stopped,omitempty"`

	// StopCause is why the term ended when it was not a clean shutdown ("leader election lost").
	// +kubebuilder:validation:MaxLength=1024
	// +optional
	StopCause string `json:"stopCause,omitempty"`
}

// HeartbeatStatus is the record of leadership terms.
type HeartbeatStatus struct {
	// Terms are the latest leadership terms, oldest first; the last one is the current or the
	// latest leader's.
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=20
	// +optional
	Terms []Term `json:"terms,omitempty"`
}

// Heartbeat is written only by the replica that holds the lifespan Lease: a term when it becomes
// leader, a beat every interval while it leads, the term's end from its leader exit hook.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Holder",type=string,JSONPath=`.status.terms[-1:].holder`
// +kubebuilder:printcolumn:name="Last beat",type=string,JSONPath=`.status.terms[-1:].lastBeat`
// +kubebuilder:printcolumn:name="Stopped",type=string,JSONPath=`.status.terms[-1:].stopped`
type Heartbeat struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Status HeartbeatStatus `json:"status,omitempty"`
}

// HeartbeatList is a list of Heartbeats.
// +kubebuilder:object:root=true
type HeartbeatList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Heartbeat `json:"items"`
}

// Current is the latest term, or nil.
func (h *Heartbeat) Current() *Term {
	if len(h.Status.Terms) == 0 {
		return nil
	}
	return &h.Status.Terms[len(h.Status.Terms)-1]
}
