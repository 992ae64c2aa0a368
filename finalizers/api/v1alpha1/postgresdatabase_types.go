// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ManagementPolicy says what the controller may do to the external resources.
// +kubebuilder:validation:Enum=Full;ObserveOnly;Orphan
type ManagementPolicy string

const (
	// Full creates, repairs and, on deletion, drops the database and the role.
	Full ManagementPolicy = "Full"
	// ObserveOnly reads the database and the role and reports how they differ from the spec;
	// it changes nothing, and deleting the object leaves them.
	ObserveOnly ManagementPolicy = "ObserveOnly"
	// Orphan is Full but on deletion: the finalizer goes, the database and the role stay (their
	// ownership tags removed, so no later sweep drops them).
	Orphan ManagementPolicy = "Orphan"
)

// PostgresDatabaseSpec is the database and login role wanted in a PostgreSQL server.
// +kubebuilder:validation:XValidation:rule="(!has(oldSelf.serverName) || self.serverName == oldSelf.serverName) && self.database == oldSelf.database && self.role == oldSelf.role",message="serverName (once set), database and role are immutable: create a new object for a new database"
type PostgresDatabaseSpec struct {
	// ServerName names the PostgresServer (cluster-scoped, written by administrators) whose
	// login creates, repairs and drops the database and the role. The object never names a
	// Secret: credentials are the server's, kept in the operator's namespace.
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ServerName string `json:"serverName"`

	// Database is the name of the database (its external name).
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=63
	// +required
	Database string `json:"database"`

	// Role is the login role that owns the database; its password is written to the Secret
	// <object name>-credentials.
	// +kubebuilder:validation:Pattern=`^[a-z_][a-z0-9_]*$`
	// +kubebuilder:validation:MaxLength=63
	// +required
	Role string `json:"role"`

	// ConnectionLimit is the role's connection limit; -1 is none.
	// +kubebuilder:validation:Minimum=-1
	// +kubebuilder:validation:Maximum=10000
	// +kubebuilder:default=-1
	// +optional
	ConnectionLimit *int32 `json:"connectionLimit,omitempty"`

	// ManagementPolicy: Full (default), ObserveOnly or Orphan.
	// +kubebuilder:default=Full
	// +optional
	ManagementPolicy ManagementPolicy `json:"managementPolicy,omitempty"`

	// PollInterval is how often the database and the role are checked for drift (at least 10s).
	// +kubebuilder:validation:XValidation:rule="duration(self) >= duration('10s')",message="pollInterval must be at least 10s"
	// +kubebuilder:default="1m"
	// +optional
	PollInterval *metav1.Duration `json:"pollInterval,omitempty"`
}

// PostgresDatabaseStatus is what the controller observed.
type PostgresDatabaseStatus struct {
	// ObservedGeneration is the generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready (the database and the role are as the spec says).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// ExternalName is the database this object created (or observes), recorded once it exists.
	// +optional
	ExternalName string `json:"externalName,omitempty"`

	// Repairs counts the drift corrections: an attribute changed, or the database or the role
	// removed, behind the controller's back.
	// +optional
	Repairs int32 `json:"repairs,omitempty"`

	// LastRepairTime is when drift was last corrected.
	// +optional
	LastRepairTime *metav1.Time `json:"lastRepairTime,omitempty"`
}

// PostgresDatabase is a database and a login role in a PostgreSQL server: created once the object
// holds its finalizer, checked for drift every pollInterval and repaired, dropped before the
// finalizer is removed.
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=pgdb
// +kubebuilder:printcolumn:name="Database",type=string,JSONPath=`.spec.database`
// +kubebuilder:printcolumn:name="Policy",type=string,JSONPath=`.spec.managementPolicy`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Reason",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].reason`
// +kubebuilder:printcolumn:name="Repairs",type=integer,JSONPath=`.status.repairs`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PostgresDatabase struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PostgresDatabaseSpec `json:"spec"`
	// +optional
	Status PostgresDatabaseStatus `json:"status,omitempty"`
}

// PostgresDatabaseList is a list of PostgresDatabases.
// +kubebuilder:object:root=true
type PostgresDatabaseList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PostgresDatabase `json:"items"`
}

// GetConditions returns the status conditions.
func (r *PostgresDatabase) GetConditions() []metav1.Condition { return r.Status.Conditions }
