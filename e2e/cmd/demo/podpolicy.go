// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	podpolicy "github.com/kpatterns/kpatterns/podpolicy/webhook"
)

func (d *demo) podpolicy() error {
	if err := d.start("podpolicy"); err != nil {
		return err
	}
	const podsNS = "demo-pods"
	step("Namespace " + podsNS + " is labelled " + podpolicy.EnforceLabel + "=true (its Pod creations go to the webhook) and " +
		podpolicy.AllowPodsLabel + "=true; podpolicy reads it from its informer cache")
	nsObj := localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podsNS}})
	if err := d.c.Create(d.ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	labels := fmt.Sprintf(`{"metadata":{"labels":{%q:"true",%q:"true",%q:null,%q:null}}}`, // nothing else allowed
		podpolicy.EnforceLabel, podpolicy.AllowPodsLabel, podpolicy.AllowPrivilegedLabel, podpolicy.AllowHostNamespacesLabel)
	if err := d.c.Patch(d.ctx, nsObj, client.RawPatch(types.MergePatchType, []byte(labels))); err != nil {
		return err
	}
	deployment := func(name string, privileged bool) *appsv1.Deployment {
		sel := map[string]string{"app": name}
		c := corev1.Container{Name: "app", Image: "nginx:1.27"}
		if privileged {
			c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: podsNS},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}}}
	}
	step("Deployment demo-app: the ReplicaSet controller's Pods are admitted")
	app := deployment("demo-app", false)
	if err := d.recreate(app, app.DeepCopy()); err != nil {
		return err
	}
	for deadline := time.Now().Add(2 * time.Minute); app.Status.AvailableReplicas < 2; time.Sleep(200 * time.Millisecond) {
		if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(app), app); err != nil || time.Now().After(deadline) {
			return fmt.Errorf("demo-app not available: %v", err)
		}
	}
	fmt.Printf("    deployment demo-app: %d/2 available\n", app.Status.AvailableReplicas)
	step("Deployment demo-root runs a privileged container: its Pods are denied, and the ReplicaSet's events say why")
	root := deployment("demo-root", true)
	if err := d.recreate(root, root.DeepCopy()); err != nil {
		return err
	}
	fmt.Printf("    kubectl -n %s get events --field-selector reason=FailedCreate\n", podsNS)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list := &eventsv1.EventList{}
		if err := d.c.List(d.ctx, list, client.InNamespace(podsNS)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "ReplicaSet" && strings.HasPrefix(e.Regarding.Name, "demo-root-") && e.Reason == "FailedCreate" {
				fmt.Printf("    %-8s %-12s %s  %s\n", e.Type, e.Reason, "replicaset/"+e.Regarding.Name, e.Note)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("no FailedCreate event for demo-root's ReplicaSet")
		}
	}
}
