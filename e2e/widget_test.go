// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/shared/testenv"
	"github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	"github.com/kpatterns/kpatterns/widget/controller"
)

func TestWidget(t *testing.T) {
	ns := envconf.RandomName("widget", 12)
	key := client.ObjectKey{Namespace: ns, Name: "shop"}
	f := withPattern(features.New("widget"), "widget", ns).
		Assess("a Widget becomes Ready once kwok runs its Pods", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns},
				Spec: v1alpha1.WidgetSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](2), Config: map[string]string{"greeting": "hello"}}}
			if err := c.Create(ctx, w); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "Widget Ready", func(ctx context.Context) (bool, error) {
				if err := c.Get(ctx, key, w); err != nil {
					return false, err
				}
				return meta.IsStatusConditionTrue(w.Status.Conditions, "Ready") && w.Status.ReadyReplicas == 2 &&
					w.Status.ObservedGeneration == w.Generation, nil
			})
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": key.Name}); err != nil {
				t.Fatal(err)
			}
			if len(pods.Items) != 2 {
				t.Fatalf("%d Pods, want 2", len(pods.Items))
			}
			return ctx
		}).
		Assess("a Widget the namespace's widget-policy denies is refused", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: controller.PolicyConfigMap, Namespace: ns},
				Data: map[string]string{controller.AllowedImagesKey: "nginx:"}}); err != nil {
				t.Fatal(err)
			}
			w := &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "outlaw", Namespace: ns}, Spec: v1alpha1.WidgetSpec{Image: "busybox:1.36"}}
			testenv.Denied(t, c.Create(ctx, w), "is not allowed by ConfigMap widget-policy")
			return ctx
		}).
		Assess("the cluster's view and edit roles take in the Widget roles: a viewer lists, an editor creates", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			as := map[string]client.Client{}
			for user, role := range map[string]string{"e2e-viewer": "view", "e2e-editor": "edit"} {
				if err := c.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: user, Namespace: ns},
					Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: user}},
					RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role}}); err != nil {
					t.Fatal(err)
				}
				rc := rest.CopyConfig(cfg.Client().RESTConfig())
				rc.Impersonate = rest.ImpersonationConfig{UserName: user}
				uc, err := client.New(rc, client.Options{Scheme: scheme})
				if err != nil {
					t.Fatal(err)
				}
				as[user] = uc
			}
			w := func() *v1alpha1.Widget {
				return &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "by-a-user", Namespace: ns}, Spec: v1alpha1.WidgetSpec{Image: "nginx:1.27"}}
			}
			// kube-controller-manager's clusterrole-aggregation controller copies the rules in.
			testenv.Eventually(t, "the viewer lists Widgets, the editor creates one (dry run)", func() error {
				if err := as["e2e-viewer"].List(ctx, &v1alpha1.WidgetList{}, client.InNamespace(ns)); err != nil {
					return fmt.Errorf("the viewer: %w", err)
				}
				if err := as["e2e-editor"].Create(ctx, w(), client.DryRunAll); err != nil {
					return fmt.Errorf("the editor: %w", err)
				}
				return nil
			})
			if err := as["e2e-viewer"].Create(ctx, w(), client.DryRunAll); !apierrors.IsForbidden(err) {
				t.Errorf("the viewer creating a Widget: %v, want forbidden", err)
			}
			return ctx
		}).
		Assess("deleting the Widget garbage-collects its children", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := c.Delete(ctx, &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: ns}}); err != nil {
				t.Fatal(err)
			}
			for _, child := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{}} {
				waitFor(t, fmt.Sprintf("%T deleted", child), func(ctx context.Context) (bool, error) {
					err := c.Get(ctx, key, child)
					return apierrors.IsNotFound(err), client.IgnoreNotFound(err)
				})
			}
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
