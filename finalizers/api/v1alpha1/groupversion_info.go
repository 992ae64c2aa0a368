// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package v1alpha1 is the PostgresDatabase API: a custom resource that stands for a database and a
// login role in a PostgreSQL server, created and dropped through a finalizer; and PostgresServer,
// the cluster-scoped kind that says how to reach a server as its administrator.
// +kubebuilder:object:generate=true
// +groupName=patterns.kpatterns.dev
package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

var (
	// GroupVersion is the API group and version of PostgresDatabase and PostgresServer.
	GroupVersion = schema.GroupVersion{Group: "patterns.kpatterns.dev", Version: "v1alpha1"}
	// SchemeBuilder registers the types (apimachinery's builder: API packages depend on nothing more).
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &PostgresDatabase{}, &PostgresDatabaseList{}, &PostgresServer{}, &PostgresServerList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
