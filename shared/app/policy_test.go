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
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/app"
)

const policyYAML = `# a comment
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata:
  name: kpatterns-gadget
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [apps], apiVersions: [v1], operations: [CREATE], resources: [deployments]}
  validations:
  - expression: "object.spec.replicas <= 3"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata:
  name: kpatterns-gadget
spec:
  policyName: kpatterns-gadget
  validationActions: [Deny]
  matchResources:
    namespaceSelector:
      matchLabels: {enforce: "true"}
`

func policyPattern(controller bool) app.Pattern {
	p := admissionPattern()
	p.AdmissionOnly = !controller
	p.Config.(fstest.MapFS)["policy/policy.yaml"] = &fstest.MapFile{Data: []byte(policyYAML)}
	return p
}

func kindsOnly(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind)
	}
	return out
}

// --admission=policy renders the policies: for an admission-only pattern nothing else (nothing
// has to run), with every binding sparing the operator namespace and kube-system as the webhooks
// do, and labelled for prune and uninstall.
func TestAdmissionPolicyRendersThePoliciesAlone(t *testing.T) {
	objs, err := app.Objects(policyPattern(false), app.Options{Namespace: "ops", Image: "img", Admission: app.AdmissionPolicy})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}, kindsOnly(objs)); diff != "" {
		t.Fatalf("kinds (-want +got):\n%s", diff)
	}
	b := objs[1].(*admissionregistrationv1.ValidatingAdmissionPolicyBinding)
	want := &metav1.LabelSelector{MatchLabels: map[string]string{"enforce": "true"}, MatchExpressions: []metav1.LabelSelectorRequirement{
		{Key: "kubernetes.io/metadata.name", Operator: metav1.LabelSelectorOpNotIn, Values: []string{"ops", "kube-system"}}}}
	if diff := cmp.Diff(want, b.Spec.MatchResources.NamespaceSelector); diff != "" {
		t.Errorf("binding's namespaces (-want +got):\n%s", diff)
	}
	for _, o := range objs {
		if diff := cmp.Diff(app.Labels("gadget"), o.GetLabels()); diff != "" {
			t.Errorf("%s labels (-want +got):\n%s", o.GetName(), diff)
		}
	}
	// Without --image too, and without the warning that nothing would serve the webhooks.
	var stdout, stderr bytes.Buffer
	if err := app.Execute(context.Background(), policyPattern(false), nil, nil, []string{"manifests", "--admission=policy"}, &stdout, &stderr); err != nil {
		t.Fatal(err)
	}
	if stderr.Len() > 0 || strings.Count(stdout.String(), "\nkind: ") != 2 {
		t.Errorf("manifests --admission=policy: stderr %q, stdout:\n%s", stderr.String(), stdout.String())
	}
}

// A pattern that also runs a controller keeps its Deployment, told to start no webhook server.
func TestAdmissionPolicyOfAControllerPattern(t *testing.T) {
	objs, err := app.Objects(policyPattern(true), app.Options{Namespace: "ops", Image: "img", Admission: app.AdmissionPolicy})
	if err != nil {
		t.Fatal(err)
	}
	var dep *appsv1.Deployment
	for _, o := range objs {
		switch o := o.(type) {
		case *appsv1.Deployment:
			dep = o
		case *admissionregistrationv1.ValidatingWebhookConfiguration, *admissionregistrationv1.MutatingWebhookConfiguration:
			t.Errorf("%T rendered with --admission=policy", o)
		}
	}
	if dep == nil {
		t.Fatal("no Deployment")
	}
	c := dep.Spec.Template.Spec.Containers[0]
	if diff := cmp.Diff([]string{"run", "--admission=policy"}, c.Args); diff != "" || len(c.VolumeMounts) > 0 {
		t.Errorf("args (-want +got):\n%s\nmounts %v: want no webhook certificate", diff, c.VolumeMounts)
	}
}

func TestAdmissionBothAndBadValues(t *testing.T) {
	objs, err := app.Objects(policyPattern(false), app.Options{Namespace: "ops", Image: "img", Admission: app.AdmissionBoth})
	if err != nil {
		t.Fatal(err)
	}
	got := strings.Join(kindsOnly(objs), " ")
	for _, k := range []string{"MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding", "Deployment"} {
		if !strings.Contains(got, k) {
			t.Errorf("--admission=both rendered %s: no %s", got, k)
		}
	}
	for _, tc := range []struct {
		p    app.Pattern
		mode string
		says string
	}{
		{policyPattern(false), "cel", `--admission "cel": want webhook, policy or both`},
		{admissionPattern(), app.AdmissionPolicy, "--admission=policy: gadget has no admission policies"},
	} {
		if _, err := app.Objects(tc.p, app.Options{Namespace: "ops", Admission: tc.mode}); err == nil || err.Error() != tc.says {
			t.Errorf("--admission=%s: err %v, want %q", tc.mode, err, tc.says)
		}
	}
}
