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
type Rule string

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

// withoutRule removes the permission named by $KPATTERNS_RBAC_WITHOUT from the pattern's
// ClusterRole (named role) among objs; it fails if the role has no such permission, so a typo
// never passes for a rule no test needs.
func withoutRule(objs []client.Object, role string) error {
	env := os.Getenv(WithoutRuleEnv)
	if env == "" {
		return nil
	}
	var drops []Rule
	for _, d := range strings.Split(env, ",") {
		drops = append(drops, Rule(strings.TrimSpace(d)))
	}
	for _, o := range objs {
		cr, ok := o.(*rbacv1.ClusterRole)
		if !ok || cr.Name != role {
			continue
		}
		rules := Rules(cr.Rules)
		for _, drop := range drops {
			if !slices.Contains(rules, drop) {
				return fmt.Errorf("%s=%q: the ClusterRole %s has no such permission (it has %q)", WithoutRuleEnv, drop, role, rules)
			}
		}
		cr.Rules = nil
		for _, r := range rules {
			if !slices.Contains(drops, r) {
				cr.Rules = append(cr.Rules, r.policyRule())
			}
		}
		return nil
	}
	return fmt.Errorf("%s=%q: no ClusterRole %s to remove it from", WithoutRuleEnv, env, role)
}
