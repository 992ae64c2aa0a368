// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app_test

import (
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/app"
)

func member(name string, byObject map[client.Object]cache.ByObject) app.CacheScope {
	return app.CacheScope{Name: name, Options: func(o *cache.Options) {
		for obj, by := range byObject {
			app.CacheByObject(o, obj, by)
		}
	}}
}

func selector(s string) labels.Selector {
	sel, err := labels.Parse(s)
	if err != nil {
		panic(err)
	}
	return sel
}

func TestMergeCache(t *testing.T) {
	strip := func(obj any) (any, error) { return obj, nil }
	mirrorLike := member("mirror", map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: selector("mirror in (source,child)")}})
	reloaderLike := member("reloader", map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {}, &appsv1.Deployment{}: {Label: selector("reload=true")}})
	summaryLike := member("summary", map[client.Object]cache.ByObject{&corev1.Pod{}: {Transform: strip}})

	var got cache.Options
	if err := app.MergeCache(&got, mirrorLike, reloaderLike, summaryLike); err != nil {
		t.Fatal(err)
	}
	scope := map[string]string{}
	for obj, by := range got.ByObject {
		s := "all"
		if by.Label != nil {
			s = by.Label.String()
		}
		if by.Transform != nil {
			s += " transformed"
		}
		scope[typeName(obj)] = s
	}
	want := map[string]string{"ConfigMap": "all", "Deployment": "reload=true", "Pod": "all transformed"}
	if d := cmp.Diff(want, scope); d != "" {
		t.Errorf("merged scopes (-want +got):\n%s", d)
	}

	for _, tc := range []struct {
		name    string
		members []app.CacheScope
		says    string
	}{
		{"two selectors", []app.CacheScope{mirrorLike, member("other", map[client.Object]cache.ByObject{&corev1.ConfigMap{}: {Label: selector("team=a")}})},
			`mirror and other cache ConfigMap by different labels ("mirror in (child,source)", "team=a")`},
		{"a transform and another reader", []app.CacheScope{summaryLike, member("podreader", map[client.Object]cache.ByObject{&corev1.Pod{}: {}})},
			"summary and podreader both cache Pod and one transforms it"},
	} {
		if err := app.MergeCache(&cache.Options{}, tc.members...); err == nil || !strings.Contains(err.Error(), tc.says) {
			t.Errorf("%s: err = %v, want one saying %q", tc.name, err, tc.says)
		}
	}
}

func typeName(obj client.Object) string {
	switch obj.(type) {
	case *corev1.ConfigMap:
		return "ConfigMap"
	case *appsv1.Deployment:
		return "Deployment"
	case *corev1.Pod:
		return "Pod"
	}
	return "?"
}

// The composition's manifests: its own ServiceAccount, one ClusterRole with the union of the
// members' rules (a rule two members share appears once), every member's CRD.
func TestComposeManifestsAreTheUnion(t *testing.T) {
	const deploymentsRole = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: b
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
- apiGroups: [apps]
  resources: [deployments]
  verbs: [get, list, watch, patch]
`
	a := pattern
	a.Name = "a"
	a.Config = fstest.MapFS{"rbac/role.yaml": {Data: []byte(roleYAML)}, "crd/gadgets.yaml": {Data: []byte(crdYAML)}}
	b := pattern
	b.Name = "b"
	b.Config = fstest.MapFS{"rbac/role.yaml": {Data: []byte(deploymentsRole)}}
	multi, err := app.Compose("multi", a, b)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := app.Objects(multi, app.Options{Namespace: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"CustomResourceDefinition /gadgets.example.kpatterns.dev",
		"ClusterRole /kpatterns-multi-gadgets-admin", "ClusterRole /kpatterns-multi-gadgets-editor", "ClusterRole /kpatterns-multi-gadgets-viewer", "Namespace /ops", "ServiceAccount ops/multi", "ClusterRole /kpatterns-multi",
		"ClusterRoleBinding /kpatterns-multi", "Role ops/kpatterns-multi-leader-election", "RoleBinding ops/kpatterns-multi-leader-election",
		"ClusterRole /kpatterns-multi-metrics-auth", "ClusterRoleBinding /kpatterns-multi-metrics-auth", "ClusterRole /kpatterns-multi-metrics-reader"}
	if d := cmp.Diff(want, kinds(objs)); d != "" {
		t.Fatalf("objects (-want +got):\n%s", d)
	}
	role := objs[6].(*rbacv1.ClusterRole)
	var rules []string
	for _, r := range role.Rules {
		rules = append(rules, strings.Join(r.APIGroups, ",")+"/"+strings.Join(r.Resources, ",")+":"+strings.Join(r.Verbs, ","))
	}
	if d := cmp.Diff([]string{"/configmaps:get,list,watch", "apps/deployments:get,list,watch,patch"}, rules); d != "" {
		t.Errorf("rules (-want +got):\n%s", d)
	}
}
