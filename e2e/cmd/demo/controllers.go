// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The controller patterns' scenes: each installs and runs its pattern, then shows it at work.

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	childsetv1alpha1 "github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	childset "github.com/kpatterns/kpatterns/childset/controller"
	conditionalv1alpha1 "github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	conditional "github.com/kpatterns/kpatterns/conditional/controller"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/conditions"
	"github.com/kpatterns/kpatterns/shared/digest"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	widgetv1alpha1 "github.com/kpatterns/kpatterns/widget/api/v1alpha1"
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

func (d *demo) widget() error {
	if err := d.start("widget"); err != nil {
		return err
	}
	step("Apply a Widget: image, 2 replicas, a config map")
	w := &widgetv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "demo-shop", Namespace: ns},
		Spec: widgetv1alpha1.WidgetSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](2), Config: map[string]string{"greeting": "hello"}}}
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
	return nil
}

func (d *demo) conditional() error {
	if err := d.start("conditional"); err != nil {
		return err
	}
	step("Apply a ConfigProfile for environment staging: the default case matches")
	p := &conditionalv1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "demo-profile", Namespace: ns},
		Spec: conditionalv1alpha1.ConfigProfileSpec{Image: "nginx:1.27", Environment: "staging"}}
	if err := d.recreate(p, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}}); err != nil {
		return err
	}
	if err := d.profileReady(p, "default"); err != nil {
		return err
	}
	step("Switch to production: a different configuration, a new digest, a new ReplicaSet")
	if err := d.updateProfile(p, func(s *conditionalv1alpha1.ConfigProfileSpec) { s.Environment = "production" }); err != nil {
		return err
	}
	if err := d.profileReady(p, "production"); err != nil {
		return err
	}

	step("Suspend it: the suspended case matches first and waits; nothing is generated or rolled")
	if err := d.updateProfile(p, func(s *conditionalv1alpha1.ConfigProfileSpec) { s.Suspended = true }); err != nil {
		return err
	}
	err := d.waitFor(p.Name, p, func() bool {
		c := meta.FindStatusCondition(p.Status.Conditions, conditions.Ready)
		return p.Status.ObservedGeneration == p.Generation && c != nil && c.Reason == conditional.ReasonSuspended
	})
	if err != nil {
		return err
	}
	showConditions(p.Status.Conditions)

	step("Resume it, reading its configuration from ConfigMap demo-upstream (labelled " + conditional.Label + "=" + conditional.Input + "): the input case")
	in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-upstream", Namespace: ns,
		Labels: map[string]string{conditional.Label: conditional.Input}}, Data: map[string]string{"mode": "upstream", "feature-x": "on"}}
	if err := d.recreate(in, in.DeepCopy()); err != nil {
		return err
	}
	if err := d.updateProfile(p, func(s *conditionalv1alpha1.ConfigProfileSpec) { s.Suspended, s.ConfigFrom = false, in.Name }); err != nil {
		return err
	}
	return d.profileReady(p, "input")
}

func (d *demo) updateProfile(p *conditionalv1alpha1.ConfigProfile, mutate func(*conditionalv1alpha1.ConfigProfileSpec)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		mutate(&p.Spec)
		return d.c.Update(d.ctx, p)
	})
}

func (d *demo) profileReady(p *conditionalv1alpha1.ConfigProfile, matched string) error {
	err := d.waitFor(p.Name, p, func() bool {
		return p.Status.MatchedCase == matched && p.Status.ObservedGeneration == p.Generation && ready(p.Status.Conditions)
	})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{}
	if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(p), cm); err != nil {
		return err
	}
	show(p.Name, map[string]any{"matchedCase": matched, "configDigest": p.Status.ConfigDigest[:12], "generated config": cm.Data})
	rsets := &appsv1.ReplicaSetList{}
	if err := d.c.List(d.ctx, rsets, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": p.Name}); err != nil {
		return err
	}
	fmt.Println("    REPLICASET                        DIGEST         READY")
	for _, rs := range rsets.Items {
		fmt.Printf("    %-33s %-14s %d\n", rs.Name, rs.Spec.Template.Annotations[digest.Annotation][:12], rs.Status.ReadyReplicas)
	}
	return nil
}

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

func (d *demo) summary() error {
	if err := d.start("summary"); err != nil {
		return err
	}
	step("A Workload selecting app=demo-web summarizes the Deployment's Pods (it never writes them)")
	w := &summaryv1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "demo-web", Namespace: ns},
		Spec: summaryv1alpha1.WorkloadSpec{Selector: map[string]string{"app": "demo-web"}}}
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

func (d *demo) childset() error {
	if err := d.start("childset"); err != nil {
		return err
	}
	step("Bundle demo-bundle has three entries: one ConfigMap each, named by a hash of (Bundle UID, key)")
	b := &childsetv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "demo-bundle", Namespace: ns},
		Spec: childsetv1alpha1.BundleSpec{Entries: map[string]string{"log.level": "info", "FEATURE_X": "on", "region": "eu-west"}}}
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
