// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller summarizes existing Pods into a Workload's status: counts by phase, ready
// and total, and a Ready condition. It never writes a Pod.
package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/conditions"
	"github.com/kpatterns/kpatterns/shared/status"
	"github.com/kpatterns/kpatterns/summary/api/v1alpha1"
)

// Name is the pattern's name.
const Name = "summary"

// WorkloadBySelectorIndex indexes Workloads by each "key=value" pair of their selector.
const WorkloadBySelectorIndex = "summary.workloadBySelector"

// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=workloads,verbs=list;watch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=workloads/status,verbs=patch

// CacheOptions strips cached Pods down to what the summary reads.
func CacheOptions(o *cache.Options) {
	app.CacheByObject(o, &corev1.Pod{}, cache.ByObject{Transform: StripPod})
}

// StripPod keeps a Pod's identity, labels, phase and Ready condition, and drops the rest (spec,
// annotations, managedFields, owner references, the other conditions and container statuses).
func StripPod(obj any) (any, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return obj, nil // a DeletedFinalStateUnknown tombstone
	}
	stripped := &corev1.Pod{
		TypeMeta: pod.TypeMeta,
		ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace, UID: pod.UID,
			ResourceVersion: pod.ResourceVersion, Labels: pod.Labels, DeletionTimestamp: pod.DeletionTimestamp},
		Status: corev1.PodStatus{Phase: pod.Status.Phase},
	}
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			stripped.Status.Conditions = []corev1.PodCondition{{Type: c.Type, Status: c.Status}}
		}
	}
	return stripped, nil
}

// IndexWorkloadBySelector is the index function of WorkloadBySelectorIndex.
func IndexWorkloadBySelector(obj client.Object) []string {
	sel := obj.(*v1alpha1.Workload).Spec.Selector
	pairs := make([]string, 0, len(sel))
	for _, k := range slices.Sorted(maps.Keys(sel)) {
		pairs = append(pairs, k+"="+sel[k])
	}
	return pairs
}

// Reconciler keeps one Workload's status current.
type Reconciler struct {
	Client client.Client
}

// SetupIndexes registers the field index the Pod watch maps through on indexer, the cache it reads
// (the manager's: mgr.GetFieldIndexer()).
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.Workload{}, WorkloadBySelectorIndex, IndexWorkloadBySelector)
}

// Setup registers the index and the controller.
func Setup(mgr ctrl.Manager) error {
	if err := SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&v1alpha1.Workload{}).
		Watches(&corev1.Pod{}, handler.EnqueueRequestsFromMapFunc(MapPodToWorkloads(mgr.GetClient()))).
		Complete(&Reconciler{Client: mgr.GetClient()})
}

// MapPodToWorkloads maps a Pod (old and new on an update) to the Workloads whose selector it
// matches. Only Workloads in the Pod's namespace whose selector shares one of the Pod's labels are
// looked at, through the index: a Pod event never scans every Workload in the cluster.
func MapPodToWorkloads(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, pod client.Object) []reconcile.Request {
		podLabels := pod.GetLabels()
		seen := map[string]bool{}
		var reqs []reconcile.Request
		for k, v := range podLabels {
			list := &v1alpha1.WorkloadList{}
			if err := c.List(ctx, list, client.InNamespace(pod.GetNamespace()), client.MatchingFields{WorkloadBySelectorIndex: k + "=" + v}); err != nil {
				logf.FromContext(ctx).Error(err, "listing Workloads for a Pod", "pod", pod.GetName())
				return nil
			}
			for i := range list.Items {
				w := &list.Items[i]
				if !seen[w.Name] && Matches(w.Spec.Selector, podLabels) {
					seen[w.Name] = true
					reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(w)})
				}
			}
		}
		return reqs
	}
}

// Matches reports whether labels carry every pair of a non-empty selector.
func Matches(selector, labels map[string]string) bool {
	if len(selector) == 0 {
		return false
	}
	for k, v := range selector {
		if l, ok := labels[k]; !ok || l != v {
			return false
		}
	}
	return true
}

// Summarize counts Pods. A terminating Pod (deletionTimestamp set) counts in its phase but not as
// ready: it is going away, whatever its last Ready condition said.
func Summarize(pods []corev1.Pod) (total, ready int32, phases v1alpha1.PodCounts) {
	for i := range pods {
		p := &pods[i]
		total++
		switch p.Status.Phase {
		case corev1.PodRunning:
			phases.Running++
		case corev1.PodSucceeded:
			phases.Succeeded++
		case corev1.PodFailed:
			phases.Failed++
		case corev1.PodPending, "":
			phases.Pending++
		default:
			phases.Unknown++
		}
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue {
				ready++
			}
		}
	}
	return total, ready, phases
}

// Reconcile recounts the Workload's Pods from the cache into its status, patched once, deferred,
// only if it changed (optimistic-locked: a summary of a stale copy conflicts and re-reads). A
// Workload has no children and no finalizer: one being deleted is summarized until it is gone.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	w := &v1alpha1.Workload{}
	if err := r.Client.Get(ctx, req.NamespacedName, w); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	patcher := status.NewPatcher(r.Client, w)
	defer patcher.PatchOnReturn(ctx, w, &retErr)
	pods := &corev1.PodList{}
	if err := r.Client.List(ctx, pods, client.InNamespace(w.Namespace), client.MatchingLabels(w.Spec.Selector)); err != nil {
		return reconcile.Result{}, err
	}
	st := &w.Status
	st.Total, st.Ready, st.Phases = Summarize(pods.Items)
	st.ObservedGeneration = w.Generation
	cond := metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionFalse, ObservedGeneration: w.Generation}
	switch {
	case len(w.Spec.Selector) == 0:
		cond.Reason, cond.Message = "NoSelector", "the selector is empty" // the CRD rejects this; older objects
	case st.Total == 0:
		cond.Reason, cond.Message = "NoPods", "no Pod matches the selector"
	case st.Ready < st.Total:
		cond.Reason, cond.Message = "PodsNotReady", fmt.Sprintf("%d of %d Pods ready", st.Ready, st.Total)
	default:
		cond.Status, cond.Reason, cond.Message = metav1.ConditionTrue, "AllReady", fmt.Sprintf("%d of %d Pods ready", st.Ready, st.Total)
	}
	meta.SetStatusCondition(&st.Conditions, cond)
	return reconcile.Result{}, nil
}
