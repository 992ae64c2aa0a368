// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests through a real kube-apiserver (envtest): the generated webhook configurations
// are installed by envtest's WebhookInstallOptions (pointed at a local TLS port), the pattern's
// manager serves them as its ServiceAccount — so the live policy read uses exactly the generated
// RBAC — and every request goes through the API server's admission chain.

import (
	"context"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/deploypolicy/config"
	"github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, NewManager: newManager, Setup: webhook.Setup}, func(e *testenv.Env) { env = e })
}

func deployment(ns, name string, replicas *int32, labels, annotations map[string]string) *appsv1.Deployment {
	sel := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns, Labels: labels, Annotations: annotations},
		Spec: appsv1.DeploymentSpec{Replicas: replicas, Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}},
	}
}

func policy(t *testing.T, ns, maxReplicas string) {
	t.Helper()
	if err := env.Client.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: webhook.PolicyConfigMap, Namespace: ns},
		Data: map[string]string{webhook.MaxReplicasKey: maxReplicas}}); err != nil {
		t.Fatal(err)
	}
}

func TestTeamLabelIsDefaultedAndNeverChanged(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	d := deployment(ns, "plain", nil, nil, nil)
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	if d.Labels[webhook.TeamLabel] != webhook.Unassigned {
		t.Errorf("labels = %v, want team=unassigned defaulted", d.Labels)
	}
	own := deployment(ns, "owned", nil, map[string]string{webhook.TeamLabel: "payments", "x": "y"}, nil)
	if err := env.Client.Create(ctx, own); err != nil {
		t.Fatal(err)
	}
	if own.Labels[webhook.TeamLabel] != "payments" || own.Labels["x"] != "y" {
		t.Errorf("labels = %v, want the team label kept", own.Labels)
	}

	own.Labels[webhook.TeamLabel] = "search"
	testenv.Denied(t, env.Client.Update(ctx, own), "label team=payments is set and may not be changed or removed")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil {
		t.Fatal(err)
	}
	delete(own.Labels, webhook.TeamLabel)
	// The defaulter would add team=unassigned back; the validator sees the change from payments.
	testenv.Denied(t, env.Client.Update(ctx, own), "may not be changed or removed")
	// Another update that keeps the label is allowed.
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(own), own); err != nil {
		t.Fatal(err)
	}
	own.Labels["x"] = "z"
	if err := env.Client.Update(ctx, own); err != nil {
		t.Errorf("an update keeping the team label: %v", err)
	}
}

func TestReplicaCeilingFromTheLivePolicy(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	// No ConfigMap: the default ceiling of 10.
	testenv.Denied(t, env.Client.Create(ctx, deployment(ns, "big", ptr.To[int32](11), nil, nil)), "namespace policy allows at most 10 replicas")
	if err := env.Client.Create(ctx, deployment(ns, "ten", ptr.To[int32](10), nil, nil)); err != nil {
		t.Errorf("10 replicas without a policy: %v", err)
	}
	// The policy is read live: it applies to the very next request.
	policy(t, ns, "3")
	testenv.Denied(t, env.Client.Create(ctx, deployment(ns, "four", ptr.To[int32](4), nil, nil)), "namespace policy allows at most 3 replicas")
	d := deployment(ns, "three", ptr.To[int32](3), nil, nil)
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatalf("3 replicas under a ceiling of 3: %v", err)
	}
	// Scaling past it through the Deployment is denied; a Deployment already above a lowered
	// ceiling ("ten") may still be edited and scaled down, never up.
	d.Spec.Replicas = ptr.To[int32](5)
	testenv.Denied(t, env.Client.Update(ctx, d), "at most 3 replicas")
	ten := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "ten"}, ten); err != nil {
		t.Fatal(err)
	}
	ten.Spec.Replicas = ptr.To[int32](8)
	if err := env.Client.Update(ctx, ten); err != nil {
		t.Errorf("scaling down above a lowered ceiling: %v", err)
	}
	ten.Spec.Replicas = ptr.To[int32](9)
	testenv.Denied(t, env.Client.Update(ctx, ten), "at most 3 replicas")
}

// kubectl scale goes through the /scale subresource: an autoscaling/v1 Scale, not a Deployment.
func TestScaleSubresourceIsHeldToTheCeiling(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	policy(t, ns, "4")
	d := deployment(ns, "web", ptr.To[int32](2), nil, nil)
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	scale := &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 7}}
	testenv.Denied(t, env.Client.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale)), "namespace policy allows at most 4 replicas")
	scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
	if err := env.Client.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale)); err != nil {
		t.Fatalf("scale to 4: %v", err)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil || *d.Spec.Replicas != 4 {
		t.Errorf("replicas after scale = %v (%v), want 4", d.Spec.Replicas, err)
	}
	// The ceiling lowered below the Deployment: `kubectl scale` down is allowed (the old Scale's
	// replicas are the comparison, as for an update of the Deployment), up is not.
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: webhook.PolicyConfigMap}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Data[webhook.MaxReplicasKey] = "1"
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 3}}
	if err := env.Client.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale)); err != nil {
		t.Errorf("scale down from 4 to 3 above a lowered ceiling of 1: %v", err)
	}
	scale = &autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: 4}}
	testenv.Denied(t, env.Client.SubResource("scale").Update(ctx, d, client.WithSubResourceBody(scale)), "namespace policy allows at most 1 replicas")
}

func TestAMalformedPolicyDeniesWithItsName(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	policy(t, ns, "lots")
	testenv.Denied(t, env.Client.Create(context.Background(), deployment(ns, "any", nil, nil, nil)),
		`ConfigMap `+ns+`/deployment-policy: maxReplicas="lots" is not a non-negative integer`)
}

func TestProtectedDeploymentCannotBeDeleted(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	d := deployment(ns, "keep", nil, nil, map[string]string{webhook.ProtectAnnotation: "true"})
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	testenv.Denied(t, env.Client.Delete(ctx, d), "remove the protection annotation before deleting")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
		t.Fatalf("the protected Deployment is gone: %v", err)
	}
	delete(d.Annotations, webhook.ProtectAnnotation)
	if err := env.Client.Update(ctx, d); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, d); err != nil {
		t.Errorf("delete after unprotecting: %v", err)
	}
}

// The operator's own namespace is never sent to the webhooks, so a broken webhook cannot block
// its own repair: here an 11-replica Deployment in it is not held to the ceiling.
func TestOperatorNamespaceIsExempt(t *testing.T) {
	env.Manager(t)
	d := deployment(testenv.Namespace, "exempt", ptr.To[int32](11), nil, nil)
	if err := env.Client.Create(context.Background(), d); err != nil {
		t.Fatalf("a Deployment in the operator namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), d) })
	if _, ok := d.Labels[webhook.TeamLabel]; ok {
		t.Error("the operator namespace was defaulted")
	}
}
