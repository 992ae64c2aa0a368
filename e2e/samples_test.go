// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
)

// TestSamples creates every pattern's samples (config/samples/*.yaml, which the demo applies) with
// a server-side dry run: kube-apiserver validates each against its CRD's schema and refuses a
// field it does not have. In operatorNamespace, which the patterns' webhooks spare.
func TestSamples(t *testing.T) {
	f := features.New("samples").Assess("each pattern's samples are valid objects of its CRDs", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		c := clientFor(t, cfg)
		n := 0
		for _, p := range patterns {
			files, err := filepath.Glob(filepath.Join(root, p, "config", "samples", "*.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			for _, file := range files {
				b, err := os.ReadFile(file)
				if err != nil {
					t.Fatal(err)
				}
				objs, err := decodeYAML(b)
				if err != nil || len(objs) != 1 {
					t.Fatalf("%s: %d objects, %v; want one", file, len(objs), err)
				}
				obj := objs[0]
				if obj.GetNamespace() != "" {
					t.Errorf("%s names namespace %s: a sample is applied in the namespace of your choice", file, obj.GetNamespace())
				}
				if mapping, err := c.RESTMapper().RESTMapping(obj.GroupVersionKind().GroupKind(), obj.GroupVersionKind().Version); err != nil {
					t.Fatal(err)
				} else if mapping.Scope.Name() == "namespace" {
					obj.SetNamespace(operatorNamespace)
				}
				if err := c.Create(ctx, obj, client.DryRunAll, client.FieldValidation("Strict")); err != nil {
					t.Errorf("%s: %v", file, err)
				}
				n++
			}
		}
		if n == 0 {
			t.Fatal("no samples found")
		}
		t.Logf("%d samples created (dry run)", n)
		return ctx
	}).Feature()
	testEnv.Test(t, f)
}
