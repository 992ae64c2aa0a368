// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	childsetv1alpha1 "github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	childsetconfig "github.com/kpatterns/kpatterns/childset/config"
	childset "github.com/kpatterns/kpatterns/childset/controller"
)

func (d *demo) childset() error {
	if err := d.start("childset"); err != nil {
		return err
	}
	step("Bundle demo-bundle has three entries: one ConfigMap each, named by a hash of (Bundle UID, key)")
	b := &childsetv1alpha1.Bundle{}
	if err := sample(childsetconfig.FS, "childset", "patterns_v1alpha1_bundle.yaml", ns, b); err != nil {
		return err
	}
	if err := d.recreate(b, b.DeepCopy()); err != nil {
		return err
	}
	if err := d.bundleChildren(b, 3); err != nil {
		return err
	}
	step("Remove entry FEATURE_X: its ConfigMap is pruned (a delete guarded by owner, UID and resourceVersion)")
	fmt.Println(`    kubectl patch bundle demo-bundle --type=json -p '[{"op":"remove","path":"/spec/entries/FEATURE_X"}]'`)
	if err := d.c.Patch(d.ctx, b, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/entries/FEATURE_X"}]`))); err != nil {
		return err
	}
	return d.bundleChildren(b, 2)
}

// bundleChildren waits until the Bundle is Ready with n children and prints them.
func (d *demo) bundleChildren(b *childsetv1alpha1.Bundle, n int32) error {
	err := d.waitFor(b.Name, b, func() bool {
		return ready(b.Status.Conditions) && b.Status.ObservedGeneration == b.Generation && b.Status.ReadyChildren == n
	})
	if err != nil {
		return err
	}
	list := &corev1.ConfigMapList{}
	if err := d.c.List(d.ctx, list, client.InNamespace(ns), client.MatchingLabels{childset.BundleUIDLabel: string(b.UID)}); err != nil {
		return err
	}
	fmt.Printf("    bundle/%s: desiredChildren=%d readyChildren=%d\n", b.Name, b.Status.DesiredChildren, b.Status.ReadyChildren)
	for _, cm := range list.Items {
		if cm.DeletionTimestamp == nil {
			fmt.Printf("    configmap/%-32s key=%-10s data=%v\n", cm.Name, cm.Annotations[childset.KeyAnnotation], cm.Data)
		}
	}
	return nil
}
