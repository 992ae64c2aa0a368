// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller reconciles a Widget through three stages — ConfigMap, Deployment (which
// needs the ConfigMap), Service — each ensured by server-side apply and reported as a condition.
package controller

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/kpatterns/kpatterns/shared/rollout"
	"github.com/kpatterns/kpatterns/shared/stages"
	"github.com/kpatterns/kpatterns/shared/status"
	"github.com/kpatterns/kpatterns/widget/api/v1alpha1"
)

// Name is the pattern's name: field manager kpatterns-widget, children labelled
// app.kubernetes.io/managed-by=kpatterns-widget.
const Name = "widget"

// ConfigMountPath is where the Deployment mounts the Widget's ConfigMap.
const ConfigMountPath = "/etc/widget"

// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=widgets,verbs=list;watch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=widgets/status,verbs=patch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=widgets/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps;services,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// State is what the stages of one Widget reconcile share.
type State struct {
	*stages.Scope[*v1alpha1.Widget]
}

// Stages of a Widget, in order.
var Stages = []stages.Stage[*State]{
	{Name: "ConfigMap", Run: configMap},
	{Name: "Deployment", Needs: []string{"ConfigMap"}, Run: deployment},
	{Name: "Service", Run: service},
}

// Reconciler reconciles Widgets through Stages.
type Reconciler struct{ stages.Clients }

// NewReconciler returns the Widget reconciler, or an error if Stages is malformed.
func NewReconciler(mgr ctrl.Manager) (*Reconciler, error) {
	if err := stages.Validate(Stages); err != nil {
		return nil, err
	}
	return &Reconciler{stages.NewClients(mgr, Name)}, nil
}

// Reconcile fetches the Widget, leaves a deleted one to garbage collection (its children carry its
// controller reference) and runs Stages. The status is patched once, deferred, only if it
// changed, whatever path the reconcile returns by.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	w := &v1alpha1.Widget{}
	if err := r.Client.Get(ctx, req.NamespacedName, w); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !w.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	patcher := status.NewPatcher(r.Client, w)
	defer patcher.PatchOnReturn(ctx, w, &retErr)
	return stages.Run(ctx, patcher, &State{Scope: stages.NewScope(&r.Clients, w)}, Stages)
}

// CacheOptions keeps only this pattern's own children in the child informers.
func CacheOptions(o *cache.Options) {
	stages.CacheChildren(o, Name, &corev1.ConfigMap{}, &appsv1.Deployment{}, &corev1.Service{})
}

// Setup registers the controller: Widget spec changes and any change to an owned child
// (including its deletion, or the Deployment's rollout status) reconcile the Widget.
func Setup(mgr ctrl.Manager) error {
	r, err := NewReconciler(mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.Widget{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Owns(&corev1.Service{}).
		Complete(r)
}

// PodLabels select a Widget's Pods.
func PodLabels(w *v1alpha1.Widget) map[string]string {
	return map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/instance": w.Name}
}

func configMap(ctx context.Context, s *State) stages.Result {
	w := s.Object
	if err := s.Ensure(ctx, corev1ac.ConfigMap(w.Name, w.Namespace).WithData(w.Spec.Config), &corev1.ConfigMap{}); err != nil {
		return stages.Failed(err)
	}
	return stages.Done(fmt.Sprintf("ConfigMap %s holds %d key(s)", w.Name, len(w.Spec.Config)))
}

func deployment(ctx context.Context, s *State) stages.Result {
	w := s.Object
	replicas := int32(1)
	if w.Spec.Replicas != nil {
		replicas = *w.Spec.Replicas
	}
	ac := appsv1ac.Deployment(w.Name, w.Namespace).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(replicas).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(PodLabels(w))).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(PodLabels(w)).
			WithSpec(corev1ac.PodSpec().
				WithContainers(corev1ac.Container().
					WithName("app").
					WithImage(w.Spec.Image).
					WithPorts(corev1ac.ContainerPort().WithName("http").WithContainerPort(w.Spec.Port)).
					WithVolumeMounts(corev1ac.VolumeMount().WithName("config").WithMountPath(ConfigMountPath).WithReadOnly(true))).
				WithVolumes(corev1ac.Volume().WithName("config").
					WithConfigMap(corev1ac.ConfigMapVolumeSource().WithName(w.Name))))))
	d := &appsv1.Deployment{}
	if err := s.Ensure(ctx, ac, d); err != nil {
		return stages.Failed(err)
	}
	w.Status.ReadyReplicas = d.Status.ReadyReplicas
	if why := rollout.Pending(d, replicas); why != "" {
		return stages.Waiting("Progressing", why, 0) // the Deployment's status change brings us back
	}
	return stages.Done(fmt.Sprintf("%d/%d replicas ready", d.Status.ReadyReplicas, replicas))
}

func service(ctx context.Context, s *State) stages.Result {
	w := s.Object
	ac := corev1ac.Service(w.Name, w.Namespace).WithSpec(corev1ac.ServiceSpec().
		WithSelector(PodLabels(w)).
		WithPorts(corev1ac.ServicePort().WithName("http").WithPort(w.Spec.Port).WithTargetPort(intstr.FromString("http"))))
	if err := s.Ensure(ctx, ac, &corev1.Service{}); err != nil {
		return stages.Failed(err)
	}
	return stages.Done(fmt.Sprintf("Service %s on port %d", w.Name, w.Spec.Port))
}
