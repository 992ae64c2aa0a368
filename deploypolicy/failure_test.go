// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Failure modes of both forms through envtest's kube-apiserver: what a user sees when the webhook
// is down or slow, and that the operator namespace is spared by the policies too (the README's
// failure-mode table).

import (
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/admit"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// With no webhook process serving, failurePolicy Fail refuses every governed request.
func TestWebhookDownRefuses(t *testing.T) { env.WebhookDownRefuses(t, nil, create(nil, nil, nil)) }

// slow answers after the webhooks' timeoutSeconds (5).
type slow struct{ admission.Handler }

func (s slow) Handle(ctx context.Context, req admission.Request) admission.Response {
	select {
	case <-time.After(6 * time.Second):
	case <-ctx.Done():
	}
	return s.Handler.Handle(ctx, req)
}

// A webhook slower than its timeoutSeconds: kube-apiserver stops waiting and, with failurePolicy
// Fail, refuses the request.
func TestWebhookPastItsTimeoutRefuses(t *testing.T) {
	ns := env.Namespace(t)
	env.ManagerWith(t, func(mgr manager.Manager) error {
		dec := admission.NewDecoder(mgr.GetScheme())
		admit.Register(mgr, webhook.MutatePath, slow{webhook.NewDefaulter(dec)})
		admit.Register(mgr, webhook.ValidatePath, slow{&webhook.Validator{Decoder: dec, Policy: mgr.GetAPIReader()}})
		return nil
	})
	err := env.Client.Create(context.Background(), deployment(ns, "d", nil, nil, nil))
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("err = %v, want the request refused: failed calling webhook, deadline exceeded", err)
	}
}

// The policies' bindings spare the operator namespace as the webhooks do: there, with a
// ceiling of 1, two replicas are admitted and no team label is defaulted, while a governed
// namespace is held to the same ceiling.
func TestPoliciesSpareTheOperatorNamespace(t *testing.T) {
	ctx := context.Background()
	labels := env.BindPolicies(t, env.Policies(t))
	op := &corev1.Namespace{}
	if err := env.Client.Get(ctx, client.ObjectKey{Name: testenv.Namespace}, op); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(op.DeepCopy())
	for k, v := range labels { // the operator namespace as one the policies are bound to
		op.Labels[k] = v
	}
	if err := env.Client.Patch(ctx, op, patch); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		undo := client.MergeFrom(op.DeepCopy())
		for k := range labels {
			delete(op.Labels, k)
		}
		_ = env.Client.Patch(context.Background(), op, undo)
	})
	governed := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-spared-governed", Labels: labels}}
	for _, o := range []client.Object{governed,
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: webhook.PolicyConfigMap, Namespace: governed.Name}, Data: map[string]string{webhook.MaxReplicasKey: "1"}},
		&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: webhook.PolicyConfigMap, Namespace: testenv.Namespace}, Data: map[string]string{webhook.MaxReplicasKey: "1"}}} {
		if err := env.Client.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = env.Client.Delete(context.Background(), o) })
	}
	testenv.Eventually(t, "the policies in effect in the governed namespace", func() error {
		err := env.Client.Create(ctx, deployment(governed.Name, "two", ptr.To[int32](2), nil, nil), client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
			return err
		}
		return nil
	})
	d := deployment(testenv.Namespace, "spared", ptr.To[int32](2), nil, nil)
	if err := env.Client.Create(ctx, d); err != nil {
		t.Fatalf("two replicas in the operator namespace: %v", err)
	}
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), &appsv1.Deployment{ObjectMeta: d.ObjectMeta}) })
	if _, ok := d.Labels[webhook.TeamLabel]; ok {
		t.Errorf("the operator namespace was defaulted: %v", d.Labels)
	}
}
