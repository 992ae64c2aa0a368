// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// What the reloader's cache holds. It holds no ConfigMap, Secret or workload: its scheme
// (CacheScheme) decodes what the API server sends for those kinds into Source and Workload, which
// have only the fields the reloader reads (JSON decoding skips the rest, so a Pod template's
// containers, probes and resources are never allocated), and Project reduces those to the form
// the cache keeps: a source's identity and one digest per key, a workload's identity, the
// reloader's annotations, its references and the value that last rolled it.

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// CacheScheme is the scheme of the reloader's own cache: ConfigMaps and Secrets as Source, the
// workloads of kinds as Workload. A cache with it reads JSON (app.OwnCache sees to it): these
// types have no protobuf form.
func CacheScheme(kinds []WorkloadKind) *runtime.Scheme {
	s := runtime.NewScheme()
	core := corev1.SchemeGroupVersion
	s.AddKnownTypeWithName(core.WithKind("ConfigMap"), &Source[corev1.ConfigMap]{})
	s.AddKnownTypeWithName(core.WithKind("ConfigMapList"), &SourceList[corev1.ConfigMap]{})
	s.AddKnownTypeWithName(core.WithKind("Secret"), &Source[corev1.Secret]{})
	s.AddKnownTypeWithName(core.WithKind("SecretList"), &SourceList[corev1.Secret]{})
	metav1.AddToGroupVersion(s, core)
	for _, w := range kinds {
		s.AddKnownTypeWithName(w.GroupVersion.WithKind(w.Kind), w.Cached())
		s.AddKnownTypeWithName(w.GroupVersion.WithKind(w.Kind+"List"), w.CachedList())
		metav1.AddToGroupVersion(s, w.GroupVersion)
	}
	return s
}

// Source is a ConfigMap (K corev1.ConfigMap) or a Secret (K corev1.Secret) in the reloader's cache.
type Source[K corev1.ConfigMap | corev1.Secret] struct {
	metav1.TypeMeta `json:",inline"`
	Meta            `json:"metadata,omitempty"`
	// Data and BinaryData are as the API server sends them (a Secret's data base64-encoded) until
	// Project replaces them with Values.
	Data       map[string]string `json:"data,omitempty"`
	BinaryData map[string][]byte `json:"binaryData,omitempty"`
	// Values are the digests of the values, one per key; Ignored is IgnoreAnnotation "true".
	Values  valueDigests `json:"-"`
	Ignored bool         `json:"-"`
}

// SourceList is a list of Sources.
type SourceList[K corev1.ConfigMap | corev1.Secret] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Source[K] `json:"items"`
}

// cachedSource is a Source of either kind.
type cachedSource interface {
	client.Object
	source() (valueDigests, bool)
}

func (s *Source[K]) source() (valueDigests, bool) { return s.Values, s.Ignored }

// DeepCopyObject copies s.
func (s *Source[K]) DeepCopyObject() runtime.Object {
	out := *s
	out.Meta = s.deepCopy()
	out.Data = maps.Clone(s.Data)
	if s.BinaryData != nil {
		out.BinaryData = make(map[string][]byte, len(s.BinaryData))
		for k, v := range s.BinaryData {
			out.BinaryData[k] = slices.Clone(v)
		}
	}
	return &out
}

// DeepCopyObject copies l.
func (l *SourceList[K]) DeepCopyObject() runtime.Object {
	out := &SourceList[K]{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]Source[K], len(l.Items))
		for i := range l.Items {
			out.Items[i] = *l.Items[i].DeepCopyObject().(*Source[K])
		}
	}
	return out
}

// Workload is a workload of kind K (appsv1.Deployment, appsv1.StatefulSet, appsv1.DaemonSet,
// batchv1.CronJob, Rollout) in the reloader's cache.
type Workload[K any] struct {
	metav1.TypeMeta `json:",inline"`
	Meta            `json:"metadata,omitempty"`
	// Spec is as the API server sends it, of what the reloader reads, until Project replaces it
	// with References and Rolled.
	Spec workloadSpec `json:"spec"`
	// References are the sources its Pod template references (Refs); Rolled is the value the
	// reloader writes to roll it, as the workload holds it (WorkloadKind.Rolled).
	References []Ref  `json:"-"`
	Rolled     string `json:"-"`
}

// WorkloadList is a list of Workloads. Its items are pointers: a list from the cache
// (MapSourceToWorkloads, with client.UnsafeDisableDeepCopy) then holds the cached workloads
// themselves, not a copy of each.
type WorkloadList[K any] struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []*Workload[K] `json:"items"`
}

// workloadSpec is what the reloader reads of a workload's spec: its Pod template (a CronJob's in
// its Job template), and a Rollout's restartAt.
type workloadSpec struct {
	Template    *podTemplate `json:"template,omitempty"`
	JobTemplate *jobTemplate `json:"jobTemplate,omitempty"`
	RestartAt   *metav1.Time `json:"restartAt,omitempty"`
}

type jobTemplate struct {
	Spec struct {
		Template *podTemplate `json:"template,omitempty"`
	} `json:"spec"`
}

// podTemplate is what Refs reads of a Pod template, and its digest annotation.
type podTemplate struct {
	Metadata struct {
		Annotations map[string]string `json:"annotations,omitempty"`
	} `json:"metadata"`
	Spec struct {
		Volumes        []corev1.Volume `json:"volumes,omitempty"`
		InitContainers []envOf         `json:"initContainers,omitempty"`
		Containers     []envOf         `json:"containers,omitempty"`
	} `json:"spec"`
}

// envOf is what Refs reads of a container.
type envOf struct {
	EnvFrom []corev1.EnvFromSource `json:"envFrom,omitempty"`
	Env     []corev1.EnvVar        `json:"env,omitempty"`
}

func (s *workloadSpec) template() *podTemplate {
	if s.JobTemplate != nil {
		return s.JobTemplate.Spec.Template
	}
	return s.Template
}

// cachedWorkload is a Workload of any kind.
type cachedWorkload interface {
	client.Object
	workload() *Workload[struct{}]
}

// workload is w's fields, whatever its kind.
func (w *Workload[K]) workload() *Workload[struct{}] { return (*Workload[struct{}])(w) }

// DeepCopyObject copies w.
func (w *Workload[K]) DeepCopyObject() runtime.Object {
	out := &Workload[K]{TypeMeta: w.TypeMeta, Spec: workloadSpec{Template: w.Spec.Template.deepCopy(), RestartAt: w.Spec.RestartAt.DeepCopy()},
		Meta: w.deepCopy(), References: slices.Clone(w.References), Rolled: w.Rolled}
	if w.Spec.JobTemplate != nil {
		out.Spec.JobTemplate = &jobTemplate{}
		out.Spec.JobTemplate.Spec.Template = w.Spec.JobTemplate.Spec.Template.deepCopy()
	}
	return out
}

func (t *podTemplate) deepCopy() *podTemplate {
	if t == nil {
		return nil
	}
	out := &podTemplate{}
	out.Metadata.Annotations = maps.Clone(t.Metadata.Annotations)
	for _, v := range t.Spec.Volumes {
		out.Spec.Volumes = append(out.Spec.Volumes, *v.DeepCopy())
	}
	copyEnv := func(in []envOf) (out []envOf) {
		for _, c := range in {
			e := envOf{}
			for _, f := range c.EnvFrom {
				e.EnvFrom = append(e.EnvFrom, *f.DeepCopy())
			}
			for _, v := range c.Env {
				e.Env = append(e.Env, *v.DeepCopy())
			}
			out = append(out, e)
		}
		return out
	}
	out.Spec.InitContainers, out.Spec.Containers = copyEnv(t.Spec.InitContainers), copyEnv(t.Spec.Containers)
	return out
}

// DeepCopyObject copies l.
func (l *WorkloadList[K]) DeepCopyObject() runtime.Object {
	out := &WorkloadList[K]{TypeMeta: l.TypeMeta}
	l.DeepCopyInto(&out.ListMeta)
	if l.Items != nil {
		out.Items = make([]*Workload[K], len(l.Items))
		for i, w := range l.Items {
			if w != nil {
				out.Items[i] = w.DeepCopyObject().(*Workload[K])
			}
		}
	}
	return out
}

// Cached is what the reloader's cache holds of obj, a ConfigMap, Secret or workload of one of the
// kinds the reloader rolls as the API serves it (a typed object of the API's Go types, or a
// Rollout): its JSON decoded as the cache decodes it, then projected.
func Cached(obj client.Object) (client.Object, error) {
	var into client.Object
	switch obj.(type) {
	case *corev1.ConfigMap:
		into = &Source[corev1.ConfigMap]{}
	case *corev1.Secret:
		into = &Source[corev1.Secret]{}
	case *appsv1.Deployment:
		into = &Workload[appsv1.Deployment]{}
	case *appsv1.StatefulSet:
		into = &Workload[appsv1.StatefulSet]{}
	case *appsv1.DaemonSet:
		into = &Workload[appsv1.DaemonSet]{}
	case *batchv1.CronJob:
		into = &Workload[batchv1.CronJob]{}
	case *Rollout:
		into = &Workload[Rollout]{}
	default:
		return nil, fmt.Errorf("reloader: the cache holds no %T", obj)
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(b, into); err != nil {
		return nil, err
	}
	p, err := Project(into)
	if err != nil {
		return nil, err
	}
	return p.(client.Object), nil
}
