// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The differential suite: one table of Widget requests decided through envtest's kube-apiserver
// by the webhooks alone and by the admission policies (config/policy) alone.

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/testenv"
	"github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	"github.com/kpatterns/kpatterns/widget/controller"
)

// make creates the Widget "w" with image and replicas (nil: unset).
func make(image string, replicas *int32, opts ...client.CreateOption) testenv.Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		return c.Create(ctx, &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns},
			Spec: v1alpha1.WidgetSpec{Image: image, Replicas: replicas}}, opts...)
	}
}

// widgetPolicy makes the ConfigMap widget-policy with data.
func widgetPolicy(kv ...string) testenv.Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: controller.PolicyConfigMap, Namespace: ns}, Data: map[string]string{}}
		for i := 0; i+1 < len(kv); i += 2 {
			cm.Data[kv[i]] = kv[i+1]
		}
		return c.Create(ctx, cm)
	}
}

// edit reads "w", applies f and updates it.
func edit(f func(*v1alpha1.Widget)) testenv.Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		w := &v1alpha1.Widget{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, w); err != nil {
			return err
		}
		f(w)
		return c.Update(ctx, w)
	}
}

// team checks that "w", once made, carries team=want.
func team(make testenv.Step, want string) testenv.Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		if err := make(ctx, c, ns); err != nil {
			return err
		}
		w := &v1alpha1.Widget{}
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "w"}, w); err != nil {
			return err
		}
		if got := w.Labels[controller.TeamLabel]; got != want {
			return fmt.Errorf("label team=%q, want %q", got, want)
		}
		return nil
	}
}

const (
	prefixes = "registry.example.com/, nginx:"
	busybox  = `image "busybox:1.36" is not allowed by ConfigMap widget-policy: it must start with one of registry.example.com/, nginx:`
)

var cases = []testenv.Case{
	{Name: "team label defaulted", Request: team(make("nginx:1.27", nil), controller.Unassigned), Probe: true},
	{Name: "a team label is kept", Request: team(func(ctx context.Context, c client.Client, ns string) error {
		return c.Create(ctx, &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns, Labels: map[string]string{controller.TeamLabel: "payments"}},
			Spec: v1alpha1.WidgetSpec{Image: "nginx:1.27"}})
	}, "payments")},
	{Name: "no policy: any image, any replicas", Request: make("busybox:1.36", ptr.To[int32](50))},
	{Name: "allowed prefix", Setup: widgetPolicy(controller.AllowedImagesKey, prefixes), Request: make("nginx:1.27", nil)},
	{Name: "image without an allowed prefix", Setup: widgetPolicy(controller.AllowedImagesKey, prefixes), Request: make("busybox:1.36", nil), Deny: busybox, Probe: true},
	{Name: "empty entries in the prefixes", Setup: widgetPolicy(controller.AllowedImagesKey, " , nginx:,"), Request: make("nginx:1.27", nil)},
	{Name: "an empty prefix list allows nothing", Setup: widgetPolicy(controller.AllowedImagesKey, ""), Request: make("nginx:1.27", nil),
		Deny: `image "nginx:1.27" is not allowed by ConfigMap widget-policy: it must start with one of`},
	{Name: "a kept image under a tightened policy", Setup: testenv.Steps(make("busybox:1.36", nil), widgetPolicy(controller.AllowedImagesKey, prefixes)),
		Request: edit(func(w *v1alpha1.Widget) { w.Spec.Port = 9090 })},
	{Name: "a new image under a tightened policy", Setup: testenv.Steps(make("nginx:1.27", nil), widgetPolicy(controller.AllowedImagesKey, prefixes)),
		Request: edit(func(w *v1alpha1.Widget) { w.Spec.Image = "busybox:1.36" }), Deny: busybox},
	{Name: "past the ceiling", Setup: widgetPolicy(controller.MaxReplicasKey, "3"), Request: make("nginx:1.27", ptr.To[int32](5)),
		Deny: "ConfigMap widget-policy allows at most 3 replicas; asked for 5", Probe: true},
	{Name: "at the ceiling", Setup: widgetPolicy(controller.MaxReplicasKey, "3"), Request: make("nginx:1.27", ptr.To[int32](3))},
	{Name: "replicas unset count as 1", Setup: widgetPolicy(controller.MaxReplicasKey, "0"), Request: make("nginx:1.27", nil),
		Deny: "ConfigMap widget-policy allows at most 0 replicas; asked for 1"},
	{Name: "a ceiling with a sign", Setup: widgetPolicy(controller.MaxReplicasKey, "+3"), Request: make("nginx:1.27", ptr.To[int32](4)),
		Deny: "ConfigMap widget-policy allows at most 3 replicas; asked for 4"},
	{Name: "a malformed ceiling", Setup: widgetPolicy(controller.MaxReplicasKey, "lots"), Request: make("nginx:1.27", nil),
		Deny: `ConfigMap widget-policy: maxReplicas="lots" is not a non-negative integer; fix the policy`, Probe: true},
	{Name: "a ceiling past int32", Setup: widgetPolicy(controller.MaxReplicasKey, "2147483648"), Request: make("nginx:1.27", nil),
		Deny: `maxReplicas="2147483648" is not a non-negative integer`},
	{Name: "down above a lowered ceiling", Setup: testenv.Steps(make("nginx:1.27", ptr.To[int32](6)), widgetPolicy(controller.MaxReplicasKey, "3")),
		Request: edit(func(w *v1alpha1.Widget) { w.Spec.Replicas = ptr.To[int32](4) })},
	{Name: "up above a lowered ceiling", Setup: testenv.Steps(make("nginx:1.27", ptr.To[int32](6)), widgetPolicy(controller.MaxReplicasKey, "3")),
		Request: edit(func(w *v1alpha1.Widget) { w.Spec.Replicas = ptr.To[int32](7) }), Deny: "ConfigMap widget-policy allows at most 3 replicas; asked for 7"},
	{Name: "both rules", Setup: widgetPolicy(controller.AllowedImagesKey, prefixes, controller.MaxReplicasKey, "3"), Request: make("busybox:1.36", ptr.To[int32](5)),
		Deny: busybox},
	{Name: "a delete is never held to the policy", Setup: testenv.Steps(make("busybox:1.36", nil), widgetPolicy(controller.AllowedImagesKey, prefixes)),
		Request: func(ctx context.Context, c client.Client, ns string) error {
			return c.Delete(ctx, &v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w", Namespace: ns}})
		}},
	{Name: "no tag", Request: make("nginx", nil), Warn: `image "nginx" is not pinned: name a tag other than latest, or a digest`, Probe: true},
	{Name: "the tag latest", Request: make("nginx:latest", nil), Warn: `image "nginx:latest" is not pinned`},
	{Name: "a digest", Request: make("nginx@sha256:0000000000000000000000000000000000000000000000000000000000000000", nil)},
	{Name: "a registry port is no tag", Request: make("registry.example.com:5000/app", nil), Warn: `image "registry.example.com:5000/app" is not pinned`},
	{Name: "an unpinned image kept", Setup: make("nginx", nil), Request: edit(func(w *v1alpha1.Widget) { w.Spec.Port = 9090 })},
	{Name: "an unpinned image denied is still warned about", Setup: widgetPolicy(controller.AllowedImagesKey, prefixes), Request: make("busybox", nil),
		Deny: `image "busybox" is not allowed by ConfigMap widget-policy`, Warn: `image "busybox" is not pinned`},
	{Name: "server-side dry-run", Setup: widgetPolicy(controller.AllowedImagesKey, prefixes), Request: make("busybox:1.36", nil, client.DryRunAll), Deny: busybox},
}

func TestWebhookAndPolicyDecideAlike(t *testing.T) { env.DecideAlike(t, cases) }

// The suite is a test that can fail: with prefixes planted as suffixes, the suite must report the allowed prefix.
func TestDifferentialSuiteFindsAPlantedDifference(t *testing.T) {
	env.FindsPlanted(t, cases, "variables.prefixes.exists(p, object.spec.image.startsWith(p))",
		"variables.prefixes.exists(p, object.spec.image.endsWith(p))", "allowed prefix")
}

// With no webhook process serving, failurePolicy Fail refuses every Widget write.
func TestWebhookDownRefuses(t *testing.T) { env.WebhookDownRefuses(t, nil, make("nginx:1.27", nil)) }
