// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	reloader "github.com/kpatterns/kpatterns/reloader/controller"
)

func (d *demo) reloader() error {
	if err := d.start("reloader"); err != nil {
		return err
	}
	step("A Deployment labelled " + reloader.OptIn + "=true reads ConfigMap demo-web-config through envFrom")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-web-config", Namespace: ns}, Data: map[string]string{"level": "info"}}
	labels := map[string]string{"app": "demo-web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo-web", Namespace: ns, Labels: map[string]string{reloader.OptIn: "true"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "nginx:1.27", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}}}}}}}
	if err := d.recreate(cm, cm.DeepCopy()); err != nil {
		return err
	}
	if err := d.recreate(dep, dep.DeepCopy()); err != nil {
		return err
	}
	if err := d.waitFor(dep.Name, dep, func() bool { return dep.Annotations[reloader.DigestsAnnotation] != "" }); err != nil {
		return err
	}
	fmt.Printf("    %s: %s   (what it saw, on the Deployment's own metadata; the Pod template is untouched)\n", reloader.DigestsAnnotation, dep.Annotations[reloader.DigestsAnnotation])
	if err := d.replicaSets("demo-web", "", 1); err != nil {
		return err
	}
	step("Change the ConfigMap: the digest changes and the Deployment rolls out a new ReplicaSet")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
		cm.Data["level"] = "debug"
		return d.c.Update(d.ctx, cm)
	})
	if err != nil {
		return err
	}
	if err := d.replicaSets("demo-web", "", 2); err != nil {
		return err
	}
	step("The reloader says on the Deployment what it rolled out for:")
	return d.events("demo-web", reloader.ReasonRollingOut)
}

// events prints the Events of a reason that regard the object named name, oldest first.
func (d *demo) events(name, reason string) error {
	list := &eventsv1.EventList{}
	if err := d.c.List(d.ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	fmt.Println("    TYPE     REASON       OBJECT                  MESSAGE")
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			fmt.Printf("    %-8s %-12s %-23s %s\n", e.Type, e.Reason, strings.ToLower(e.Regarding.Kind)+"/"+name, e.Note)
		}
	}
	return nil
}
