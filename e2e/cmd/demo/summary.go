// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	summaryconfig "github.com/kpatterns/kpatterns/summary/config"
)

func (d *demo) summary() error {
	if err := d.start("summary"); err != nil {
		return err
	}
	step("A Workload selecting app=demo-web summarizes the Deployment's Pods (it never writes them)")
	w := &summaryv1alpha1.Workload{}
	if err := sample(summaryconfig.FS, "summary", "patterns_v1alpha1_workload.yaml", ns, w); err != nil {
		return err
	}
	if err := d.recreate(w, w.DeepCopy()); err != nil {
		return err
	}
	show := func(n int32) error {
		err := d.waitFor(w.Name, w, func() bool {
			return w.Status.Total == n && w.Status.Ready == n && ready(w.Status.Conditions) && w.Status.ObservedGeneration == w.Generation
		})
		if err != nil {
			return err
		}
		fmt.Printf("    NAME       READY   PODS-READY   TOTAL   RUNNING\n    %-10s %-7s %-12d %-7d %d\n",
			w.Name, "True", w.Status.Ready, w.Status.Total, w.Status.Phases.Running)
		return nil
	}
	if err := show(2); err != nil {
		return err
	}
	step("Scale the Deployment to 3: the summary follows")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep := &appsv1.Deployment{}
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: "demo-web"}, dep); err != nil {
			return err
		}
		dep.Spec.Replicas = ptr.To[int32](3)
		return d.c.Update(d.ctx, dep)
	})
	if err != nil {
		return err
	}
	return show(3)
}
