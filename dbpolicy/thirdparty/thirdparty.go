// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package thirdparty holds the Database CRD of an imaginary database operator, which dbpolicy
// validates but neither installs nor owns. Tests, the e2e suite and the demo install it as a
// fixture; dbpolicy's own manifests never include it.
package thirdparty

import (
	_ "embed"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

//go:embed databases.yaml
var databasesYAML []byte

// DatabaseCRD returns a new copy of the CRD.
func DatabaseCRD() (*apiextensionsv1.CustomResourceDefinition, error) {
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(databasesYAML, crd); err != nil {
		return nil, err
	}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	return crd, nil
}
