// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"crypto/sha256"
	"fmt"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kpatterns/kpatterns/shared/digest"
)

// Project is the cache transform of every kind the reloader caches: it keeps only what the
// reloader reads, before the object enters the informer's store.
//
//   - ConfigMaps and Secrets: name, namespace, UID, resourceVersion, IgnoreAnnotation, and for each
//     key k the 32 bytes of the value's sha256 under the key DigestKey(k), in place of the value.
//     No value — and so no Secret — is held after this.
//   - Deployments, StatefulSets, DaemonSets, CronJobs, Rollouts: identity, deletion timestamp, the
//     reloader's own annotations, and of the Pod template only the references to ConfigMaps and
//     Secrets (volumes, projected sources, envFrom and env valueFrom of containers and init
//     containers); of a Rollout also spec.restartAt.
//
// Projecting a projection returns it unchanged, as client-go asks of a transform: it transforms
// the objects of an informer's initial watch-list twice (the reflector hands the transformed
// objects to its FIFO's Replace, which transforms them again; TestTransformOfExistingObjects shows
// it). A workload's projection keeps what it keeps; a source's digest keys are kept as they are,
// and no object the API server serves has one, so no digest is ever taken of a digest.
func Project(obj any) (any, error) {
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		p := &corev1.ConfigMap{ObjectMeta: sourceMeta(o.ObjectMeta)}
		if o.Data != nil {
			p.Data = make(map[string]string, len(o.Data))
			for k, v := range o.Data {
				if isDigestKey(k) {
					p.Data[k] = v
					continue
				}
				sum := sha256.Sum256([]byte(v))
				p.Data[DigestKey(k)] = string(sum[:])
			}
		}
		p.BinaryData = hashed(o.BinaryData)
		return p, nil
	case *corev1.Secret:
		return &corev1.Secret{ObjectMeta: sourceMeta(o.ObjectMeta), Data: hashed(o.Data)}, nil
	case *appsv1.Deployment:
		return &appsv1.Deployment{ObjectMeta: workloadMeta(o.ObjectMeta), Spec: appsv1.DeploymentSpec{Template: references(o.Spec.Template)}}, nil
	case *appsv1.StatefulSet:
		return &appsv1.StatefulSet{ObjectMeta: workloadMeta(o.ObjectMeta), Spec: appsv1.StatefulSetSpec{Template: references(o.Spec.Template)}}, nil
	case *appsv1.DaemonSet:
		return &appsv1.DaemonSet{ObjectMeta: workloadMeta(o.ObjectMeta), Spec: appsv1.DaemonSetSpec{Template: references(o.Spec.Template)}}, nil
	case *Rollout:
		return &Rollout{ObjectMeta: workloadMeta(o.ObjectMeta), Spec: RolloutSpec{Template: references(o.Spec.Template), RestartAt: o.Spec.RestartAt}}, nil
	case *batchv1.CronJob:
		return &batchv1.CronJob{ObjectMeta: workloadMeta(o.ObjectMeta), Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: references(o.Spec.JobTemplate.Spec.Template)}}}}, nil
	}
	return nil, fmt.Errorf("reloader: no projection for %T", obj) // a programming error: every cached kind has one
}

// digestKeyPrefix starts the key of a value's digest in a projected source. The API server
// validates ConfigMap and Secret keys as [-._a-zA-Z0-9]+, so no key it serves starts with it.
const digestKeyPrefix = ":"

// DigestKey is the key of the digest of key k's value in a projected source.
func DigestKey(k string) string { return digestKeyPrefix + k }

func isDigestKey(k string) bool { return strings.HasPrefix(k, digestKeyPrefix) }

func identity(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp}
}

func hashed(m map[string][]byte) map[string][]byte {
	if m == nil {
		return nil
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		if isDigestKey(k) {
			out[k] = v
			continue
		}
		sum := sha256.Sum256(v)
		out[DigestKey(k)] = sum[:]
	}
	return out
}

// sourceMeta keeps of a source's metadata its identity and IgnoreAnnotation.
func sourceMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return keep(identity(m), m.Annotations, IgnoreAnnotation)
}

// workloadMeta keeps of a workload's metadata its identity and the reloader's annotations.
func workloadMeta(m metav1.ObjectMeta) metav1.ObjectMeta {
	return keep(identity(m), m.Annotations, DigestsAnnotation, SourcesAnnotation, PausedAnnotation, PausedUntilAnnotation)
}

func keep(p metav1.ObjectMeta, from map[string]string, keys ...string) metav1.ObjectMeta {
	for _, k := range keys {
		if v, ok := from[k]; ok {
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations[k] = v
		}
	}
	return p
}

// references keeps of a Pod template its digest annotation and what Refs reads.
func references(t corev1.PodTemplateSpec) corev1.PodTemplateSpec {
	var p corev1.PodTemplateSpec
	if v, ok := t.Annotations[digest.Annotation]; ok {
		p.Annotations = map[string]string{digest.Annotation: v}
	}
	for _, v := range t.Spec.Volumes {
		if v.ConfigMap != nil || v.Secret != nil || v.Projected != nil {
			src := corev1.VolumeSource{ConfigMap: v.ConfigMap, Secret: v.Secret}
			if v.Projected != nil {
				src.Projected = &corev1.ProjectedVolumeSource{Sources: slices.DeleteFunc(slices.Clone(v.Projected.Sources),
					func(s corev1.VolumeProjection) bool { return s.ConfigMap == nil && s.Secret == nil })}
			}
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: v.Name, VolumeSource: src})
		}
	}
	container := func(c corev1.Container) corev1.Container {
		return corev1.Container{Name: c.Name, EnvFrom: c.EnvFrom, Env: slices.DeleteFunc(slices.Clone(c.Env), func(e corev1.EnvVar) bool {
			return e.ValueFrom == nil || (e.ValueFrom.ConfigMapKeyRef == nil && e.ValueFrom.SecretKeyRef == nil)
		})}
	}
	for _, c := range t.Spec.InitContainers {
		p.Spec.InitContainers = append(p.Spec.InitContainers, container(c))
	}
	for _, c := range t.Spec.Containers {
		p.Spec.Containers = append(p.Spec.Containers, container(c))
	}
	return p
}
