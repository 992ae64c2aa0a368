// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// multi replaces the mirror, reloader and summary processes by one process running all three.
func (d *demo) multi() error {
	step("multi: the mirror, reloader and summary controllers in one process (app.Compose), replacing the three")
	var three float64
	for _, p := range []string{"mirror", "reloader", "summary"} {
		mib := rss(d.pid(p))
		three += mib
		fmt.Printf("    %-8s pid %-7d RSS %5.1f MiB\n", p, d.pid(p), mib)
		d.stop(p)
	}
	if err := d.start("multi"); err != nil {
		return err
	}
	step("Change demo-settings: multi's mirror controller updates the child")
	src := &corev1.ConfigMap{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: "demo-settings"}, src); err != nil {
			return err
		}
		src.Data["color"] = "green"
		return d.c.Update(d.ctx, src)
	})
	if err != nil {
		return err
	}
	child := &corev1.ConfigMap{}
	if err := d.waitFor("demo-settings-mirror", child, func() bool { return child.Data["color"] == "green" }); err != nil {
		return err
	}
	show(child.Name, map[string]any{"data": child.Data})
	fmt.Printf("    RSS: multi %.1f MiB running all three; the three processes had %.1f MiB together\n", rss(d.pid("multi")), three)
	return nil
}
