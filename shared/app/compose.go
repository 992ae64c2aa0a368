// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"slices"
	"strings"
	"testing/fstest"

	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Compose returns the pattern of one process that runs the members' controllers — one manager,
// one cache, one client, one metrics endpoint, one Lease (kpatterns-<name>), every member keeping
// its own controllers (names, queues, rate limiters, metrics): its manifests are the union of the
// members' generated files, every member's CRDs and all their RBAC rules as one ClusterRole for
// the composition's ServiceAccount. The composition's main.go merges the members' cache options
// (MergeCache) and calls each member's Setup. Webhook patterns are not composed: each serves on
// its own.
func Compose(name string, members ...Pattern) (Pattern, error) {
	config := fstest.MapFS{}
	var rules Rules
	for _, m := range members {
		if hooks, err := HasWebhooks(m); err != nil || hooks || m.AdmissionOnly {
			return Pattern{}, errors.Join(err, fmt.Errorf("compose %s: %s serves webhooks; run it on its own", name, m.Name))
		}
		files, err := fs.Glob(m.Config, "crd/*.yaml")
		if err != nil {
			return Pattern{}, err
		}
		for _, f := range files {
			b, err := fs.ReadFile(m.Config, f)
			if err != nil {
				return Pattern{}, err
			}
			config["crd/"+m.Name+"-"+strings.TrimPrefix(f, "crd/")] = &fstest.MapFile{Data: b}
		}
		r, err := ReadRules(m.Config)
		if err != nil {
			return Pattern{}, fmt.Errorf("compose %s: %s: %w", name, m.Name, err)
		}
		rules.Cluster, rules.Operator = union(rules.Cluster, r.Cluster), union(rules.Operator, r.Operator)
	}
	role, err := yaml.Marshal(&rbacv1.ClusterRole{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "ClusterRole"}, Rules: rules.Cluster})
	if err == nil && len(rules.Operator) > 0 {
		var op []byte
		op, err = yaml.Marshal(&rbacv1.Role{TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "Role"}, Rules: rules.Operator})
		role = append(append(role, "---\n"...), op...)
	}
	if err != nil {
		return Pattern{}, err
	}
	config["rbac/role.yaml"] = &fstest.MapFile{Data: role}
	return Pattern{Name: name, Config: config}, nil
}

// CacheScope is one member's cache options in a composition: its name (for errors) and the
// function that sets its per-kind scope (the member's CacheOptions).
type CacheScope struct {
	Name    string
	Options func(*cache.Options)
}

// MergeCache merges the members' cache options kind by kind (ByObject). A kind one member declares
// keeps that member's scope. A kind several members declare gets one informer that must serve
// them all: unscoped if any of them reads it unscoped, else their label and field selectors if
// they are the same; different selectors (one informer cannot hold the union of two selectors) or
// a transform (which would strip what another member reads) are an error naming the members —
// never one member's scope silently replacing another's. A member must therefore declare every
// kind whose scope matters to it, even unscoped: a kind it reads but does not declare gets the
// others' scope. A member whose reads cannot share an informer (a projection) keeps them in a
// cache of its own (OwnCache), which is never merged.
// The merged scopes are added to o.ByObject.
func MergeCache(o *cache.Options, members ...CacheScope) error {
	type declared struct {
		by     cache.ByObject
		obj    client.Object
		owners []string
	}
	kinds := map[reflect.Type]*declared{}
	var order []reflect.Type
	var errs []error
	for _, m := range members {
		var mo cache.Options
		m.Options(&mo)
		for obj, by := range mo.ByObject {
			t := reflect.TypeOf(obj)
			d, seen := kinds[t]
			if !seen {
				kinds[t] = &declared{by: by, obj: obj, owners: []string{m.Name}}
				order = append(order, t)
				continue
			}
			kind := t.Elem().Name()
			switch {
			case by.Transform != nil || d.by.Transform != nil:
				errs = append(errs, fmt.Errorf("%s and %s both cache %s and one transforms it: a transformed cache would drop what the other reads", strings.Join(d.owners, ", "), m.Name, kind))
			case by.Label == nil || d.by.Label == nil:
				d.by.Label = nil // one member reads every object of the kind: the informer holds them all
			case by.Label.String() != d.by.Label.String():
				errs = append(errs, fmt.Errorf("%s and %s cache %s by different labels (%q, %q): one informer cannot hold both", strings.Join(d.owners, ", "), m.Name, kind, d.by.Label, by.Label))
			}
			switch {
			case by.Field == nil || d.by.Field == nil:
				d.by.Field = nil
			case by.Field.String() != d.by.Field.String():
				errs = append(errs, fmt.Errorf("%s and %s cache %s by different fields (%q, %q)", strings.Join(d.owners, ", "), m.Name, kind, d.by.Field, by.Field))
			}
			d.owners = append(d.owners, m.Name)
		}
	}
	if len(errs) > 0 {
		return errors.Join(errs...)
	}
	for _, t := range order {
		CacheByObject(o, kinds[t].obj, kinds[t].by)
	}
	return nil
}

// union is rules with those of more that it lacks appended.
func union(rules, more []rbacv1.PolicyRule) []rbacv1.PolicyRule {
	for _, rule := range more {
		if !slices.ContainsFunc(rules, func(have rbacv1.PolicyRule) bool { return reflect.DeepEqual(have, rule) }) {
			rules = append(rules, rule)
		}
	}
	return rules
}
