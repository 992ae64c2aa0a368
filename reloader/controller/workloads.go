// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// The kinds of workload the reloader rolls, and how each is cached and written.

import (
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	batchv1ac "k8s.io/client-go/applyconfigurations/batch/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/digest"
)

// WorkloadKind is one kind of workload: the one code path over workloads is parameterized by
// these.
type WorkloadKind struct {
	Kind         string
	GroupVersion schema.GroupVersion
	// Cached and CachedList are the kind as the reloader's cache holds it (Workload).
	Cached     func() client.Object
	CachedList func() client.ObjectList
	// Roll is the value that rolls a workload now, for these digests of its sources; obj is the
	// cached workload, whose Rolled is the value that rolled it last.
	Roll func(obj client.Object, digests []string) string
	// Apply is the server-side apply configuration of the reloader's annotations on the
	// workload's metadata (meta) and, unless rolled is "", of the value that rolls it.
	Apply func(name, namespace string, meta map[string]string, rolled string) runtime.ApplyConfiguration
}

// podTemplateKind is a built-in kind K rolled through its Pod template's digest annotation; apply
// is its apply configuration of meta and, when not nil, of the template's annotations.
func podTemplateKind[K any](gv schema.GroupVersion, kind string, apply func(name, ns string, meta map[string]string, template *corev1ac.PodTemplateSpecApplyConfiguration) runtime.ApplyConfiguration) WorkloadKind {
	return WorkloadKind{Kind: kind, GroupVersion: gv,
		Cached:     func() client.Object { return &Workload[K]{} },
		CachedList: func() client.ObjectList { return &WorkloadList[K]{} },
		Roll:       func(_ client.Object, digests []string) string { return Combined(digests) },
		Apply: func(name, ns string, meta map[string]string, rolled string) runtime.ApplyConfiguration {
			if rolled == "" {
				return apply(name, ns, meta, nil)
			}
			return apply(name, ns, meta, corev1ac.PodTemplateSpec().WithAnnotations(map[string]string{digest.Annotation: rolled}))
		}}
}

// Workloads are the kinds the reloader rolls (RolloutKind too with the feature argo-rollouts).
var Workloads = []WorkloadKind{
	podTemplateKind[appsv1.Deployment](appsv1.SchemeGroupVersion, "Deployment",
		func(name, ns string, meta map[string]string, t *corev1ac.PodTemplateSpecApplyConfiguration) runtime.ApplyConfiguration {
			ac := appsv1ac.Deployment(name, ns).WithAnnotations(meta)
			if t != nil {
				ac.WithSpec(appsv1ac.DeploymentSpec().WithTemplate(t))
			}
			return ac
		}),
	podTemplateKind[appsv1.StatefulSet](appsv1.SchemeGroupVersion, "StatefulSet",
		func(name, ns string, meta map[string]string, t *corev1ac.PodTemplateSpecApplyConfiguration) runtime.ApplyConfiguration {
			ac := appsv1ac.StatefulSet(name, ns).WithAnnotations(meta)
			if t != nil {
				ac.WithSpec(appsv1ac.StatefulSetSpec().WithTemplate(t))
			}
			return ac
		}),
	podTemplateKind[appsv1.DaemonSet](appsv1.SchemeGroupVersion, "DaemonSet",
		func(name, ns string, meta map[string]string, t *corev1ac.PodTemplateSpecApplyConfiguration) runtime.ApplyConfiguration {
			ac := appsv1ac.DaemonSet(name, ns).WithAnnotations(meta)
			if t != nil {
				ac.WithSpec(appsv1ac.DaemonSetSpec().WithTemplate(t))
			}
			return ac
		}),
	// A CronJob's Pod template is its Job template's: the next Job it starts has the new digest;
	// Jobs already running are left alone.
	podTemplateKind[batchv1.CronJob](batchv1.SchemeGroupVersion, "CronJob",
		func(name, ns string, meta map[string]string, t *corev1ac.PodTemplateSpecApplyConfiguration) runtime.ApplyConfiguration {
			ac := batchv1ac.CronJob(name, ns).WithAnnotations(meta)
			if t != nil {
				ac.WithSpec(batchv1ac.CronJobSpec().WithJobTemplate(batchv1ac.JobTemplateSpec().WithSpec(batchv1ac.JobSpec().WithTemplate(t))))
			}
			return ac
		}),
}

// Kinds are the workload kinds o rolls: Workloads, and RolloutKind with ArgoRollouts.
func (o Options) Kinds() []WorkloadKind {
	if o.ArgoRollouts {
		return append(slices.Clip(Workloads), RolloutKind)
	}
	return Workloads
}
