// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func TestRulesAndWithoutRule(t *testing.T) {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{""}, Resources: []string{"configmaps", "services"}, Verbs: []string{"get", "create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, ResourceNames: []string{"policy"}, Verbs: []string{"get"}},
		{APIGroups: []string{"events.k8s.io"}, Resources: []string{"events"}, Verbs: []string{"create"}},
		{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}, // a repeat
	}
	want := []Rule{"get core/configmaps", "create core/configmaps", "get core/services", "create core/services",
		"get core/configmaps[policy]", "create events.k8s.io/events"}
	if d := cmp.Diff(want, Rules(rules)); d != "" {
		t.Fatalf("Rules (-want +got):\n%s", d)
	}

	role := func() []client.Object {
		return []client.Object{&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "kpatterns-x"}, Rules: rules}}
	}
	t.Setenv(WithoutRuleEnv, "create core/services")
	objs := role()
	if err := withoutRule(objs, "kpatterns-x"); err != nil {
		t.Fatal(err)
	}
	got := Rules(objs[0].(*rbacv1.ClusterRole).Rules)
	if d := cmp.Diff([]Rule{"get core/configmaps", "create core/configmaps", "get core/services",
		"get core/configmaps[policy]", "create events.k8s.io/events"}, got); d != "" {
		t.Fatalf("without create core/services (-want +got):\n%s", d)
	}

	t.Setenv(WithoutRuleEnv, "get core/configmaps[policy]") // only the named rule, not the broad one
	objs = role()
	if err := withoutRule(objs, "kpatterns-x"); err != nil {
		t.Fatal(err)
	}
	if got := Rules(objs[0].(*rbacv1.ClusterRole).Rules); len(got) != 5 || got[0] != "get core/configmaps" {
		t.Fatalf("without the named rule: %q", got)
	}

	t.Setenv(WithoutRuleEnv, "delete core/configmaps") // not in the role: an error, not a silent pass
	if err := withoutRule(role(), "kpatterns-x"); err == nil || !strings.Contains(err.Error(), "no such permission") {
		t.Fatalf("a permission the role lacks: %v", err)
	}

	// The operator namespace's Role, by the prefix: only its rule goes, the ClusterRole's stays.
	t.Setenv(WithoutRuleEnv, OperatorRule+"get core/configmaps")
	objs = append(role(), &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "kpatterns-x-operator"}, Rules: rules[len(rules)-1:]})
	if err := withoutRule(objs, "kpatterns-x"); err != nil {
		t.Fatal(err)
	}
	if got, cluster := objs[1].(*rbacv1.Role).Rules, Rules(objs[0].(*rbacv1.ClusterRole).Rules); len(got) != 0 || len(cluster) != 6 {
		t.Fatalf("without the Role's rule: Role %v, ClusterRole %q", got, cluster)
	}
	if err := withoutRule(role(), "kpatterns-x"); err == nil || !strings.Contains(err.Error(), "no Role kpatterns-x-operator") {
		t.Fatalf("a pattern without a Role: %v", err)
	}
}
