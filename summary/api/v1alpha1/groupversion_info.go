// Package v1alpha1 is the Workload API: a summary of existing Pods selected by labels.
// +kubebuilder:object:generate=true
// +groupName=patterns.kpatterns.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of Workload.
	GroupVersion = schema.GroupVersion{Group: "patterns.kpatterns.dev", Version: "v1alpha1"}
	// SchemeBuilder registers the types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
