// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package rollout tells whether a Deployment has finished rolling out.
package rollout

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Pending says why a Deployment has not finished rolling out replicas, or "" if it has:
// the controller saw the current spec, every replica is updated and available, and the
// Deployment reports Available.
func Pending(d *appsv1.Deployment, replicas int32) string {
	if d.Status.ObservedGeneration < d.Generation {
		return "the deployment controller has not seen the current spec yet"
	}
	if d.Status.UpdatedReplicas < replicas || d.Status.AvailableReplicas < replicas || d.Status.Replicas > replicas {
		return fmt.Sprintf("rolling out: %d updated, %d available of %d", d.Status.UpdatedReplicas, d.Status.AvailableReplicas, replicas)
	}
	for _, c := range d.Status.Conditions {
		if c.Type == appsv1.DeploymentAvailable {
			if c.Status == corev1.ConditionTrue {
				return ""
			}
			return "not available: " + c.Message
		}
	}
	return "no Available condition yet"
}
