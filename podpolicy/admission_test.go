// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The differential suite: one table of Pod creations decided through envtest's kube-apiserver by
// the webhook alone and by the admission policy (config/policy) alone.

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/podpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// governed are the labels of a governed namespace allowing what is listed.
func governed(allows ...string) map[string]string {
	l := map[string]string{webhook.EnforceLabel: "true"}
	for _, a := range allows {
		l[a] = "true"
	}
	return l
}

// create makes the Pod "p" with mutate applied.
func create(mutate ...func(*corev1.PodSpec)) testenv.Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		return c.Create(ctx, pod(ns, "p", mutate...))
	}
}

// named is step with the namespace's random name in its error replaced by NS, so that a case can
// name a whole message.
func named(step testenv.Step) testenv.Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		if err := step(ctx, c, ns); err != nil {
			return errors.New(strings.ReplaceAll(err.Error(), ns, "NS"))
		}
		return nil
	}
}

func privilegedInit(s *corev1.PodSpec) {
	s.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}
}
func unprivileged(s *corev1.PodSpec) {
	s.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(false)}
}
func hostIPC(s *corev1.PodSpec) { s.HostIPC = true }

const (
	hostAll     = "hostNetwork, hostPID: namespace "
	privilegedC = "container app is privileged; namespace "
)

var cases = []testenv.Case{
	{Name: "not governed", Labels: map[string]string{}, Request: create(privileged, hostNetwork)},
	{Name: "governed, Pods not allowed", Labels: governed(), Request: create(), Deny: "does not allow Pods (label patterns.kpatterns.dev/allow-pods=true)", Probe: true},
	{Name: "a label must say true", Labels: map[string]string{webhook.EnforceLabel: "true", webhook.AllowPodsLabel: "yes"}, Request: create(),
		Deny: "does not allow Pods (label patterns.kpatterns.dev/allow-pods=true)"},
	{Name: "Pods allowed", Labels: governed(webhook.AllowPodsLabel), Request: create()},
	{Name: "privileged", Labels: governed(webhook.AllowPodsLabel), Request: create(privileged), Deny: privilegedC, Probe: true},
	{Name: "privileged: false", Labels: governed(webhook.AllowPodsLabel), Request: create(unprivileged)},
	{Name: "a privileged init container", Labels: governed(webhook.AllowPodsLabel), Request: create(privilegedInit), Deny: "container init is privileged; namespace "},
	{Name: "privileged allowed, and warned about", Labels: governed(webhook.AllowPodsLabel, webhook.AllowPrivilegedLabel), Request: create(privileged, privilegedInit),
		Warn: "container init is privileged, as namespace ", Probe: true},
	{Name: "privileged allowed, the app container too", Labels: governed(webhook.AllowPodsLabel, webhook.AllowPrivilegedLabel), Request: create(privileged),
		Warn: "container app is privileged, as namespace "},
	{Name: "host namespaces", Labels: governed(webhook.AllowPodsLabel), Request: create(hostNetwork),
		Deny: hostAll},
	{Name: "host namespaces allowed", Labels: governed(webhook.AllowPodsLabel, webhook.AllowHostNamespacesLabel), Request: create(hostNetwork, hostIPC)},
	{Name: "every violation named, in order", Labels: governed(webhook.AllowPodsLabel), Request: named(create(privilegedInit, privileged, hostNetwork, hostIPC)),
		Deny: "container init is privileged; namespace NS does not allow it (label patterns.kpatterns.dev/allow-privileged=true); " +
			"container app is privileged; namespace NS does not allow it (label patterns.kpatterns.dev/allow-privileged=true); " +
			"hostIPC, hostNetwork, hostPID: namespace NS does not allow host namespaces (label patterns.kpatterns.dev/allow-host-namespaces=true)"},
	{Name: "only the first reason without allow-pods", Labels: governed(webhook.AllowPrivilegedLabel), Request: create(privileged),
		Deny: "does not allow Pods (label patterns.kpatterns.dev/allow-pods=true)"},
	{Name: "server-side dry-run", Labels: governed(webhook.AllowPodsLabel), Request: func(ctx context.Context, c client.Client, ns string) error {
		return c.Create(ctx, pod(ns, "p", privileged), client.DryRunAll)
	}, Deny: privilegedC},
}

func TestWebhookAndPolicyDecideAlike(t *testing.T) { env.DecideAlike(t, cases) }

// The suite is a test that can fail: with init containers planted out of the privileged check, the suite must report a privileged init container.
func TestDifferentialSuiteFindsAPlantedDifference(t *testing.T) {
	env.FindsPlanted(t, cases, "size(variables.violations) == 0",
		"size(variables.violations) == 0 || variables.violations.all(v, v.startsWith('container init '))", "a privileged init container")
}

// With no webhook process serving, failurePolicy Fail refuses every Pod create in a governed
// namespace.
func TestWebhookDownRefuses(t *testing.T) {
	env.WebhookDownRefuses(t, governed(webhook.AllowPodsLabel), create())
}
