// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"crypto/sha256"
	"fmt"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kpatterns/kpatterns/shared/digest"
)

// Project is the cache transform of every kind the reloader caches: it keeps only what the
// reloader reads, before the object enters the informer's store.
//
//   - ConfigMaps and Secrets: name, namespace, UID, resourceVersion, IgnoreAnnotation, and per key the 32 bytes of
//     the value's sha256 in place of the value.
//     No value — and so no Secret — is held after this.
//   - Deployments, StatefulSets, DaemonSets, CronJobs: identity, deletion timestamp, the reloader's own
//     annotations, and of the Pod template only the references to ConfigMaps and Secrets (volumes,
//     projected sources, envFrom and env valueFrom of containers and init containers).
//
// A projection is marked (selfLink, which the API server no longer sets, holds Projection), and
// projecting it again returns it unchanged: client-go transforms the objects of an informer's
// initial watch-list twice (the reflector hands the transformed objects to its FIFO's Replace,
// which transforms them again), and a digest of a digest would differ from the digest of the
// data. TestTransformOfExistingObjects shows both.
func Project(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok && m.GetSelfLink() == Projection {
		return obj, nil
	}
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		p := &corev1.ConfigMap{ObjectMeta: sourceMeta(o.ObjectMeta)}
		if o.Data != nil {
			p.Data = make(map[string]string, len(o.Data))
			for k, v := range o.Data {
				sum := sha256.Sum256([]byte(v))
				p.Data[k] = string(sum[:])
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
	case *batchv1.CronJob:
		return &batchv1.CronJob{ObjectMeta: workloadMeta(o.ObjectMeta), Spec: batchv1.CronJobSpec{JobTemplate: batchv1.JobTemplateSpec{
			Spec: batchv1.JobSpec{Template: references(o.Spec.JobTemplate.Spec.Template)}}}}, nil
	}
	return nil, fmt.Errorf("reloader: no projection for %T", obj) // a programming error: every cached kind has one
}

// Projection marks an object Project made, in its selfLink: a constant, so the mark costs no
// memory per object.
const Projection = "kpatterns.dev/reloader-projection"

func identity(m metav1.ObjectMeta) metav1.ObjectMeta {
	return metav1.ObjectMeta{Name: m.Name, Namespace: m.Namespace, UID: m.UID, ResourceVersion: m.ResourceVersion,
		DeletionTimestamp: m.DeletionTimestamp, SelfLink: Projection} //nolint:staticcheck // deprecated for the API server, so free to mark projections
}

func hashed(m map[string][]byte) map[string][]byte {
	if m == nil {
		return nil
	}
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		sum := sha256.Sum256(v)
		out[k] = sum[:]
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
