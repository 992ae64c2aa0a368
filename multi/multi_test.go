// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration test: the composition's union manifests installed in envtest's kube-apiserver, its
// one manager running as the composition's ServiceAccount, and all three controllers at work.

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	mirrorconfig "github.com/kpatterns/kpatterns/mirror/config"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	reloaderconfig "github.com/kpatterns/kpatterns/reloader/config"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/testenv"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	summaryconfig "github.com/kpatterns/kpatterns/summary/config"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	p, err := app.Compose(Name, mirrorconfig.Pattern, reloaderconfig.Pattern, summaryconfig.Pattern)
	if err != nil {
		panic(err)
	}
	setupAll := func(mgr manager.Manager) error {
		return setup(mgr, reloader.Options{CoalesceWindow: reloader.DefaultCoalesceWindow})
	}
	testenv.Main(m, testenv.Pattern{Pattern: p, AddToScheme: summaryv1alpha1.AddToScheme, NewManager: newManager, Setup: setupAll},
		func(e *testenv.Env) { env = e })
}

func TestMirrorsReloadsAndSummarizesInOneProcess(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	get := func(obj client.Object, name string) error {
		return env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, obj)
	}

	// mirror: a labelled ConfigMap gets its mirror.
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings", Namespace: ns, Labels: map[string]string{mirror.Label: mirror.Source}},
		Data: map[string]string{"level": "info"}}
	if err := env.Client.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the mirror", func() error {
		child := &corev1.ConfigMap{}
		if err := get(child, "settings"+mirror.Suffix); err != nil {
			return err
		}
		if child.Data["level"] != "info" {
			return fmt.Errorf("child data %v", child.Data)
		}
		return nil
	})

	// reloader: an opted-in Deployment using that ConfigMap rolls when it changes. reloader sees
	// the ConfigMap in its own cache, although mirror's shared informer selects only labelled ones.
	sel := map[string]string{"app": "web"}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: ns, Labels: map[string]string{reloader.OptIn: "true"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](1), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "nginx", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "plain"}}}}}}}}}}
	plain := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "plain", Namespace: ns}, Data: map[string]string{"a": "1"}}
	if err := env.Client.Create(ctx, plain); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	stamped := func() string {
		if err := get(d, "web"); err != nil {
			t.Fatal(err)
		}
		return d.Spec.Template.Annotations[digest.Annotation]
	}
	testenv.Eventually(t, "the reloader's baseline", func() error {
		if err := get(d, "web"); err != nil {
			return err
		}
		if d.Annotations[reloader.DigestsAnnotation] == "" {
			return fmt.Errorf("no %s yet", reloader.DigestsAnnotation)
		}
		return nil
	})
	first := stamped() // none: the reloader's first sight leaves the template alone
	plain.Data["a"] = "2"
	if err := env.Client.Update(ctx, plain); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "a new digest after the change", func() error {
		if now := stamped(); now == first {
			return fmt.Errorf("digest still %s", now)
		}
		return nil
	})

	// summary: a Workload over a Pod.
	if err := env.Client.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "api-1", Namespace: ns, Labels: map[string]string{"app": "api"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}); err != nil {
		t.Fatal(err)
	}
	w := &summaryv1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "api", Namespace: ns}, Spec: summaryv1alpha1.WorkloadSpec{Selector: map[string]string{"app": "api"}}}
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "the Workload's summary", func() error {
		if err := get(w, "api"); err != nil {
			return err
		}
		if w.Status.Total != 1 {
			return fmt.Errorf("total %d", w.Status.Total)
		}
		return nil
	})
}
