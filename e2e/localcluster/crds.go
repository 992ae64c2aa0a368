// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"fmt"
	"os"
	"path/filepath"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// PatternCRDs reads every pattern's CRDs (root/*/config/crd), and the kinds they serve by API
// version. kube-apiserver's admission learns the kinds of new CRDs only when it refreshes its
// RESTMapper, every 30 s (k8s.io/apiserver/pkg/server/options/admission.go); until then
// OwnerReferencesPermissionEnforcement refuses any child whose controller ownerReference to such a
// kind sets blockOwnerDeletion. The e2e suite and the demo apply them all first, so that one
// refresh serves every pattern.
func PatternCRDs(root string) ([]metav1.TypeMeta, []client.Object, error) {
	files, err := filepath.Glob(filepath.Join(root, "*", "config", "crd", "*.yaml"))
	if err != nil || len(files) == 0 {
		return nil, nil, fmt.Errorf("no CRDs under %s/*/config/crd (%v)", root, err)
	}
	var kinds []metav1.TypeMeta
	var objs []client.Object
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		crd := &apiextensionsv1.CustomResourceDefinition{}
		if err := yaml.UnmarshalStrict(b, crd); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
		for _, v := range crd.Spec.Versions {
			kinds = append(kinds, metav1.TypeMeta{APIVersion: crd.Spec.Group + "/" + v.Name, Kind: crd.Spec.Names.Kind})
		}
		objs = append(objs, crd)
	}
	return kinds, objs, nil
}
