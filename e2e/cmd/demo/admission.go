// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The admission patterns' scenes: webhooks and CEL policies deciding alike.

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/dbpolicy/thirdparty"
	dbpolicy "github.com/kpatterns/kpatterns/dbpolicy/webhook"
	deploypolicy "github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	podpolicy "github.com/kpatterns/kpatterns/podpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/rollout"
	widgetv1alpha1 "github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	widget "github.com/kpatterns/kpatterns/widget/controller"
)

func (d *demo) deploypolicy() error {
	if err := d.start("deploypolicy"); err != nil {
		return err
	}
	if err := d.c.Create(d.ctx, localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyNS}})); err != nil && !apierrors.IsAlreadyExists(err) {
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

	step("Change the team label: denied, a team label once set stays")
	err := d.updateDeployment(api, func(a *appsv1.Deployment) { a.Labels[deploypolicy.TeamLabel] = "payments" })
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
	if err := expectDenied(err); err != nil {
		return err
	}

	step("The Widget pattern has admission too (same process as its controller): " + policyNS + "'s " + widget.PolicyConfigMap + " allows only nginx images")
	wp := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: widget.PolicyConfigMap, Namespace: policyNS},
		Data: map[string]string{widget.AllowedImagesKey: "nginx:"}}
	if err := d.recreate(wp, wp.DeepCopy()); err != nil {
		return err
	}
	fmt.Println("    kubectl -n demo-policy create -f widget.yaml   # image: busybox:1.36")
	return expectDenied(d.c.Create(d.ctx, &widgetv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "demo-outlaw", Namespace: policyNS},
		Spec: widgetv1alpha1.WidgetSpec{Image: "busybox:1.36"}}))
}

func (d *demo) dbpolicy() error {
	step("Install the Database CRD as its own operator would: dbpolicy validates Databases but never installs or owns their CRD")
	crd, err := thirdparty.DatabaseCRD()
	if err != nil {
		return err
	}
	if err := app.Install(d.ctx, d.cfg, []client.Object{crd}, os.Stdout); err != nil {
		return err
	}
	if err := d.start("dbpolicy"); err != nil {
		return err
	}
	orders := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"engine": "postgres", "version": "16.2", "storageGiB": int64(20)}}}
	orders.SetGroupVersionKind(dbpolicy.DatabaseGVK)
	orders.SetNamespace(policyNS)
	orders.SetName("demo-orders")
	step("Create Database demo-orders (postgres 16.2, 20 GiB) in " + policyNS)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) { // until the new kind is served
		_ = d.c.Delete(d.ctx, orders.DeepCopy()) // a previous run's
		err := d.c.Create(d.ctx, orders.DeepCopy())
		if err == nil {
			break
		}
		if !meta.IsNoMatchError(err) && !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			return err
		}
	}
	fmt.Println("    database.database.example.com/demo-orders created")
	patch := func(p string) error {
		fmt.Printf("    kubectl -n %s patch database demo-orders --type=merge -p '%s'\n", policyNS, p)
		return d.c.Patch(d.ctx, orders.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(p)))
	}
	step("Shrink its storage: denied, judged from the request's old and new objects alone (no cache, no reads, no RBAC)")
	if err := expectDenied(patch(`{"spec":{"storageGiB":10}}`)); err != nil {
		return err
	}
	step("Grow it, and try to switch engines")
	if err := patch(`{"spec":{"storageGiB":40}}`); err != nil {
		return err
	}
	fmt.Println("    database.database.example.com/demo-orders patched")
	return expectDenied(patch(`{"spec":{"engine":"mysql"}}`))
}

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

// expectDenied prints an admission denial as kubectl would, and fails on anything else.
// kubectlWarnings prints the API server's warnings as kubectl does.
type kubectlWarnings struct{}

func (kubectlWarnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	fmt.Printf("    Warning: %s\n", text)
}

// expectDenied prints an admission denial as kubectl does: Forbidden from a webhook, Invalid from
// an admission policy (a demo run again may meet the policies of its previous run for a moment
// after they were pruned).
func expectDenied(err error) error {
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		return fmt.Errorf("expected a denial, got %v", err)
	}
	fmt.Printf("    Error from server (%s): %v\n", apierrors.ReasonForError(err), err)
	return nil
}

// replicaSets waits until the Deployment has rolled out n ReplicaSets carrying a digest (the
// first one, before the reloader stamped a digest, is left out), and prints them.
func (d *demo) replicaSets(name, annotation string, n int) error {
	dep := &appsv1.Deployment{}
	var stamped []appsv1.ReplicaSet
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list := &appsv1.ReplicaSetList{}
		if err := d.c.List(d.ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
			return err
		}
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
			return err
		}
		stamped = slices.DeleteFunc(list.Items, func(rs appsv1.ReplicaSet) bool {
			return rs.Spec.Template.Annotations[annotation] == "" && annotation != ""
		})
		if len(stamped) == n && (annotation == "" || dep.Spec.Template.Annotations[annotation] != "") && rollout.Pending(dep, *dep.Spec.Replicas) == "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d ReplicaSets with a digest, want %d", name, len(stamped), n)
		}
	}
	fmt.Println("    REPLICASET                  DIGEST         READY")
	for _, rs := range stamped {
		fmt.Printf("    %-27s %-14.12s %d\n", rs.Name, cmp.Or(rs.Spec.Template.Annotations[digest.Annotation], "-"), rs.Status.ReadyReplicas)
	}
	return nil
}
