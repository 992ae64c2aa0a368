// Package v1alpha1 is the ConfigProfile API: ordered cases, first match wins, generate a
// configuration that an owned Deployment rolls out by checksum.
// +kubebuilder:object:generate=true
// +groupName=patterns.kpatterns.dev
package v1alpha1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the API group and version of ConfigProfile.
	GroupVersion = schema.GroupVersion{Group: "patterns.kpatterns.dev", Version: "v1alpha1"}
	// SchemeBuilder registers the types.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion}
	// AddToScheme adds the types to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
