// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app_test

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"testing/fstest"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// TestInstallIsIdempotentAndReportsChanges applies the manifests to a real API server.
func TestInstallIsIdempotentAndReportsChanges(t *testing.T) {
	env, err := testenv.Start(testenv.Pattern{Pattern: pattern}) // installs once, without a Deployment
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	install := func(o app.Options) []string {
		t.Helper()
		objs, err := app.Objects(pattern, o)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := app.Install(ctx, env.Admin, objs, &out); err != nil {
			t.Fatal(err)
		}
		return strings.Split(strings.TrimSpace(out.String()), "\n")
	}
	o := app.Options{Namespace: testenv.Namespace}
	want := []string{
		"serviceaccount/demo unchanged", "clusterrole/kpatterns-demo unchanged", "clusterrolebinding/kpatterns-demo unchanged",
		"role/kpatterns-demo-leader-election unchanged", "rolebinding/kpatterns-demo-leader-election unchanged",
		"clusterrole/kpatterns-demo-metrics-auth unchanged", "clusterrolebinding/kpatterns-demo-metrics-auth unchanged",
		"clusterrole/kpatterns-demo-metrics-reader unchanged",
	}
	if d := cmp.Diff(want, install(o)); d != "" {
		t.Fatalf("second install (-want +got):\n%s", d)
	}
	o.Image = "example/demo:1"
	if got := install(o); got[len(got)-1] != "deployment/demo created" {
		t.Fatalf("install with an image: %v", got)
	}

	// Fields another manager owns survive a re-install: server-side apply merges.
	d := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: testenv.Namespace, Name: "demo"}, d); err != nil {
		t.Fatal(err)
	}
	d.Annotations = map[string]string{"team": "platform"}
	if err := env.Client.Update(ctx, d, client.FieldOwner("someone-else")); err != nil {
		t.Fatal(err)
	}
	if got := install(o); got[len(got)-1] != "deployment/demo unchanged" {
		t.Fatalf("re-install: %v", got)
	}
	o.Image = "example/demo:2"
	if got := install(o); got[len(got)-1] != "deployment/demo configured" {
		t.Fatalf("install with a new image: %v", got)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatal(err)
	}
	if d.Annotations["team"] != "platform" || d.Spec.Template.Spec.Containers[0].Image != "example/demo:2" {
		t.Fatalf("after re-install: annotations %v, image %s", d.Annotations, d.Spec.Template.Spec.Containers[0].Image)
	}

	// An operator namespace that does not exist is created, enforcing Pod Security "restricted";
	// an existing one is someone's and stays as it is.
	theirs := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "theirs", Labels: map[string]string{"owner": "them"}}}
	if err := env.Client.Create(ctx, theirs); err != nil {
		t.Fatal(err)
	}
	for ns, line := range map[string]string{"fresh": "namespace/fresh created", "theirs": "namespace/theirs exists: left as it is"} {
		if got := install(app.Options{Namespace: ns}); got[0] != line {
			t.Errorf("install into %s: %v, want %q first", ns, got, line)
		}
	}
	for ns, want := range map[string]map[string]string{
		"fresh":  {"app.kubernetes.io/part-of": "kpatterns", "pod-security.kubernetes.io/enforce": "restricted"},
		"theirs": {"owner": "them"},
	} {
		got := &corev1.Namespace{}
		if err := env.Client.Get(ctx, client.ObjectKey{Name: ns}, got); err != nil {
			t.Fatal(err)
		}
		delete(got.Labels, corev1.LabelMetadataName) // set by the API server
		if d := cmp.Diff(want, got.Labels); d != "" {
			t.Errorf("namespace %s labels (-want +got):\n%s", ns, d)
		}
	}
}

const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.example.kpatterns.dev
spec:
  group: example.kpatterns.dev
  names: {kind: Gadget, listKind: GadgetList, plural: gadgets, singular: gadget}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

// run refuses to start, in one line, before the pattern's CRDs are installed.
func TestRunNeedsItsCRDs(t *testing.T) {
	env, err := testenv.Start(testenv.Pattern{Pattern: pattern})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	p := pattern
	p.Config = fstest.MapFS{"rbac/role.yaml": {Data: []byte(roleYAML)}, "crd/gadgets.yaml": {Data: []byte(crdYAML)}}
	err = app.CheckCRDs(env.Admin, p)
	if err == nil || err.Error() != "example.kpatterns.dev/v1 Gadget is not installed: run 'demo install' first" {
		t.Fatalf("CheckCRDs before install: %v", err)
	}
	objs, err := app.Objects(p, app.Options{Namespace: testenv.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	if err := app.Install(context.Background(), env.Admin, objs, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "CRD served", func() error { return app.CheckCRDs(env.Admin, p) })
}

// install prunes what it applied before and no longer renders; uninstall leaves nothing of the
// pattern (every kind install renders, listed by its labels), and its CRDs only with crds.
func TestPruneAndUninstall(t *testing.T) {
	p := pattern
	p.Name = "gone"
	p.Config = fstest.MapFS{"rbac/role.yaml": {Data: []byte(roleYAML)}, "crd/gadgets.yaml": {Data: []byte(crdYAML)}}
	env, err := testenv.Start(testenv.Pattern{Pattern: p})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "team-a"}}); err != nil {
		t.Fatal(err)
	}
	apply := func(o app.Options) string {
		t.Helper()
		objs, err := app.Objects(p, o)
		if err != nil {
			t.Fatal(err)
		}
		var out bytes.Buffer
		if err := app.Install(ctx, env.Admin, objs, &out); err != nil {
			t.Fatal(err)
		}
		out.Reset()
		if err := app.Prune(ctx, env.Admin, p, objs, &out); err != nil {
			t.Fatal(err)
		}
		return out.String()
	}
	o := app.Options{Namespace: testenv.Namespace, Image: "example/gone:1"}
	if pruned := apply(o); pruned != "" {
		t.Errorf("the first install pruned %q", pruned)
	}
	o.Image, o.WatchNamespaces = "", []string{"team-a"}
	want := "deployment/gone -n default pruned\nservice/kpatterns-gone-metrics -n default pruned\n" +
		"networkpolicy/kpatterns-gone-allow-metrics -n default pruned\nclusterrolebinding/kpatterns-gone pruned\nclusterrole/kpatterns-gone pruned\n"
	if pruned := apply(o); pruned != want {
		t.Errorf("pruned after dropping --image and adding --watch-namespaces:\n%s\nwant:\n%s", pruned, want)
	}
	objs, err := app.Objects(p, o)
	if err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := app.Uninstall(ctx, env.Admin, p, objs, false, &out); err != nil {
		t.Fatal(err)
	}
	t.Logf("uninstall:\n%s", out.String())
	for _, l := range []client.ObjectList{&appsv1.DeploymentList{}, &corev1.ServiceList{}, &networkingv1.NetworkPolicyList{}, &corev1.ServiceAccountList{},
		&rbacv1.RoleList{}, &rbacv1.RoleBindingList{}, &rbacv1.ClusterRoleList{}, &rbacv1.ClusterRoleBindingList{}} {
		if err := env.Client.List(ctx, l, client.MatchingLabels(app.Labels(p.Name))); err != nil {
			t.Fatal(err)
		}
		if n := meta.LenList(l); n != 0 {
			t.Errorf("%T: %d objects left after uninstall", l, n)
		}
	}
	crd := &metav1.PartialObjectMetadata{}
	crd.SetGroupVersionKind(apiextensionsv1.SchemeGroupVersion.WithKind("CustomResourceDefinition"))
	if err := env.Client.Get(ctx, client.ObjectKey{Name: "gadgets.example.kpatterns.dev"}, crd); err != nil {
		t.Fatalf("the CRD went without --crds: %v", err)
	}
	if err := app.Uninstall(ctx, env.Admin, p, objs, true, &out); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(crd), crd); err == nil && crd.DeletionTimestamp == nil {
		t.Error("the CRD is still there after uninstall --crds")
	}
}
