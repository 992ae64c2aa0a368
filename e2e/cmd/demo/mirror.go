// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	mirror "github.com/kpatterns/kpatterns/mirror/controller"
)

func (d *demo) mirror() error {
	if err := d.start("mirror"); err != nil {
		return err
	}
	step("Apply a ConfigMap labelled " + mirror.Label + "=true")
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-settings", Namespace: ns,
		Labels: map[string]string{mirror.Label: mirror.Source}},
		Data: map[string]string{"color": "blue", "size": "large", "debug": "false"}}
	if err := d.recreate(src, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-settings-mirror", Namespace: ns}}); err != nil {
		return err
	}
	show(src.Name, map[string]any{"labels": src.Labels, "data": src.Data})
	step("The mirror created demo-settings-mirror, owned by the source:")
	child := &corev1.ConfigMap{}
	if err := d.waitFor("demo-settings-mirror", child, func() bool { return maps.Equal(child.Data, src.Data) }); err != nil {
		return err
	}
	show(child.Name, map[string]any{"labels": child.Labels, "data": child.Data, "ownerReferences": owners(child)})

	step("Remove the key 'debug' from the source: the child's data is replaced as a whole")
	delete(src.Data, "debug")
	if err := d.c.Update(d.ctx, src); err != nil {
		return err
	}
	if err := d.waitFor("demo-settings-mirror", child, func() bool { return maps.Equal(child.Data, src.Data) }); err != nil {
		return err
	}
	show(child.Name, map[string]any{"data": child.Data})
	return nil
}
