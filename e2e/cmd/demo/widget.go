// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	widgetv1alpha1 "github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	widgetconfig "github.com/kpatterns/kpatterns/widget/config"
	widget "github.com/kpatterns/kpatterns/widget/controller"
)

func (d *demo) widget() error {
	if err := d.start("widget"); err != nil {
		return err
	}
	step("Apply a Widget: image, 2 replicas, a config map")
	w := &widgetv1alpha1.Widget{}
	if err := sample(widgetconfig.FS, "widget", "patterns_v1alpha1_widget.yaml", ns, w); err != nil {
		return err
	}
	if err := d.recreate(w, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: ns}}); err != nil {
		return err
	}
	step("Its stages ensure a ConfigMap, a Deployment (kwok runs its Pods) and a Service; status follows:")
	if err := d.waitFor(w.Name, w, func() bool { return ready(w.Status.Conditions) && w.Status.ReadyReplicas == 2 }); err != nil {
		return err
	}
	fmt.Printf("    NAME        READY   REPLICAS\n    %-11s %-7s %d\n", w.Name, "True", w.Status.ReadyReplicas)
	showConditions(w.Status.Conditions)

	step("Scale its Deployment behind its back: the drift is repaired")
	dep := &appsv1.Deployment{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: w.Name}, dep); err != nil {
			return err
		}
		dep.Spec.Replicas = ptr.To[int32](5)
		return d.c.Update(d.ctx, dep, client.FieldOwner("demo-user"))
	})
	if err != nil {
		return err
	}
	fmt.Println("    kubectl scale deployment demo-shop --replicas=5")
	if err := d.waitFor(w.Name, dep, func() bool { return *dep.Spec.Replicas == 2 }); err != nil {
		return err
	}
	fmt.Printf("    deployment/demo-shop replicas: %d\n", *dep.Spec.Replicas)

	// Its webhooks spare its own namespace (so a broken webhook cannot block its repair): shown in another.
	if err := d.policyNamespace(); err != nil {
		return err
	}
	step("Its admission (same process as its controller): " + policyNS + "'s " + widget.PolicyConfigMap + " allows only nginx images")
	wp := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: widget.PolicyConfigMap, Namespace: policyNS},
		Data: map[string]string{widget.AllowedImagesKey: "nginx:"}}
	if err := d.recreate(wp, wp.DeepCopy()); err != nil {
		return err
	}
	fmt.Println("    kubectl -n demo-policy create -f widget.yaml   # image: busybox:1.36")
	return expectDenied(d.c.Create(d.ctx, &widgetv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "demo-outlaw", Namespace: policyNS},
		Spec: widgetv1alpha1.WidgetSpec{Image: "busybox:1.36"}}))
}
