// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The differential suite: one table of requests decided through envtest's kube-apiserver by the
// webhooks alone and by the admission policies (config/policy) alone; both must decide alike.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

type step = testenv.Step

// create makes a Deployment "d" with replicas (nil: unset), labels and annotations.
func create(replicas *int32, labels, annotations map[string]string, opts ...client.CreateOption) step {
	return func(ctx context.Context, c client.Client, ns string) error {
		return c.Create(ctx, deployment(ns, "d", replicas, labels, annotations), opts...)
	}
}

// withPolicy makes the ConfigMap deployment-policy with maxReplicas (absent: a ConfigMap
// without the key).
func withPolicy(maxReplicas ...string) step {
	return func(ctx context.Context, c client.Client, ns string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: webhook.PolicyConfigMap, Namespace: ns}, Data: map[string]string{"other": "x"}}
		if len(maxReplicas) > 0 {
			cm.Data = map[string]string{webhook.MaxReplicasKey: maxReplicas[0]}
		}
		return c.Create(ctx, cm)
	}
}

// change reads "d", applies f and updates it.
func change(f func(*appsv1.Deployment)) step {
	return func(ctx context.Context, c client.Client, ns string) error {
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "d"}, d); err != nil {
			return err
		}
		f(d)
		return c.Update(ctx, d)
	}
}

func replicas(n int32) step { return change(func(d *appsv1.Deployment) { d.Spec.Replicas = &n }) }

// scale is `kubectl scale deployment d --replicas n`: an update of the /scale subresource.
func scale(n int32) step {
	return func(ctx context.Context, c client.Client, ns string) error {
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d"}}
		return c.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}))
	}
}

// diff is the request `kubectl diff` makes for a Deployment "d" with n replicas: a server-side
// apply, dry-run (the webhooks declare sideEffects: None, so they are called for it).
func diff(n int32) step {
	return func(ctx context.Context, c client.Client, ns string) error {
		d := deployment(ns, "d", &n, nil, nil)
		d.TypeMeta = metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"}
		m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(d)
		if err != nil {
			return err
		}
		u := &unstructured.Unstructured{Object: m}
		unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
		unstructured.RemoveNestedField(u.Object, "status")
		return c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner("kubectl"), client.ForceOwnership, client.DryRunAll)
	}
}

// labelled checks that "d" (created by create) carries team=want.
func labelled(create step, want string) step {
	return func(ctx context.Context, c client.Client, ns string) error {
		if err := create(ctx, c, ns); err != nil {
			return err
		}
		d := &appsv1.Deployment{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "d"}, d); err != nil {
			return err
		}
		if got := d.Labels[webhook.TeamLabel]; got != want {
			return fmt.Errorf("label team=%q, want %q", got, want)
		}
		return nil
	}
}

const (
	ceiling3  = "namespace policy allows at most 3 replicas (ConfigMap deployment-policy, key maxReplicas); asked for "
	immutable = "label team=payments is set and may not be changed or removed"
)

func atCeiling(n int32) string { return webhook.CeilingWarning(n) }

var cases = []testenv.Case{
	{Name: "team label defaulted on create", Request: labelled(create(nil, nil, nil), webhook.Unassigned), Probe: true},
	{Name: "a team label is kept", Request: labelled(create(nil, map[string]string{webhook.TeamLabel: "payments"}, nil), "payments")},
	{Name: "team label defaulted on update", Setup: create(nil, map[string]string{"x": "y"}, nil),
		// An update that removes every label: the defaulter puts team=unassigned back, so the
		// label did not change.
		Request: labelled(change(func(d *appsv1.Deployment) { d.Labels = nil }), webhook.Unassigned)},
	{Name: "team label changed", Setup: create(nil, map[string]string{webhook.TeamLabel: "payments"}, nil),
		Request: change(func(d *appsv1.Deployment) { d.Labels[webhook.TeamLabel] = "search" }), Deny: immutable, Probe: true},
	{Name: "team label removed (defaulted back, still a change)", Setup: create(nil, map[string]string{webhook.TeamLabel: "payments"}, nil),
		Request: change(func(d *appsv1.Deployment) { delete(d.Labels, webhook.TeamLabel) }), Deny: immutable},
	{Name: "an update keeping the team label", Setup: create(nil, map[string]string{webhook.TeamLabel: "payments"}, nil),
		Request: change(func(d *appsv1.Deployment) { d.Labels["x"] = "z" })},
	{Name: "the defaulted team becomes a real one", Setup: create(nil, nil, nil),
		Request: labelled(change(func(d *appsv1.Deployment) { d.Labels[webhook.TeamLabel] = "payments" }), "payments")},
	{Name: "a real team set from the default stays", Setup: testenv.Steps(create(nil, nil, nil),
		change(func(d *appsv1.Deployment) { d.Labels[webhook.TeamLabel] = "payments" })),
		Request: change(func(d *appsv1.Deployment) { d.Labels[webhook.TeamLabel] = "search" }), Deny: immutable},

	// A malformed policy refuses only new replicas: what raises nothing — a label, a scale-down,
	// a finalizer removed during a deletion (the garbage collector's kind of update) — passes.
	{Name: "malformed policy: a label added", Setup: testenv.Steps(create(ptr.To[int32](2), nil, nil), withPolicy("lots")),
		Request: change(func(d *appsv1.Deployment) { d.Labels["x"] = "z" })},
	{Name: "malformed policy: scaled down", Setup: testenv.Steps(create(ptr.To[int32](5), nil, nil), withPolicy("lots")), Request: replicas(2)},
	{Name: "malformed policy: /scale down", Setup: testenv.Steps(create(ptr.To[int32](5), nil, nil), withPolicy("lots")), Request: scale(1)},
	{Name: "malformed policy: a finalizer removed while it is deleted",
		Setup: testenv.Steps(create(ptr.To[int32](2), nil, nil), change(func(d *appsv1.Deployment) { d.Finalizers = []string{"example.com/keep"} }),
			withPolicy("lots"), func(ctx context.Context, c client.Client, ns string) error {
				return c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d"}})
			}),
		Request: change(func(d *appsv1.Deployment) { d.Finalizers = nil })},
	{Name: "malformed policy: scaled up", Setup: testenv.Steps(create(ptr.To[int32](2), nil, nil), withPolicy("lots")), Request: replicas(3),
		Deny: `maxReplicas="lots" is not a non-negative integer`},

	{Name: "no policy: 10 replicas", Request: create(ptr.To[int32](10), nil, nil)},
	{Name: "no policy: 11 replicas", Request: create(ptr.To[int32](11), nil, nil),
		Deny:    "namespace policy allows at most 10 replicas (ConfigMap deployment-policy, key maxReplicas); asked for 11",
		Differs: "without its param a binding skips the policy (parameterNotFoundAction Allow) or denies everything (Deny): it cannot fall back to the webhook's default of 10"},
	{Name: "a policy without the key: the default 10", Setup: withPolicy(), Request: create(ptr.To[int32](11), nil, nil),
		Deny: "namespace policy allows at most 10 replicas"},
	{Name: "policy 3: 4 replicas", Setup: withPolicy("3"), Request: create(ptr.To[int32](4), nil, nil), Deny: ceiling3 + "4", Probe: true},
	{Name: "policy 3: 3 replicas", Setup: withPolicy("3"), Request: create(ptr.To[int32](3), nil, nil), Warn: atCeiling(3)},
	{Name: "policy 3: 2 replicas", Setup: withPolicy("3"), Request: create(ptr.To[int32](2), nil, nil)},
	{Name: "no policy: 10 replicas, no warning", Request: create(ptr.To[int32](10), nil, nil)},
	{Name: "at the ceiling already: no new warning", Setup: testenv.Steps(withPolicy("3"), create(ptr.To[int32](3), nil, nil)),
		Request: change(func(d *appsv1.Deployment) { d.Labels["x"] = "y" })},
	{Name: "policy 3: replicas unset count as 1", Setup: withPolicy("0"), Request: create(nil, nil, nil),
		Deny: "namespace policy allows at most 0 replicas (ConfigMap deployment-policy, key maxReplicas); asked for 1"},
	{Name: "policy 3: update to 5", Setup: testenv.Steps(withPolicy("3"), create(ptr.To[int32](3), nil, nil)), Request: replicas(5), Deny: ceiling3 + "5"},
	{Name: "above a lowered ceiling: update down", Setup: testenv.Steps(create(ptr.To[int32](10), nil, nil), withPolicy("3")), Request: replicas(8)},
	{Name: "above a lowered ceiling: update up", Setup: testenv.Steps(create(ptr.To[int32](8), nil, nil), withPolicy("3")), Request: replicas(9), Deny: ceiling3 + "9"},
	{Name: "/scale past the ceiling", Setup: testenv.Steps(withPolicy("3"), create(ptr.To[int32](2), nil, nil)), Request: scale(7), Deny: ceiling3 + "7"},
	{Name: "/scale to the ceiling", Setup: testenv.Steps(withPolicy("3"), create(ptr.To[int32](2), nil, nil)), Request: scale(3), Warn: atCeiling(3), Probe: true},
	{Name: "/scale to 0", Setup: testenv.Steps(withPolicy("3"), create(ptr.To[int32](2), nil, nil)), Request: scale(0)},
	{Name: "/scale down above a lowered ceiling", Setup: testenv.Steps(create(ptr.To[int32](8), nil, nil), withPolicy("3")), Request: scale(5)},
	{Name: "/scale up above a lowered ceiling", Setup: testenv.Steps(create(ptr.To[int32](8), nil, nil), withPolicy("3")), Request: scale(9), Deny: ceiling3 + "9"},

	{Name: "malformed policy", Setup: withPolicy("lots"), Request: create(nil, nil, nil),
		Deny: `/deployment-policy: maxReplicas="lots" is not a non-negative integer; fix the policy`, Probe: true},
	{Name: "negative policy", Setup: withPolicy("-1"), Request: create(nil, nil, nil), Deny: `maxReplicas="-1" is not a non-negative integer`},
	{Name: "empty policy value", Setup: withPolicy(""), Request: create(nil, nil, nil), Deny: `maxReplicas="" is not a non-negative integer`},
	{Name: "policy past int32", Setup: withPolicy("2147483648"), Request: create(nil, nil, nil), Deny: `maxReplicas="2147483648" is not a non-negative integer`},
	{Name: "policy with a sign", Setup: withPolicy("+3"), Request: create(ptr.To[int32](4), nil, nil), Deny: ceiling3 + "4"},
	{Name: "policy with spaces", Setup: withPolicy(" 3"), Request: create(nil, nil, nil), Deny: `maxReplicas=" 3" is not a non-negative integer`},

	{Name: "protected delete", Setup: create(nil, nil, map[string]string{webhook.ProtectAnnotation: "true"}),
		Request: func(ctx context.Context, c client.Client, ns string) error {
			return c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d"}})
		}, Deny: "remove the protection annotation before deleting: " + webhook.ProtectAnnotation + "=true", Probe: true},
	{Name: "protection other than true", Setup: create(nil, nil, map[string]string{webhook.ProtectAnnotation: "yes"}),
		Request: func(ctx context.Context, c client.Client, ns string) error {
			return c.Delete(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "d"}})
		}},

	{Name: "server-side dry-run past the ceiling", Setup: withPolicy("3"), Request: create(ptr.To[int32](4), nil, nil, client.DryRunAll), Deny: ceiling3 + "4"},
	{Name: "server-side apply dry-run past the ceiling (kubectl diff)", Setup: withPolicy("3"), Request: diff(4), Deny: ceiling3 + "4"},
	{Name: "server-side apply dry-run within it (kubectl diff)", Setup: withPolicy("3"), Request: diff(2)},
	{Name: "server-side dry-run defaults", Request: func(ctx context.Context, c client.Client, ns string) error {
		d := deployment(ns, "d", nil, nil, nil)
		if err := c.Create(ctx, d, client.DryRunAll); err != nil {
			return err
		}
		if d.Labels[webhook.TeamLabel] != webhook.Unassigned {
			return fmt.Errorf("dry-run labels %v, want team=unassigned", d.Labels)
		}
		return nil
	}},
}

func TestWebhookAndPolicyDecideAlike(t *testing.T) { env.DecideAlike(t, cases) }

// generatedPolicies are maxReplicas values made by rule rather than by hand — signs, leading
// zeros, lengths around int32's, trailing text — each under which 3 replicas are created. The
// webhook's parser (strconv.ParseInt, base 10, 32 bits) is the reference; the policy must decide
// every one alike. A fixed seed: the same corpus every run.
func generatedPolicies() []testenv.Case {
	r := rand.New(rand.NewPCG(47, 5))
	var out []testenv.Case
	for i := range 32 {
		v := []string{"", "+", "-"}[r.IntN(3)] + strings.Repeat("0", r.IntN(12))
		for range 1 + r.IntN(11) {
			v += strconv.Itoa(r.IntN(10))
		}
		if r.IntN(6) == 0 {
			v += []string{" ", "x", ".0", "e1"}[r.IntN(4)]
		}
		c := testenv.Case{Name: fmt.Sprintf("generated policy %d: maxReplicas=%q", i, v), Setup: withPolicy(v), Request: create(ptr.To[int32](3), nil, nil)}
		switch n, err := strconv.ParseInt(v, 10, 32); {
		case err != nil || n < 0:
			c.Deny = fmt.Sprintf("maxReplicas=%q is not a non-negative integer", v)
		case n < 3:
			c.Deny = fmt.Sprintf("namespace policy allows at most %d replicas (ConfigMap deployment-policy, key maxReplicas); asked for 3", n)
		case n == 3:
			c.Warn = atCeiling(3)
		}
		out = append(out, c)
	}
	return out
}

func TestGeneratedPoliciesDecideAlike(t *testing.T) { env.DecideAlike(t, generatedPolicies()) }

// The suite is a test that can fail: with a negative ceiling planted as well-formed, it must
// report the case of a negative policy.
func TestDifferentialSuiteFindsAPlantedDifference(t *testing.T) {
	env.FindsPlanted(t, cases, "int(params.data.maxReplicas) >= 0", "int(params.data.maxReplicas) >= -1", "negative policy")
}
