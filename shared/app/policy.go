// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"fmt"
	"io/fs"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Admission policies: a pattern's rules as ValidatingAdmissionPolicy and MutatingAdmissionPolicy
// objects with their bindings (config/policy/*.yaml, written by hand beside the generated webhook
// configuration), run by kube-apiserver itself. `--admission` chooses what serves a pattern's
// rules.
const (
	// AdmissionWebhook renders the webhook configurations (the default).
	AdmissionWebhook = "webhook"
	// AdmissionPolicy renders the admission policies instead: nothing has to run for them.
	AdmissionPolicy = "policy"
	// AdmissionBoth renders both: a request passes the webhook and the policy (a migration).
	AdmissionBoth = "both"
)

// admissionMode checks --admission against what the pattern has.
func admissionMode(p Pattern, mode string) (string, error) {
	switch mode {
	case "":
		return AdmissionWebhook, nil
	case AdmissionWebhook:
		return mode, nil
	case AdmissionPolicy, AdmissionBoth:
		policies, err := readPolicies(p.Config)
		if err != nil {
			return "", err
		}
		if len(policies) == 0 {
			return "", fmt.Errorf("--admission=%s: %s has no admission policies", mode, p.Name)
		}
		return mode, nil
	}
	return "", fmt.Errorf("--admission %q: want webhook, policy or both", mode)
}

// PolicyObjects are the pattern's admission policies and bindings as Objects renders them with
// --admission=policy or both.
func PolicyObjects(p Pattern, o Options) ([]client.Object, error) {
	return typed(policyObjects(p, o, nil))
}

// policyObjects renders the pattern's policies for o: labelled, and every binding's namespaces
// narrowed like the webhooks' (never the operator namespace or kube-system), so that a broken
// policy cannot block its own repair.
func policyObjects(p Pattern, o Options, labels map[string]string) ([]client.Object, error) {
	objs, err := readPolicies(p.Config)
	if err != nil {
		return nil, err
	}
	exclude := func(m *admissionregistrationv1.MatchResources) *admissionregistrationv1.MatchResources {
		if m == nil {
			m = &admissionregistrationv1.MatchResources{}
		}
		m.NamespaceSelector = excludeNamespaces(m.NamespaceSelector, o.Namespace)
		return m
	}
	for _, obj := range objs {
		obj.SetLabels(labels)
		switch b := obj.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			b.Spec.MatchResources = exclude(b.Spec.MatchResources)
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			b.Spec.MatchResources = exclude(b.Spec.MatchResources)
		}
	}
	return objs, nil
}

// excludeNamespaces adds "not the operator namespace, not kube-system" to sel.
func excludeNamespaces(sel *metav1.LabelSelector, operatorNamespace string) *metav1.LabelSelector {
	out := &metav1.LabelSelector{}
	if sel != nil {
		out = sel.DeepCopy()
	}
	out.MatchExpressions = append(out.MatchExpressions, metav1.LabelSelectorRequirement{
		Key: namespaceNameLabel, Operator: metav1.LabelSelectorOpNotIn, Values: []string{operatorNamespace, "kube-system"}})
	return out
}

// readPolicies reads policy/*.yaml from the pattern's config (sorted by file name): admission
// policies and their bindings.
func readPolicies(config fs.FS) ([]client.Object, error) {
	return readGlob(config, "policy/*.yaml", map[string]func() client.Object{
		"ValidatingAdmissionPolicy":        func() client.Object { return &admissionregistrationv1.ValidatingAdmissionPolicy{} },
		"ValidatingAdmissionPolicyBinding": func() client.Object { return &admissionregistrationv1.ValidatingAdmissionPolicyBinding{} },
		"MutatingAdmissionPolicy":          func() client.Object { return &admissionregistrationv1.MutatingAdmissionPolicy{} },
		"MutatingAdmissionPolicyBinding":   func() client.Object { return &admissionregistrationv1.MutatingAdmissionPolicyBinding{} },
	})
}
