// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/rollout"
)

// kubectlWarnings prints the API server's warnings as kubectl does.
type kubectlWarnings struct{}

func (kubectlWarnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	fmt.Printf("    Warning: %s\n", text)
}

// expectDenied prints an admission denial as kubectl does: Forbidden from a webhook, Invalid from
// an admission policy (a demo run again may meet the policies of its previous run for a moment
// after they were pruned).
func expectDenied(err error) error {
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		return fmt.Errorf("expected a denial, got %v", err)
	}
	fmt.Printf("    Error from server (%s): %v\n", apierrors.ReasonForError(err), err)
	return nil
}

// replicaSets waits until the Deployment has rolled out n ReplicaSets carrying a digest (the
// first one, before the reloader stamped a digest, is left out), and prints them.
func (d *demo) replicaSets(name, annotation string, n int) error {
	dep := &appsv1.Deployment{}
	var stamped []appsv1.ReplicaSet
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list := &appsv1.ReplicaSetList{}
		if err := d.c.List(d.ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
			return err
		}
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
			return err
		}
		stamped = slices.DeleteFunc(list.Items, func(rs appsv1.ReplicaSet) bool {
			return rs.Spec.Template.Annotations[annotation] == "" && annotation != ""
		})
		if len(stamped) == n && (annotation == "" || dep.Spec.Template.Annotations[annotation] != "") && rollout.Pending(dep, *dep.Spec.Replicas) == "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d ReplicaSets with a digest, want %d", name, len(stamped), n)
		}
	}
	fmt.Println("    REPLICASET                  DIGEST         READY")
	for _, rs := range stamped {
		fmt.Printf("    %-27s %-14.12s %d\n", rs.Name, cmp.Or(rs.Spec.Template.Annotations[digest.Annotation], "-"), rs.Status.ReadyReplicas)
	}
	return nil
}

// policyNamespace creates the namespace where the admission scenes act (its Pods on kwok's node),
// unless a scene before created it.
func (d *demo) policyNamespace() error {
	err := d.c.Create(d.ctx, localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyNS}}))
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}
