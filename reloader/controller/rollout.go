// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// Argo Rollouts' Rollout (argoproj.io/v1alpha1), the feature argo-rollouts: the reloader restarts
// a Rollout's Pods through spec.restartAt, which Argo's controller honours (it replaces every Pod
// created before that time, within the strategy's bounds), instead of editing its Pod template,
// which would start a new revision with its canary or blue-green steps.

import (
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/app"
)

// ArgoRolloutsFeature is `--with argo-rollouts`: Rollouts are reloaded too, and only then may the
// reloader list, watch and patch them (config/rbac/features.yaml; the CRD must be installed: run
// fails without it).
var ArgoRolloutsFeature = app.Feature{Name: "argo-rollouts", Help: "reload Argo Rollouts through spec.restartAt"}

// RolloutGroupVersion is Argo Rollouts' API group and version.
var RolloutGroupVersion = schema.GroupVersion{Group: "argoproj.io", Version: "v1alpha1"}

// AddToScheme registers Rollout and RolloutList: the reloader's manager knows them, whether or
// not the feature is on.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(RolloutGroupVersion, &Rollout{}, &RolloutList{})
	metav1.AddToGroupVersion(s, RolloutGroupVersion)
	return nil
}

// Rollout is what the reloader reads of an Argo Rollouts Rollout; the decoder drops the rest.
type Rollout struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              RolloutSpec `json:"spec,omitempty"`
}

// RolloutSpec is what the reloader reads of a Rollout's spec.
type RolloutSpec struct {
	Template  corev1.PodTemplateSpec `json:"template,omitempty"`
	RestartAt *metav1.Time           `json:"restartAt,omitempty"`
}

// RolloutList is a list of Rollouts.
type RolloutList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Rollout `json:"items"`
}

// DeepCopyObject copies r.
func (r *Rollout) DeepCopyObject() runtime.Object {
	if r == nil {
		return nil
	}
	out := &Rollout{TypeMeta: r.TypeMeta}
	r.DeepCopyInto(&out.ObjectMeta)
	r.Spec.Template.DeepCopyInto(&out.Spec.Template)
	out.Spec.RestartAt = r.Spec.RestartAt.DeepCopy()
	return out
}

// DeepCopyObject copies l.
func (l *RolloutList) DeepCopyObject() runtime.Object {
	if l == nil {
		return nil
	}
	out := &RolloutList{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Rollout, len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*Rollout)
		}
	}
	return out
}

// RolloutKind is the workload kind of Rollouts: its rollout writes spec.restartAt, a time after
// the last one the Rollout holds.
var RolloutKind = WorkloadKind{Kind: "Rollout", GroupVersion: RolloutGroupVersion,
	Cached:     func() client.Object { return &Workload[Rollout]{} },
	CachedList: func() client.ObjectList { return &WorkloadList[Rollout]{} },
	Roll: func(o client.Object, _ []string) string {
		at := time.Now().UTC().Truncate(time.Second)
		if last, err := time.Parse(time.RFC3339, o.(cachedWorkload).workload().Rolled); err == nil && !at.After(last) { // a second rollout within one second
			at = last.Add(time.Second)
		}
		return at.Format(time.RFC3339)
	},
	Apply: func(name, ns string, meta map[string]string, rolled string) runtime.ApplyConfiguration {
		u := &unstructured.Unstructured{}
		u.SetGroupVersionKind(RolloutGroupVersion.WithKind("Rollout"))
		u.SetName(name)
		u.SetNamespace(ns)
		u.SetAnnotations(meta)
		if rolled != "" {
			u.Object["spec"] = map[string]any{"restartAt": rolled}
		}
		return client.ApplyConfigurationFromUnstructured(u)
	}}
