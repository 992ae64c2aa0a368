// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

// The RBAC a pattern renders: its generated rules (ClusterRole, operator-namespace Role, split for
// watched namespaces), leader election and metrics, and the roles for the people who use its kinds.

import (
	"fmt"
	"io/fs"
	"maps"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// leaderElectionRBAC lets the pattern hold its Lease and record events in its own namespace.
func leaderElectionRBAC(namespace, name string, subjects []rbacv1.Subject, meta func(ns, n string) metav1.ObjectMeta) []client.Object {
	return role(meta(namespace, name+"-leader-election"), []rbacv1.PolicyRule{
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"},
			Verbs: []string{"get", "list", "watch", "create", "update", "patch", "delete"}},
		{APIGroups: []string{"", "events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create", "patch"}},
	}, subjects)
}

// userRoles are, per CRD, the ClusterRoles kubebuilder scaffolds for the people who use it —
// <plural>-admin (every verb), -editor (create to delete) and -viewer (read) — labelled to
// aggregate into the cluster's built-in admin, edit and view roles, so a user bound to "view" in a
// namespace reads the pattern's objects there. A cluster-scoped kind aggregates into view only:
// who may write one is the cluster administrator's choice (finalizers' PostgresServer names
// credentials), not every namespace editor's.
func userRoles(name string, crds []client.Object, labels map[string]string) []client.Object {
	var out []client.Object
	for _, o := range crds {
		crd, ok := o.(*apiextensionsv1.CustomResourceDefinition)
		if !ok {
			continue
		}
		plural, group := crd.Spec.Names.Plural, crd.Spec.Group
		for _, r := range []struct {
			suffix, aggregate string
			verbs             []string
		}{
			{"admin", "admin", []string{rbacv1.VerbAll}},
			{"editor", "edit", []string{"create", "delete", "get", "list", "patch", "update", "watch"}},
			{"viewer", "view", []string{"get", "list", "watch"}},
		} {
			l := maps.Clone(labels)
			if r.aggregate == "view" || crd.Spec.Scope != apiextensionsv1.ClusterScoped {
				l["rbac.authorization.k8s.io/aggregate-to-"+r.aggregate] = "true"
			}
			out = append(out, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name + "-" + plural + "-" + r.suffix, Labels: l},
				Rules: []rbacv1.PolicyRule{
					{APIGroups: []string{group}, Resources: []string{plural}, Verbs: r.verbs},
					{APIGroups: []string{group}, Resources: []string{plural + "/status"}, Verbs: []string{"get"}},
				}})
		}
	}
	return out
}

// role is a Role with rules and its binding to subjects, both named and placed by meta.
func role(meta metav1.ObjectMeta, rules []rbacv1.PolicyRule, subjects []rbacv1.Subject) []client.Object {
	return []client.Object{
		&rbacv1.Role{ObjectMeta: meta, Rules: rules},
		&rbacv1.RoleBinding{ObjectMeta: meta, Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: meta.Name}},
	}
}

// OperatorRole names the Role in the operator namespace that holds a pattern's rules marked
// namespace=system.
func OperatorRole(pattern string) string { return "kpatterns-" + pattern + "-operator" }

// MetricsReaderRole is the name of the ClusterRole that lets a scraper read a pattern's /metrics:
// bind it to the scraper's ServiceAccount (Prometheus, say).
func MetricsReaderRole(pattern string) string { return "kpatterns-" + pattern + "-metrics-reader" }

// metricsRBAC lets the pattern authenticate and authorize its /metrics callers through the API
// server (TokenReview, SubjectAccessReview: run's --metrics-secure, the default), and renders the
// reader ClusterRole a scraper is bound to.
func metricsRBAC(name string, subjects []rbacv1.Subject, meta func(ns, n string) metav1.ObjectMeta) []client.Object {
	auth := name + "-metrics-auth"
	return []client.Object{
		&rbacv1.ClusterRole{ObjectMeta: meta("", auth), Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
			{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
		}},
		&rbacv1.ClusterRoleBinding{ObjectMeta: meta("", auth), Subjects: subjects,
			RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: auth}},
		&rbacv1.ClusterRole{ObjectMeta: meta("", name+"-metrics-reader"), Rules: []rbacv1.PolicyRule{
			{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}},
		}},
	}
}

// Rules are a pattern's generated permissions (rbac/role.yaml): Cluster the ClusterRole's, and
// Operator those of the Role that markers with namespace=system (kubebuilder's placeholder) make,
// which hold in the operator namespace only. controller-gen writes none for a pattern without
// +kubebuilder:rbac markers (an admission handler that reads nothing).
// Features are the rules of the pattern's Features (rbac/features.yaml, written by hand: a
// ClusterRole per feature, named as it), granted only with it.
type Rules struct {
	Cluster, Operator []rbacv1.PolicyRule
	Features          map[string][]rbacv1.PolicyRule
}

// ReadRules reads rbac/role.yaml and rbac/features.yaml from a pattern's config.
func ReadRules(config fs.FS) (Rules, error) {
	roles := map[string]func() client.Object{
		"ClusterRole": func() client.Object { return &rbacv1.ClusterRole{} },
		"Role":        func() client.Object { return &rbacv1.Role{} },
	}
	objs, err := readObjects(config, "rbac/role.yaml", roles)
	var r Rules
	for _, o := range objs {
		switch o := o.(type) {
		case *rbacv1.ClusterRole:
			r.Cluster = append(r.Cluster, o.Rules...)
		case *rbacv1.Role:
			r.Operator = append(r.Operator, o.Rules...)
		}
	}
	if err != nil {
		return r, err
	}
	features, err := readObjects(config, "rbac/features.yaml", map[string]func() client.Object{"ClusterRole": roles["ClusterRole"]})
	for _, o := range features {
		if r.Features == nil {
			r.Features = map[string][]rbacv1.PolicyRule{}
		}
		r.Features[o.GetName()] = o.(*rbacv1.ClusterRole).Rules
	}
	return r, err
}

// featureRules are the rules of the features of p that with names, in the order of p's Features;
// a name p has not, or a feature without rules, is an error.
func featureRules(p Pattern, r Rules, with []string) ([]rbacv1.PolicyRule, error) {
	var rules []rbacv1.PolicyRule
	for _, name := range with {
		if !slices.ContainsFunc(p.Features, func(f Feature) bool { return f.Name == name }) {
			return nil, fmt.Errorf("%s has no feature %q", p.Name, name)
		}
		if len(r.Features[name]) == 0 {
			return nil, fmt.Errorf("%s: no rules of feature %q in rbac/features.yaml", p.Name, name)
		}
	}
	for _, f := range p.Features {
		if slices.Contains(with, f.Name) {
			rules = append(rules, r.Features[f.Name]...)
		}
	}
	return rules, nil
}

// clusterScoped splits rules into those on the cluster-scoped resources among crds (and their
// subresources) and on Namespaces, which only a ClusterRole can grant, and the rest.
func clusterScoped(rules []rbacv1.PolicyRule, crds []client.Object) (cluster, rest []rbacv1.PolicyRule) {
	scoped := map[string]bool{"/namespaces": true}
	for _, o := range crds {
		if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok && crd.Spec.Scope == apiextensionsv1.ClusterScoped {
			scoped[crd.Spec.Group+"/"+crd.Spec.Names.Plural] = true
		}
	}
	for _, rule := range rules {
		c, r := rule, rule
		c.Resources, r.Resources = nil, nil
		for _, res := range rule.Resources {
			plural, _, _ := strings.Cut(res, "/")
			if len(rule.APIGroups) == 1 && scoped[rule.APIGroups[0]+"/"+plural] {
				c.Resources = append(c.Resources, res)
			} else {
				r.Resources = append(r.Resources, res)
			}
		}
		if len(c.Resources) > 0 {
			cluster = append(cluster, c)
		}
		if len(r.Resources) > 0 || len(rule.NonResourceURLs) > 0 {
			rest = append(rest, r)
		}
	}
	return cluster, rest
}
