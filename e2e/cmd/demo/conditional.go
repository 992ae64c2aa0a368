// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	conditionalv1alpha1 "github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	conditionalconfig "github.com/kpatterns/kpatterns/conditional/config"
	conditional "github.com/kpatterns/kpatterns/conditional/controller"
	"github.com/kpatterns/kpatterns/shared/conditions"
	"github.com/kpatterns/kpatterns/shared/digest"
)

func (d *demo) conditional() error {
	if err := d.start("conditional"); err != nil {
		return err
	}
	step("Apply a ConfigProfile for environment staging: the default case matches")
	p := &conditionalv1alpha1.ConfigProfile{}
	if err := sample(conditionalconfig.FS, "conditional", "patterns_v1alpha1_configprofile.yaml", ns, p); err != nil {
		return err
	}
	if err := d.recreate(p, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}}); err != nil {
		return err
	}
	if err := d.profileReady(p, "default"); err != nil {
		return err
	}
	step("Switch to production: a different configuration, a new digest, a new ReplicaSet")
	if err := d.updateProfile(p, func(s *conditionalv1alpha1.ConfigProfileSpec) { s.Environment = "production" }); err != nil {
		return err
	}
	if err := d.profileReady(p, "production"); err != nil {
		return err
	}

	step("Suspend it: the suspended case matches first and waits; nothing is generated or rolled")
	if err := d.updateProfile(p, func(s *conditionalv1alpha1.ConfigProfileSpec) { s.Suspended = true }); err != nil {
		return err
	}
	err := d.waitFor(p.Name, p, func() bool {
		c := meta.FindStatusCondition(p.Status.Conditions, conditions.Ready)
		return p.Status.ObservedGeneration == p.Generation && c != nil && c.Reason == conditional.ReasonSuspended
	})
	if err != nil {
		return err
	}
	showConditions(p.Status.Conditions)

	step("Resume it, reading its configuration from ConfigMap demo-upstream (labelled " + conditional.Label + "=" + conditional.Input + "): the input case")
	in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-upstream", Namespace: ns,
		Labels: map[string]string{conditional.Label: conditional.Input}}, Data: map[string]string{"mode": "upstream", "feature-x": "on"}}
	if err := d.recreate(in, in.DeepCopy()); err != nil {
		return err
	}
	if err := d.updateProfile(p, func(s *conditionalv1alpha1.ConfigProfileSpec) { s.Suspended, s.ConfigFrom = false, in.Name }); err != nil {
		return err
	}
	return d.profileReady(p, "input")
}

func (d *demo) updateProfile(p *conditionalv1alpha1.ConfigProfile, mutate func(*conditionalv1alpha1.ConfigProfileSpec)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		mutate(&p.Spec)
		return d.c.Update(d.ctx, p)
	})
}

func (d *demo) profileReady(p *conditionalv1alpha1.ConfigProfile, matched string) error {
	err := d.waitFor(p.Name, p, func() bool {
		return p.Status.MatchedCase == matched && p.Status.ObservedGeneration == p.Generation && ready(p.Status.Conditions)
	})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{}
	if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(p), cm); err != nil {
		return err
	}
	show(p.Name, map[string]any{"matchedCase": matched, "configDigest": p.Status.ConfigDigest[:12], "generated config": cm.Data})
	rsets := &appsv1.ReplicaSetList{}
	if err := d.c.List(d.ctx, rsets, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": p.Name}); err != nil {
		return err
	}
	fmt.Println("    REPLICASET                        DIGEST         READY")
	for _, rs := range rsets.Items {
		fmt.Printf("    %-33s %-14s %d\n", rs.Name, rs.Spec.Template.Annotations[digest.Annotation][:12], rs.Status.ReadyReplicas)
	}
	return nil
}
