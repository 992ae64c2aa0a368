// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests: a real kube-apiserver and etcd (envtest), the generated CRD and RBAC
// installed, the widget's manager running as its ServiceAccount. envtest runs no
// kube-controller-manager, so where a test needs a Deployment to be Available it writes the
// Deployment's status itself, as the deployment controller would; garbage collection of children
// is covered by the e2e suite.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/testenv"
	"github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	"github.com/kpatterns/kpatterns/widget/config"
	"github.com/kpatterns/kpatterns/widget/controller"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, AddToScheme: v1alpha1.AddToScheme, NewManager: newManager, Setup: setup}, func(e *testenv.Env) { env = e })
}

func widget(ns, name string) *v1alpha1.Widget {
	return &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.WidgetSpec{Image: "nginx:1.27", Config: map[string]string{"greeting": "hello", "color": "blue"}}}
}

func get[T client.Object](t *testing.T, obj T, ns, name string) T {
	t.Helper()
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// condition waits until the Widget's condition has the status and reason, and returns it.
func condition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) metav1.Condition {
	t.Helper()
	var got metav1.Condition
	testenv.Eventually(t, fmt.Sprintf("%s %s=%s/%s", name, typ, status, reason), func() error {
		w := &v1alpha1.Widget{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, w); err != nil {
			return err
		}
		c := meta.FindStatusCondition(w.Status.Conditions, typ)
		if c == nil {
			return fmt.Errorf("no %s condition in %+v", typ, w.Status.Conditions)
		}
		if c.Status != status || c.Reason != reason || c.ObservedGeneration != w.Generation || w.Status.ObservedGeneration != w.Generation {
			return fmt.Errorf("%s = %s/%s (%s) at generation %d/%d", typ, c.Status, c.Reason, c.Message, c.ObservedGeneration, w.Generation)
		}
		got = *c
		return nil
	})
	return got
}

// markAvailable plays the deployment controller: every replica updated, ready and available.
func markAvailable(t *testing.T, ns, name string) {
	t.Helper()
	testenv.Eventually(t, "Deployment status", func() error {
		d := &appsv1.Deployment{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		n := *d.Spec.Replicas
		d.Status = appsv1.DeploymentStatus{ObservedGeneration: d.Generation, Replicas: n, UpdatedReplicas: n,
			ReadyReplicas: n, AvailableReplicas: n, Conditions: []appsv1.DeploymentCondition{{
				Type: appsv1.DeploymentAvailable, Status: corev1.ConditionTrue, Reason: "MinimumReplicasAvailable",
				LastUpdateTime: metav1.Now(), LastTransitionTime: metav1.Now()}}}
		return env.Client.Status().Update(context.Background(), d)
	})
}

func TestStagesConvergeAndReportReady(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	w := widget(ns, "web")
	w.Spec.Replicas = ptr.To[int32](2)
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	condition(t, ns, "web", "ConfigMapReady", metav1.ConditionTrue, "Ready")
	condition(t, ns, "web", "ServiceReady", metav1.ConditionTrue, "Ready")
	condition(t, ns, "web", "DeploymentReady", metav1.ConditionFalse, "Progressing")
	// Ready takes the reason of the first stage that is not ready.
	if c := condition(t, ns, "web", "Ready", metav1.ConditionFalse, "Progressing"); !strings.HasPrefix(c.Message, "DeploymentReady: ") {
		t.Errorf("Ready message = %q", c.Message)
	}

	w = get(t, &v1alpha1.Widget{}, ns, "web")
	cm := get(t, &corev1.ConfigMap{}, ns, "web")
	if d := cmp.Diff(w.Spec.Config, cm.Data); d != "" {
		t.Errorf("ConfigMap data (-want +got):\n%s", d)
	}
	d := get(t, &appsv1.Deployment{}, ns, "web")
	c := d.Spec.Template.Spec.Containers[0]
	if *d.Spec.Replicas != 2 || c.Image != "nginx:1.27" || c.Ports[0].ContainerPort != 8080 ||
		d.Spec.Template.Spec.Volumes[0].ConfigMap.Name != "web" || c.VolumeMounts[0].MountPath != controller.ConfigMountPath {
		t.Errorf("Deployment spec = %+v", d.Spec)
	}
	svc := get(t, &corev1.Service{}, ns, "web")
	if p := svc.Spec.Ports[0]; p.Port != 8080 || p.TargetPort.StrVal != "http" || !cmp.Equal(svc.Spec.Selector, controller.PodLabels(w)) {
		t.Errorf("Service spec = %+v", svc.Spec)
	}
	for _, child := range []client.Object{cm, d, svc} {
		if o := metav1.GetControllerOf(child); o == nil || o.UID != w.UID || o.Kind != "Widget" {
			t.Errorf("%T controller reference = %+v", child, o)
		}
	}

	markAvailable(t, ns, "web")
	condition(t, ns, "web", "DeploymentReady", metav1.ConditionTrue, "Ready")
	condition(t, ns, "web", "Ready", metav1.ConditionTrue, "Ready")
	if w = get(t, &v1alpha1.Widget{}, ns, "web"); w.Status.ReadyReplicas != 2 {
		t.Errorf("readyReplicas = %d, want 2", w.Status.ReadyReplicas)
	}

	// A spec change flows through: a removed config key leaves the ConfigMap (server-side apply
	// drops fields the manager no longer applies).
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w := get(t, &v1alpha1.Widget{}, ns, "web")
		w.Spec.Config = map[string]string{"greeting": "hello"} // "color" removed, nothing else changed
		return env.Client.Update(ctx, w)
	})
	if err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "config key removal", func() error {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, cm); err != nil {
			return err
		}
		if d := cmp.Diff(map[string]string{"greeting": "hello"}, cm.Data); d != "" {
			return errors.New(d)
		}
		return nil
	})
}

func TestConvergedWidgetGetsNoWrite(t *testing.T) {
	ns := env.Namespace(t)
	mgr := env.Manager(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, widget(ns, "calm")); err != nil {
		t.Fatal(err)
	}
	condition(t, ns, "calm", "DeploymentReady", metav1.ConditionFalse, "Progressing")
	markAvailable(t, ns, "calm")
	condition(t, ns, "calm", "Ready", metav1.ConditionTrue, "Ready")

	objs := []client.Object{&v1alpha1.Widget{}, &corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}}
	rvs := map[string]string{}
	for _, o := range objs {
		get(t, o, ns, "calm")
		rvs[fmt.Sprintf("%T", o)] = o.GetResourceVersion()
		testenv.WaitCached(t, mgr.GetClient(), o) // the reconciler reads the cache
	}
	r, err := controller.NewReconciler(mgr)
	if err != nil {
		t.Fatal(err)
	}
	writes := testenv.CountWrites(mgr.GetClient())
	r.Client = writes
	for range 3 {
		if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "calm"}}); err != nil {
			t.Fatal(err)
		}
	}
	if n := writes.N(); n != 0 {
		t.Fatalf("%d write requests re-reconciling a converged Widget, want 0", n)
	}
	for _, o := range objs {
		if get(t, o, ns, "calm").GetResourceVersion() != rvs[fmt.Sprintf("%T", o)] {
			t.Errorf("%T was written", o)
		}
	}
}

func TestDriftIsRepairedAndOthersFieldsKept(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, widget(ns, "drift")); err != nil {
		t.Fatal(err)
	}
	condition(t, ns, "drift", "DeploymentReady", metav1.ConditionFalse, "Progressing")
	condition(t, ns, "drift", "ServiceReady", metav1.ConditionTrue, "Ready")

	// Someone scales the Deployment and annotates it.
	d := get(t, &appsv1.Deployment{}, ns, "drift")
	d.Spec.Replicas = ptr.To[int32](5)
	d.Annotations["team"] = "platform"
	if err := env.Client.Update(ctx, d, client.FieldOwner("someone")); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "replicas put back", func() error {
		d := get(t, &appsv1.Deployment{}, ns, "drift")
		if *d.Spec.Replicas != 1 {
			return fmt.Errorf("replicas = %d", *d.Spec.Replicas)
		}
		if d.Annotations["team"] != "platform" {
			return fmt.Errorf("the user's annotation was removed: %v", d.Annotations)
		}
		return nil
	})

	// Someone deletes the Service.
	if err := env.Client.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "drift"}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Service recreated", func() error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "drift"}, &corev1.Service{})
	})
}

// A same-named ConfigMap the Widget does not own: never taken over; its stage reports NotOwned
// with a Warning event; the Deployment, which needs the ConfigMap, is not run and says why; the
// independent Service stage still runs.
func TestForeignChildAndDependencyRule(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "taken", Namespace: ns}, Data: map[string]string{"mine": "yes"}}
	if err := env.Client.Create(ctx, foreign); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, widget(ns, "taken")); err != nil {
		t.Fatal(err)
	}
	c := condition(t, ns, "taken", "ConfigMapReady", metav1.ConditionFalse, "NotOwned")
	if !strings.Contains(c.Message, "ConfigMap taken exists and is not controlled by this object") {
		t.Errorf("message = %q", c.Message)
	}
	c = condition(t, ns, "taken", "DeploymentReady", metav1.ConditionFalse, "DependencyNotReady")
	if c.Message != "waiting for stage ConfigMap" {
		t.Errorf("message = %q", c.Message)
	}
	condition(t, ns, "taken", "ServiceReady", metav1.ConditionTrue, "Ready")
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "taken"}, &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment of a blocked stage: err = %v, want NotFound", err)
	}
	after := get(t, &corev1.ConfigMap{}, ns, "taken")
	if after.ResourceVersion != foreign.ResourceVersion {
		t.Errorf("foreign ConfigMap changed: %+v", after)
	}
	env.WaitForEvent(t, ns, "taken", corev1.EventTypeWarning, "NotOwned", "")
	env.WaitForEvent(t, ns, "taken", corev1.EventTypeNormal, "ServiceReady", "Service taken on port 8080")
}

// A Widget deleted and re-created under the same name finds its predecessor's children (envtest
// has no garbage collector to remove them): they are not taken over, and the condition says it
// waits for the garbage collector rather than reporting a foreign object.
func TestRecreatedWidgetWaitsForGarbageCollection(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, widget(ns, "again")); err != nil {
		t.Fatal(err)
	}
	condition(t, ns, "again", "ConfigMapReady", metav1.ConditionTrue, "Ready")
	old := get(t, &corev1.ConfigMap{}, ns, "again")
	if err := env.Client.Delete(ctx, &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "again", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "Widget gone", func() error {
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "again"}, &v1alpha1.Widget{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (%v)", err)
	})
	if err := env.Client.Create(ctx, widget(ns, "again")); err != nil {
		t.Fatal(err)
	}
	c := condition(t, ns, "again", "ConfigMapReady", metav1.ConditionFalse, "WaitingForGarbageCollection")
	if !strings.Contains(c.Message, "earlier object of this name") {
		t.Errorf("message = %q", c.Message)
	}
	if after := get(t, &corev1.ConfigMap{}, ns, "again"); after.ResourceVersion != old.ResourceVersion {
		t.Error("the predecessor's ConfigMap was written")
	}
	for _, e := range env.Events(t, ns, "again") {
		// The pattern's events regard the Widget; kube-apiserver's own (its ClusterIP repair
		// loop's, about the predecessor's Service, say) are not the pattern's to answer for.
		if e.Type == corev1.EventTypeWarning && e.InvolvedObject.Kind == "Widget" {
			t.Errorf("a Warning for the predecessor's child: %s %s", e.Reason, e.Message)
		}
	}
}

// An error from the API server surfaces in the stage's condition, with its reason: here the
// ResourceQuota admission plugin forbids any Service in the namespace.
func TestAPIErrorsSurfaceInConditions(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	rq := &corev1.ResourceQuota{ObjectMeta: metav1.ObjectMeta{Name: "no-services", Namespace: ns},
		Spec: corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}}}
	if err := env.Client.Create(ctx, rq); err != nil {
		t.Fatal(err)
	}
	// envtest runs no quota controller: record the usage it would.
	rq.Status = corev1.ResourceQuotaStatus{Hard: rq.Spec.Hard, Used: corev1.ResourceList{corev1.ResourceServices: resource.MustParse("0")}}
	if err := env.Client.Status().Update(ctx, rq); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, widget(ns, "quota")); err != nil {
		t.Fatal(err)
	}
	c := condition(t, ns, "quota", "ServiceReady", metav1.ConditionFalse, "Forbidden")
	if !strings.Contains(c.Message, "quota") {
		t.Errorf("message = %q, want the API server's reason", c.Message)
	}
	condition(t, ns, "quota", "ConfigMapReady", metav1.ConditionTrue, "Ready")
}

func TestInvalidSpecsAreRejected(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t) // its webhooks are called before the schema's validation
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.Widget)
		says   string
	}{
		{"no-image", func(w *v1alpha1.Widget) { w.Spec.Image = "" }, "spec.image"},
		{"negative-replicas", func(w *v1alpha1.Widget) { w.Spec.Replicas = ptr.To[int32](-1) }, "spec.replicas"},
		{"port-too-high", func(w *v1alpha1.Widget) { w.Spec.Port = 70000 }, "spec.port"},
		{"dotted.name", func(*v1alpha1.Widget) {}, "must be a DNS-1035 label"},
		{"bad-config-key", func(w *v1alpha1.Widget) { w.Spec.Config = map[string]string{"no spaces": "x"} }, "config keys must be valid ConfigMap keys"},
	} {
		w := widget(ns, tc.name)
		tc.mutate(w)
		err := env.Client.Create(context.Background(), w)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want Invalid mentioning %q", tc.name, err, tc.says)
		}
	}
	// Defaults are applied by the API server.
	w := widget(ns, "defaults")
	if err := env.Client.Create(context.Background(), w); err != nil {
		t.Fatal(err)
	}
	if w.Spec.Replicas == nil || *w.Spec.Replicas != 1 || w.Spec.Port != 8080 {
		t.Errorf("defaults: replicas %v, port %d; want 1 and 8080", w.Spec.Replicas, w.Spec.Port)
	}
}

// Admission: the Widget's webhooks run in the same manager as its controller. A Widget without a
// team label gets team=unassigned; the namespace's widget-policy ConfigMap (read live) limits
// images and replicas; a denied Widget is never stored, so the controller never sees it.
func TestPolicyAdmission(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	free := widget(ns, "free")
	if err := env.Client.Create(ctx, free); err != nil {
		t.Fatalf("no policy: %v", err)
	}
	if free.Labels[controller.TeamLabel] != controller.Unassigned {
		t.Errorf("labels = %v, want team=unassigned defaulted", free.Labels)
	}
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: controller.PolicyConfigMap, Namespace: ns},
		Data: map[string]string{controller.AllowedImagesKey: "registry.example.com/, nginx:", controller.MaxReplicasKey: "3"}}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name   string
		mutate func(*v1alpha1.Widget)
		says   string
	}{
		{"busybox", func(w *v1alpha1.Widget) { w.Spec.Image = "busybox:1.36" },
			`image "busybox:1.36" is not allowed by ConfigMap widget-policy: it must start with one of registry.example.com/, nginx:`},
		{"many", func(w *v1alpha1.Widget) { w.Spec.Replicas = ptr.To[int32](5) }, "ConfigMap widget-policy allows at most 3 replicas; asked for 5"},
	} {
		w := widget(ns, tc.name)
		tc.mutate(w)
		err := env.Client.Create(ctx, w)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want a denial saying %q", tc.name, err, tc.says)
		}
		// Never stored, so never reconciled: no children.
		for _, child := range []client.Object{&v1alpha1.Widget{}, &corev1.ConfigMap{}, &appsv1.Deployment{}} {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: tc.name}, child); !apierrors.IsNotFound(err) {
				t.Errorf("%s: %T: err = %v, want NotFound", tc.name, child, err)
			}
		}
	}
	ok := widget(ns, "allowed")
	ok.Spec.Replicas = ptr.To[int32](3)
	if err := env.Client.Create(ctx, ok); err != nil {
		t.Fatalf("an allowed Widget: %v", err)
	}
	condition(t, ns, "allowed", "ConfigMapReady", metav1.ConditionTrue, "Ready")

	// "free" predates the ceiling; editing it is allowed, growing it past the ceiling is not.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w := get(t, &v1alpha1.Widget{}, ns, "free")
		w.Labels["tier"] = "web"
		return env.Client.Update(ctx, w)
	})
	if err != nil {
		t.Errorf("a label edit under a tightened policy: %v", err)
	}
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		w := get(t, &v1alpha1.Widget{}, ns, "free")
		w.Spec.Replicas = ptr.To[int32](4)
		return env.Client.Update(ctx, w)
	})
	if !apierrors.IsForbidden(err) {
		t.Errorf("growing past the ceiling: err = %v, want a denial", err)
	}
}
