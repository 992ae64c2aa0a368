// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"crypto/sha256"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/digest"
)

// unkeyed is the record entry an unkeyed digest gives a Secret of one key (the encoding
// TestDigestEncodingUnchanged pins): what anyone who can read the workload could search for.
func unkeyed(name, key, value string) string {
	sum := sha256.Sum256([]byte(value))
	return digest.New().Field('n', []byte("secret/"+name)).Field('K', []byte(key)).Field('b', sum[:]).String()[:16]
}

func pinWorkload(t *testing.T, ns string) client.Object {
	source(t, ns, controller.Secret, "pin", map[string]string{"pin": "1234"})
	return workload(t, controller.Workloads[1], ns, "app", true, func(p *corev1.PodSpec) {
		p.Containers[0].Env = []corev1.EnvVar{{Name: "PIN", ValueFrom: keyRef(controller.Secret, "pin", "pin")}}
	})
}

// The record a workload carries (readable with the view role) is keyed: a four-digit PIN's entry
// is not the unkeyed digest any reader could compute for each of the 10,000 PINs.
func TestRecordedDigestsAreKeyed(t *testing.T) {
	ns := env.Namespace(t)
	s := controller.Workloads[1]
	app := pinWorkload(t, ns)
	start(t, controller.Options{}, ns)
	app = baselined(t, s, app)
	if got := digestOf(t, s, app, "secret/pin"); got == unkeyed("pin", "pin", "1234") {
		t.Fatalf("the record holds the unkeyed digest of the PIN: %s", app.GetAnnotations()[controller.DigestsAnnotation])
	}
}

// An upgrade from unkeyed records rolls nothing: the record is compared as unkeyed once, then
// rewritten keyed, the Pod template untouched; a record under another key (the key Secret
// deleted) is a new baseline; after either, a change rolls once.
func TestUpgradeToKeyedDigestsRollsNothing(t *testing.T) {
	ns := env.Namespace(t)
	s := controller.Workloads[1]
	app := pinWorkload(t, ns)
	annotate(t, app, controller.DigestsAnnotation, "secret/pin:pin="+unkeyed("pin", "pin", "1234"))
	before := get(t, s, ns, "app")
	start(t, controller.Options{}, ns)
	after := recorded(t, s, before, "secret/pin:pin", digestOf(t, s, before, "secret/pin"))
	if after.GetGeneration() != before.GetGeneration() || after.GetAnnotations()[controller.DigestKeyAnnotation] == "" {
		t.Errorf("upgrade: generation %d → %d, key %q", before.GetGeneration(), after.GetGeneration(), after.GetAnnotations()[controller.DigestKeyAnnotation])
	}
	annotateAll(t, after, map[string]string{controller.DigestKeyAnnotation: "0123456789abcdef", // in one write
		controller.DigestsAnnotation: "secret/pin:pin=fedcba9876543210"})
	again := rebaselined(t, s, after, "secret/pin:pin", "a record under another key")
	setData(t, ns, controller.Secret, "pin", "pin", "5678")
	if _, n := rolled(t, s, again); n != 1 {
		t.Errorf("a change after the upgrade: %d generations, want one rollout", n)
	}
}
