// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/kpatterns/kpatterns/shared/app"
)

// NoOperatorSelectorMatches fails t if a Pod labelled child — one the pattern creates for its
// users, in the operator's own namespace even — is selected by any of the Services (webhooks,
// metrics), the PodDisruptionBudget or the NetworkPolicies that p deploys for itself: such a Pod
// would receive the API server's admission requests and Prometheus' bearer token. The operator's
// own Pods must be selected by each.
func NoOperatorSelectorMatches(t *testing.T, p app.Pattern, child map[string]string) {
	t.Helper()
	objs, err := app.Objects(p, app.Options{Namespace: "ops", Image: "example.com/" + p.Name + ":1", Replicas: 2})
	if err != nil {
		t.Fatal(err)
	}
	var operator labels.Set
	selectors := map[string]labels.Selector{}
	for _, o := range objs {
		key := o.GetObjectKind().GroupVersionKind().Kind + " " + o.GetName()
		switch o := o.(type) {
		case *corev1.Service:
			selectors[key] = labels.SelectorFromSet(o.Spec.Selector)
		case *policyv1.PodDisruptionBudget:
			selectors[key], err = metav1.LabelSelectorAsSelector(o.Spec.Selector)
		case *networkingv1.NetworkPolicy:
			selectors[key], err = metav1.LabelSelectorAsSelector(&o.Spec.PodSelector)
		case *appsv1.Deployment:
			operator = o.Spec.Template.Labels
		}
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(selectors) < 3 {
		t.Fatalf("found %d selectors (%v), want at least the metrics Service, the PodDisruptionBudget and a NetworkPolicy", len(selectors), selectors)
	}
	for key, sel := range selectors {
		if sel.Matches(labels.Set(child)) {
			t.Errorf("%s selects the pattern's children (%v): %s", key, child, sel)
		}
		if !sel.Matches(operator) {
			t.Errorf("%s does not select the operator's Pods (%v): %s", key, operator, sel)
		}
	}
}
