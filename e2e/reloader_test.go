// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"
	"sigs.k8s.io/yaml"

	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/rollout"
)

// deploymentUsing is a one-replica Deployment whose container reads ConfigMap cm through envFrom.
func deploymentUsing(ns, name, cm string, optIn bool) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27", EnvFrom: []corev1.EnvFromSource{{
				ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: cm}}}}}}}}}}
	if optIn {
		d.Labels = map[string]string{controller.OptIn: "true"}
	}
	return d
}

// rolledOut waits for a Deployment to be rolled out and Available, and returns its ReplicaSets.
func rolledOut(ctx context.Context, t *testing.T, c client.Client, ns, name string) []appsv1.ReplicaSet {
	t.Helper()
	d := &appsv1.Deployment{}
	waitFor(t, name+" rolled out", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return false, err
		}
		return rollout.Pending(d, *d.Spec.Replicas) == "", nil
	})
	list := &appsv1.ReplicaSetList{}
	if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
		t.Fatal(err)
	}
	return list.Items
}

func TestReloader(t *testing.T) {
	ns := envconf.RandomName("reloader", 16)
	f := withPattern(features.New("reloader"), "reloader", ns).
		Assess("a ConfigMap update rolls the opted-in Deployment and leaves the other alone", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "app-config", Namespace: ns}, Data: map[string]string{"level": "info"}}
			for _, obj := range []client.Object{cm, deploymentUsing(ns, "opted", "app-config", true), deploymentUsing(ns, "plain", "app-config", false)} {
				if err := c.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			var baseline string // configmap/app-config=<16 hex>
			waitFor(t, "the reloader's baseline on the opted-in Deployment", func(ctx context.Context) (bool, error) {
				d := &appsv1.Deployment{}
				err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "opted"}, d)
				baseline = d.Annotations[controller.DigestsAnnotation]
				return err == nil && baseline != "", err
			})
			before := rolledOut(ctx, t, c, ns, "opted")
			if len(before) != 1 {
				t.Fatalf("a Deployment created opted in has %d ReplicaSets, want 1: the reloader's first sight rolled it", len(before))
			}
			plainBefore := rolledOut(ctx, t, c, ns, "plain")

			setKey(ctx, t, c, ns, cm.Name, "level", "debug")
			waitFor(t, "a new ReplicaSet for the opted-in Deployment", func(ctx context.Context) (bool, error) {
				list := &appsv1.ReplicaSetList{}
				err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": "opted"})
				return err == nil && len(list.Items) == len(before)+1, err
			})
			rolledOut(ctx, t, c, ns, "opted") // its Pods are Ready again
			// The rollout explained: the source, its recorded digest before and after, the key, no value.
			note := regexp.MustCompile(`^rolling out for changed data of configmap/app-config \(` +
				regexp.QuoteMeta(strings.TrimPrefix(baseline, "configmap/app-config=")) + ` → [0-9a-f]{16}; keys level\)$`)
			waitFor(t, "the RollingOut event naming configmap/app-config and its digests", func(ctx context.Context) (bool, error) {
				list := &eventsv1.EventList{}
				if err := c.List(ctx, list, client.InNamespace(ns)); err != nil {
					return false, err
				}
				for _, e := range list.Items {
					if e.Regarding.Name == "opted" && e.Reason == controller.ReasonRollingOut {
						if !note.MatchString(e.Note) {
							return false, fmt.Errorf("RollingOut note %q, want %s", e.Note, note)
						}
						return true, nil
					}
				}
				return false, nil
			})
			if after := rolledOut(ctx, t, c, ns, "plain"); len(after) != len(plainBefore) {
				t.Fatalf("the Deployment that did not opt in rolled: %d ReplicaSets, was %d", len(after), len(plainBefore))
			}
			plain := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "plain"}, plain); err != nil {
				t.Fatal(err)
			}
			if _, ok := plain.Spec.Template.Annotations[digest.Annotation]; ok {
				t.Fatal("the Deployment that did not opt in was annotated")
			}
			return ctx
		}).
		Assess("only the keys a workload reads count; a CronJob's Job template follows the key it reads", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "keys", Namespace: ns}, Data: map[string]string{"level": "info", "port": "80", "unused": "a"}}
			keyRef := func(key string) []corev1.EnvVar {
				return []corev1.EnvVar{{Name: "V", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "keys"}, Key: key}}}}
			}
			byPort, whole := deploymentUsing(ns, "by-port", "keys", true), deploymentUsing(ns, "whole", "keys", true) // whole: envFrom, every key
			byPort.Spec.Template.Spec.Containers[0].EnvFrom, byPort.Spec.Template.Spec.Containers[0].Env = nil, keyRef("port")
			for _, d := range []*appsv1.Deployment{byPort, whole} {
				d.Spec.Replicas = ptr.To[int32](0) // ReplicaSets count the rollouts; no Pods needed
			}
			byLevel := &batchv1.CronJob{ObjectMeta: metav1.ObjectMeta{Name: "by-level", Namespace: ns, Labels: map[string]string{controller.OptIn: "true"}},
				Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: ptr.To(true), JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{
					Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{RestartPolicy: corev1.RestartPolicyNever,
						Containers: []corev1.Container{{Name: "job", Image: "busybox:1.37", Env: keyRef("level")}}}}}}}}
			for _, obj := range []client.Object{cm, byPort, whole, byLevel} {
				if err := c.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			recorded := func(obj client.Object) string {
				if err := c.Get(ctx, client.ObjectKeyFromObject(obj), obj); err != nil {
					t.Fatal(err)
				}
				return obj.GetAnnotations()[controller.DigestsAnnotation]
			}
			waitFor(t, "the reloader's baselines", func(context.Context) (bool, error) {
				return recorded(byPort) != "" && recorded(whole) != "" && recorded(byLevel) != "", nil
			})
			if r := recorded(byLevel); !strings.HasPrefix(r, "configmap/keys:level=") {
				t.Fatalf("the CronJob's record is %q, want the key it reads: configmap/keys:level=…", r)
			}
			replicaSets := func(name string) int {
				list := &appsv1.ReplicaSetList{}
				if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
					t.Fatal(err)
				}
				return len(list.Items)
			}
			change := func(key, value string) { setKey(ctx, t, c, ns, cm.Name, key, value) }
			waitFor(t, "first ReplicaSets", func(context.Context) (bool, error) {
				return replicaSets("by-port") == 1 && replicaSets("whole") == 1, nil
			})
			// A key nobody but the envFrom reader reads: "whole" rolls (the witness that the change
			// was seen), the key readers do not.
			change("unused", "b")
			waitFor(t, "whole rolled for the unused key", func(context.Context) (bool, error) { return replicaSets("whole") == 2, nil })
			change("port", "8080")
			waitFor(t, "by-port rolled for its key", func(context.Context) (bool, error) {
				return replicaSets("by-port") == 2 && replicaSets("whole") == 3, nil
			})
			if recorded(byLevel); byLevel.Spec.JobTemplate.Spec.Template.Annotations[digest.Annotation] != "" {
				t.Fatal("the CronJob's Job template was stamped before the key it reads changed")
			}
			change("level", "debug")
			waitFor(t, "the CronJob's Job template stamped for its key", func(context.Context) (bool, error) {
				cj := &batchv1.CronJob{}
				err := c.Get(ctx, client.ObjectKeyFromObject(byLevel), cj)
				return err == nil && cj.Spec.JobTemplate.Spec.Template.Annotations[digest.Annotation] != "", err
			})
			waitFor(t, "whole rolled for level", func(context.Context) (bool, error) { return replicaSets("whole") == 4, nil })
			if n := replicaSets("by-port"); n != 2 {
				t.Fatalf("by-port has %d ReplicaSets, want 2: it rolled for a key it does not read", n)
			}
			return ctx
		}).
		Assess("a required source deleted warns and rolls nothing; re-created with other data it rolls once", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fragile", Namespace: ns}, Data: map[string]string{"k": "v"}}
			web := deploymentUsing(ns, "fragile-web", "fragile", true)
			web.Spec.Replicas = ptr.To[int32](0)
			for _, obj := range []client.Object{cm, web} {
				if err := c.Create(ctx, obj); err != nil {
					t.Fatal(err)
				}
			}
			waitFor(t, "fragile-web's baseline", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(web), web)
				return err == nil && web.Annotations[controller.DigestsAnnotation] != "", err
			})
			if err := c.Delete(ctx, cm); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "the SourceMissing warning on fragile-web", func(ctx context.Context) (bool, error) {
				list := &eventsv1.EventList{}
				err := c.List(ctx, list, client.InNamespace(ns))
				return err == nil && slices.ContainsFunc(list.Items, func(e eventsv1.Event) bool {
					return e.Regarding.Name == "fragile-web" && e.Reason == controller.ReasonSourceMissing && e.Type == corev1.EventTypeWarning
				}), err
			})
			generation := web.Generation
			cm = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fragile", Namespace: ns}, Data: map[string]string{"k": "other"}}
			if err := c.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "fragile-web rolled once for the re-created data", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(web), web)
				return err == nil && web.Spec.Template.Annotations[digest.Annotation] != "", err
			})
			if web.Generation != generation+1 {
				t.Fatalf("fragile-web's generation %d → %d: want one write, the rollout", generation, web.Generation)
			}
			return ctx
		}).
		Feature()

	// --with argo-rollouts: install grants the rule and the run enables it; a Rollout (its CRD as
	// Argo Rollouts' module ships it, no Argo controller) is restarted through spec.restartAt.
	argoNS := envconf.RandomName("reloader-argo", 20)
	crd := &apiextensionsv1.CustomResourceDefinition{}
	argo := withPattern(features.New("reloader --with argo-rollouts").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			b, err := os.ReadFile(filepath.Join(root, "reloader", "testdata", "argoproj.io_rollouts.yaml"))
			if err != nil {
				t.Fatal(err)
			}
			if err := yaml.Unmarshal(b, crd); err != nil {
				t.Fatal(err)
			}
			installCRD(ctx, t, cfg, crd, controller.RolloutGroupVersion.WithKind("RolloutList"))
			return ctx
		}), "reloader", argoNS, "--with="+controller.ArgoRolloutsFeature.Name).
		Assess("a Rollout is restarted through spec.restartAt, its Pod template untouched", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "canary-config", Namespace: argoNS}, Data: map[string]string{"k": "1"}}
			if err := c.Create(ctx, cm); err != nil {
				t.Fatal(err)
			}
			canary := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "argoproj.io/v1alpha1", "kind": "Rollout",
				"metadata": map[string]any{"name": "canary", "namespace": argoNS, "labels": map[string]any{controller.OptIn: "true"}},
				"spec": map[string]any{"replicas": int64(0), "selector": map[string]any{"matchLabels": map[string]any{"app": "canary"}},
					"template": map[string]any{"metadata": map[string]any{"labels": map[string]any{"app": "canary"}},
						"spec": map[string]any{"containers": []any{map[string]any{"name": "app", "image": "nginx",
							"envFrom": []any{map[string]any{"configMapRef": map[string]any{"name": "canary-config"}}}}}}}},
			}}
			if err := c.Create(ctx, canary); err != nil {
				t.Fatal(err)
			}
			template, _, _ := unstructured.NestedMap(canary.Object, "spec", "template")
			waitFor(t, "the reloader's baseline on the Rollout", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(canary), canary)
				return err == nil && canary.GetAnnotations()[controller.DigestsAnnotation] != "", err
			})
			generation := canary.GetGeneration()
			setKey(ctx, t, c, argoNS, cm.Name, "k", "2")
			waitFor(t, "spec.restartAt on the Rollout", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(canary), canary)
				at, _, _ := unstructured.NestedString(canary.Object, "spec", "restartAt")
				return err == nil && at != "", err
			})
			if got, _, _ := unstructured.NestedMap(canary.Object, "spec", "template"); !equality.Semantic.DeepEqual(template, got) {
				t.Errorf("the Rollout's Pod template changed: %v, was %v", got, template)
			}
			if canary.GetGeneration() != generation+1 {
				t.Errorf("the Rollout's generation %d → %d: want one write, the restart", generation, canary.GetGeneration())
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_ = clientFor(t, cfg).Delete(ctx, crd)
			return ctx
		}).
		Feature()
	// --with namespace-selector: install grants the rule and the run enables it; only a namespace
	// labelled as the default selector says is cached, and one labelled while it runs is followed.
	selectedNS, otherNS := envconf.RandomName("reloader-selected", 24), envconf.RandomName("reloader-other", 24)
	selector := withPattern(features.New("reloader --with namespace-selector").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if err := clientFor(t, cfg).Create(ctx, testNamespace(otherNS)); err != nil {
				t.Fatal(err)
			}
			return ctx
		}), "reloader", selectedNS, "--with="+controller.NamespaceSelectorFeature.Name).
		Assess("only the labelled namespace's Deployment is recorded and rolled", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			webs := map[string]*appsv1.Deployment{}
			for _, ns := range []string{otherNS, selectedNS} {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "web-config", Namespace: ns}, Data: map[string]string{"k": "1"}}
				webs[ns] = deploymentUsing(ns, "web", cm.Name, true)
				webs[ns].Spec.Replicas = ptr.To[int32](0)
				for _, obj := range []client.Object{cm, webs[ns]} {
					if err := c.Create(ctx, obj); err != nil {
						t.Fatal(err)
					}
				}
			}
			key, value, _ := strings.Cut(controller.DefaultNamespaceSelector, "=")
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
			if err := c.Patch(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: selectedNS}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatal(err)
			}
			web := webs[selectedNS]
			waitFor(t, "the labelled namespace's Deployment recorded", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(web), web)
				return err == nil && web.Annotations[controller.DigestsAnnotation] != "", err
			})
			generation := web.Generation
			setKey(ctx, t, c, otherNS, "web-config", "k", "2")
			setKey(ctx, t, c, selectedNS, "web-config", "k", "2")
			waitFor(t, "the labelled namespace's Deployment rolled", func(ctx context.Context) (bool, error) {
				err := c.Get(ctx, client.ObjectKeyFromObject(web), web)
				return err == nil && web.Spec.Template.Annotations[digest.Annotation] != "", err
			})
			if web.Generation != generation+1 {
				t.Errorf("the labelled namespace's Deployment: generation %d → %d, want one write", generation, web.Generation)
			}
			other := &appsv1.Deployment{}
			if err := c.Get(ctx, client.ObjectKeyFromObject(webs[otherNS]), other); err != nil {
				t.Fatal(err)
			}
			if r, d := other.Annotations[controller.DigestsAnnotation], other.Spec.Template.Annotations[digest.Annotation]; r != "" || d != "" {
				t.Errorf("the Deployment of a namespace not selected was written: record %q, template digest %q", r, d)
			}
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: otherNS}})
			return ctx
		}).
		Feature()
	testEnv.Test(t, f, argo, selector)
}
