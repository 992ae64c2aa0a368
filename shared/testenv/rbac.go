// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"os"
	"slices"
	"strings"

	rbacv1 "k8s.io/api/rbac/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WithoutRuleEnv names permissions to leave out of the pattern's generated ClusterRole when
// Start installs it, as Rule strings separated by commas: the least-privilege run (`go tool task
// chaos`) removes each rule in turn and runs the pattern's tests, to show which test needs it.
const WithoutRuleEnv = "KPATTERNS_RBAC_WITHOUT"

// Rule is one permission of a role, "VERB GROUP/RESOURCE[/SUBRESOURCE]" with "core" for the
// core group and the resource names in brackets when the rule has any:
// "create core/configmaps", "patch events.k8s.io/events", "get core/configmaps[widget-policy]".
// A rule of the pattern's Role in the operator namespace has OperatorRule's prefix.
type Rule string

// OperatorRule prefixes a permission of the pattern's Role in the operator namespace
// (app.OperatorRole): "operator:create core/secrets".
const OperatorRule = "operator:"

// Rules splits policy rules into single permissions, in order and without repeats.
func Rules(rules []rbacv1.PolicyRule) []Rule {
	var out []Rule
	for _, r := range rules {
		for _, g := range r.APIGroups {
			if g == "" {
				g = "core"
			}
			for _, res := range r.Resources {
				names := ""
				if len(r.ResourceNames) > 0 {
					names = "[" + strings.Join(r.ResourceNames, ",") + "]"
				}
				for _, v := range r.Verbs {
					if rule := Rule(v + " " + g + "/" + res + names); !slices.Contains(out, rule) {
						out = append(out, rule)
					}
				}
			}
		}
	}
	return out
}

// policyRule is the one-permission PolicyRule of a Rule.
func (r Rule) policyRule() rbacv1.PolicyRule {
	verb, rest, _ := strings.Cut(string(r), " ")
	rest, names, _ := strings.Cut(rest, "[")
	group, res, _ := strings.Cut(rest, "/")
	if group == "core" {
		group = ""
	}
	p := rbacv1.PolicyRule{Verbs: []string{verb}, APIGroups: []string{group}, Resources: []string{res}}
	if names = strings.TrimSuffix(names, "]"); names != "" {
		p.ResourceNames = strings.Split(names, ",")
	}
	return p
}

// withoutRule removes the permissions named by $KPATTERNS_RBAC_WITHOUT from the pattern's
// ClusterRole (named role) among objs, or with OperatorRule's prefix from its Role role-operator;
// it fails if the role has no such permission, so a typo never passes for a rule no test needs.
func withoutRule(objs []client.Object, role string) error {
	env := os.Getenv(WithoutRuleEnv)
	if env == "" {
		return nil
	}
	drops := map[bool][]Rule{} // by whether of the Role
	for _, d := range strings.Split(env, ",") {
		d, operator := strings.CutPrefix(strings.TrimSpace(d), OperatorRule)
		drops[operator] = append(drops[operator], Rule(d))
	}
	for operator, drops := range drops {
		kind, name := "ClusterRole", role
		if operator {
			kind, name = "Role", role+"-operator"
		}
		i := slices.IndexFunc(objs, func(o client.Object) bool {
			_, role := o.(*rbacv1.Role)
			_, cluster := o.(*rbacv1.ClusterRole)
			return o.GetName() == name && (role && operator || cluster && !operator)
		})
		if i < 0 {
			return fmt.Errorf("%s=%q: no %s %s to remove it from", WithoutRuleEnv, env, kind, name)
		}
		policy := rolePolicy(objs[i])
		rules := Rules(*policy)
		for _, drop := range drops {
			if !slices.Contains(rules, drop) {
				return fmt.Errorf("%s=%q: the %s %s has no such permission (it has %q)", WithoutRuleEnv, drop, kind, name, rules)
			}
		}
		*policy = nil
		for _, r := range rules {
			if !slices.Contains(drops, r) {
				*policy = append(*policy, r.policyRule())
			}
		}
	}
	return nil
}

// rolePolicy is the rules of a Role or ClusterRole.
func rolePolicy(o client.Object) *[]rbacv1.PolicyRule {
	if r, ok := o.(*rbacv1.Role); ok {
		return &r.Rules
	}
	return &o.(*rbacv1.ClusterRole).Rules
}
