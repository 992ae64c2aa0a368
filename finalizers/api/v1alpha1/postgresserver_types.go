// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// PostgresServerSpec says where a PostgreSQL server's administrator login is kept.
type PostgresServerSpec struct {
	// ConnectionSecret names a Secret in the operator's namespace (where the controller runs)
	// with the server's address and an administrator's login: keys host, port, username,
	// password, and optionally sslmode (default verify-full: a server without TLS needs sslmode disable).
	// +kubebuilder:validation:MinLength=1
	// +kubebuilder:validation:MaxLength=253
	// +required
	ConnectionSecret string `json:"connectionSecret"`
}

// PostgresServer is a PostgreSQL server that PostgresDatabases name, as Crossplane's
// ProviderConfig: cluster-scoped and written by administrators, so credentials are chosen by whom
// may write it, not by whom may create a PostgresDatabase. The controller only reads it.
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=pgserver
// +kubebuilder:printcolumn:name="Secret",type=string,JSONPath=`.spec.connectionSecret`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type PostgresServer struct {
	metav1.TypeMeta `json:",inline"`
	// +optional
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec PostgresServerSpec `json:"spec"`
}

// PostgresServerList is a list of PostgresServers.
// +kubebuilder:object:root=true
type PostgresServerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []PostgresServer `json:"items"`
}
