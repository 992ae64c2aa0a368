// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	deploypolicy "github.com/kpatterns/kpatterns/deploypolicy/webhook"
)

func (d *demo) deploypolicy() error {
	if err := d.start("deploypolicy"); err != nil {
		return err
	}
	if err := d.policyNamespace(); err != nil {
		return err
	}
	step("Namespace " + policyNS + " sets its policy in ConfigMap " + deploypolicy.PolicyConfigMap + ": at most 3 replicas (read live on every request)")
	policy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deploypolicy.PolicyConfigMap, Namespace: policyNS},
		Data: map[string]string{deploypolicy.MaxReplicasKey: "3"}}
	if err := d.recreate(policy, policy.DeepCopy()); err != nil {
		return err
	}
	step("Create Deployment demo-api without a team label: the mutating webhook defaults it")
	sel := map[string]string{"app": "demo-api"}
	api := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo-api", Namespace: policyNS},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}}
	old := api.DeepCopy()
	if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(old), old); err == nil { // a previous run's, possibly protected
		delete(old.Annotations, deploypolicy.ProtectAnnotation)
		_ = d.c.Update(d.ctx, old)
	}
	if err := d.recreate(api, api.DeepCopy()); err != nil {
		return err
	}
	show(api.Name, map[string]any{"labels": api.Labels, "replicas": *api.Spec.Replicas})

	scale := func(n int32) error {
		return d.c.SubResource("scale").Update(d.ctx, api, client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}))
	}
	step("kubectl scale past the ceiling is denied (the request is an autoscaling/v1 Scale on the /scale subresource)")
	fmt.Println("    kubectl -n demo-policy scale deployment demo-api --replicas=5")
	if err := expectDenied(scale(5)); err != nil {
		return err
	}
	fmt.Println("    kubectl -n demo-policy scale deployment demo-api --replicas=3")
	if err := scale(3); err != nil {
		return err
	}
	fmt.Println("    deployment.apps/demo-api scaled")

	step("Give it a real team: the defaulted team=unassigned may become one, once")
	if err := d.updateDeployment(api, func(a *appsv1.Deployment) { a.Labels[deploypolicy.TeamLabel] = "payments" }); err != nil {
		return err
	}
	fmt.Println("    deployment.apps/demo-api labeled team=payments")
	step("Change the team label again: denied, a real team once set stays")
	err := d.updateDeployment(api, func(a *appsv1.Deployment) { a.Labels[deploypolicy.TeamLabel] = "search" })
	if err := expectDenied(err); err != nil {
		return err
	}
	step("Protect it with " + deploypolicy.ProtectAnnotation + "=true: deletion is denied until the annotation is removed")
	if err := d.updateDeployment(api, func(a *appsv1.Deployment) {
		a.Annotations = map[string]string{deploypolicy.ProtectAnnotation: "true"}
	}); err != nil {
		return err
	}
	fmt.Println("    kubectl -n demo-policy delete deployment demo-api")
	if err := expectDenied(d.c.Delete(d.ctx, api)); err != nil {
		return err
	}

	step("The same rules as admission policies that kube-apiserver runs itself: install --admission=policy replaces the webhooks, and the webhook process is stopped")
	if err := d.install("deploypolicy", "--admission=policy"); err != nil {
		return err
	}
	d.stop("deploypolicy")
	fmt.Println("    kubectl -n demo-policy scale deployment demo-api --replicas=5")
	deadline := time.Now().Add(30 * time.Second) // kube-apiserver loads policies asynchronously
	err = scale(5)
	for ; err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy"); err = scale(5) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the policies were not in effect after 30 s: %v", err)
		}
		if err == nil { // admitted before the policies took effect: back under the ceiling
			if err := scale(3); err != nil {
				return err
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return expectDenied(err)
}

// updateDeployment re-reads and retries on a conflict; any other error, a denial included, is
// returned as it is.
func (d *demo) updateDeployment(dep *appsv1.Deployment, mutate func(*appsv1.Deployment)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return err
		}
		mutate(dep)
		return d.c.Update(d.ctx, dep)
	})
}
