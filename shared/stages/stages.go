// Package stages expresses a reconciler as an ordered table of named stages, and maintains the
// custom resource's status from their results: one condition per stage (<Stage>Ready), Ready from
// all of them, observedGeneration, and one status patch per reconcile, only when it changed.
//
// A stage may depend on earlier stages (Needs) and read their outputs; a stage whose dependency
// did not finish is not run, and its condition says which one it waits for. Children are written
// with Ensure: server-side apply with the pattern's field manager and a controller
// ownerReference, never onto a same-named object the custom resource does not own.
package stages

import (
	"context"
	"errors"
	"fmt"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/app"
)

// Status is the part of a custom resource's status the framework owns; embed it inline:
//
//	type WidgetStatus struct {
//		stages.Status `json:",inline"`
//		ReadyReplicas int32 `json:"readyReplicas,omitempty"`
//	}
type Status struct {
	// ObservedGeneration is the generation the conditions describe.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`
	// Conditions: Ready, and <Stage>Ready for every stage.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// DeepCopyInto copies s into out.
func (s *Status) DeepCopyInto(out *Status) {
	*out = *s
	if s.Conditions != nil {
		out.Conditions = make([]metav1.Condition, len(s.Conditions))
		for i := range s.Conditions {
			s.Conditions[i].DeepCopyInto(&out.Conditions[i])
		}
	}
}

// Object is a custom resource reconciled by stages.
type Object interface {
	client.Object
	StageStatus() *Status
}

// Condition types and reasons the framework sets.
const (
	TypeReady                = "Ready"
	ReasonReady              = "Ready"
	ReasonNotReady           = "StagesNotReady"
	ReasonDependencyNotReady = "DependencyNotReady"
	ReasonNotOwned           = "NotOwned"
	ReasonWaitingForGC       = "WaitingForGarbageCollection"
	ReasonFailed             = "Failed"
)

// NotOwnedRetry is how often a stage blocked by a foreign child tries again: a foreign object
// outside the cache raises no event when it goes away.
const NotOwnedRetry = 2 * time.Minute

type outcome int

const (
	done outcome = iota
	waiting
	failed
)

// Result is what a stage returns: Done, Waiting or Failed.
type Result struct {
	outcome      outcome
	reason, msg  string
	requeueAfter time.Duration
	err          error
	output       any
}

// Done: the stage converged; output is available to the stages that need it.
func Done(output any, message string) Result {
	return Result{outcome: done, output: output, msg: message}
}

// Waiting: the stage did its part and waits for something else (a rollout, say); requeueAfter
// 0 waits for a watch event.
func Waiting(reason, message string, requeueAfter time.Duration) Result {
	return Result{outcome: waiting, reason: reason, msg: message, requeueAfter: requeueAfter}
}

// Failed: the stage could not do its part; the reconcile is retried with backoff, except for a
// NotOwnedError, which is reported and retried every NotOwnedRetry.
func Failed(err error) Result { return Result{outcome: failed, err: err} }

// Stage is one named step. Its condition is <Name>Ready.
type Stage[T Object] struct {
	Name  string
	Needs []string // earlier stages whose outputs Run reads
	Run   func(ctx context.Context, s *State[T]) Result
}

// State is what a stage sees: the object, earlier outputs, and the means to write children.
type State[T Object] struct {
	Object  T
	outputs map[string]any
	r       *Reconciler[T]
}

// Output returns the output of a stage this one Needs.
func (s *State[T]) Output(stage string) any { return s.outputs[stage] }

// Reconciler runs the stages of one kind of custom resource.
type Reconciler[T Object] struct {
	Client       client.Client // cache reads, writes
	APIReader    client.Reader // the live read before creating a child the cache does not hold
	Recorder     events.EventRecorder
	FieldManager string
	// ManagedBy labels children (app.kubernetes.io/managed-by) so a label-selected cache holds them.
	ManagedBy string
	New       func() T
	Stages    []Stage[T]
}

// Reconcile runs every stage in order and patches the status once if it changed.
func (r *Reconciler[T]) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	obj := r.New()
	if err := r.Client.Get(ctx, req.NamespacedName, obj); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if obj.GetDeletionTimestamp() != nil {
		return reconcile.Result{}, nil // children go with it, by garbage collection
	}
	before := obj.DeepCopyObject().(T)
	s := &State[T]{Object: obj, outputs: map[string]any{}, r: r}
	status := obj.StageStatus()
	finished := map[string]bool{}
	var requeue time.Duration
	var errs []error
	var notReady []string
	for _, stage := range r.Stages {
		cond := r.run(ctx, s, stage, finished)
		switch {
		case cond.res.outcome == failed && errors.As(cond.res.err, new(*NotOwnedError)):
			requeue = minPositive(requeue, NotOwnedRetry)
		case cond.res.outcome == failed:
			errs = append(errs, fmt.Errorf("stage %s: %w", stage.Name, cond.res.err))
		case cond.res.outcome == waiting:
			requeue = minPositive(requeue, cond.res.requeueAfter)
		}
		if cond.Status != metav1.ConditionTrue {
			notReady = append(notReady, stage.Name)
		}
		meta.SetStatusCondition(&status.Conditions, cond.Condition)
	}
	ready := metav1.Condition{Type: TypeReady, Status: metav1.ConditionTrue, Reason: ReasonReady,
		Message: "all stages are ready", ObservedGeneration: obj.GetGeneration()}
	if len(notReady) > 0 {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, ReasonNotReady, fmt.Sprintf("not ready: %v", notReady)
	}
	meta.SetStatusCondition(&status.Conditions, ready)
	status.ObservedGeneration = obj.GetGeneration()

	if !apiequality.Semantic.DeepEqual(before, obj) {
		// Optimistic lock: a status computed from a stale read fails with a conflict and is retried.
		patch := client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})
		if err := r.Client.Status().Patch(ctx, obj, patch); err != nil {
			errs = append(errs, fmt.Errorf("status: %w", err))
		}
	}
	if len(errs) > 0 {
		return reconcile.Result{}, errors.Join(errs...)
	}
	return reconcile.Result{RequeueAfter: requeue}, nil
}

type stageCondition struct {
	metav1.Condition
	res Result
}

// run runs one stage unless a dependency did not finish, and turns its result into a condition.
func (r *Reconciler[T]) run(ctx context.Context, s *State[T], stage Stage[T], finished map[string]bool) stageCondition {
	c := stageCondition{Condition: metav1.Condition{Type: stage.Name + "Ready", ObservedGeneration: s.Object.GetGeneration()}}
	for _, need := range stage.Needs {
		if !finished[need] {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonDependencyNotReady, "waiting for stage "+need
			c.res = Result{outcome: waiting}
			return c
		}
	}
	c.res = stage.Run(ctx, s)
	switch c.res.outcome {
	case done:
		finished[stage.Name] = true
		s.outputs[stage.Name] = c.res.output
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonReady, c.res.msg
	case waiting:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, c.res.reason, c.res.msg
	case failed:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonFailed, c.res.err.Error()
		var notOwned *NotOwnedError
		if errors.As(c.res.err, &notOwned) && notOwned.Stale {
			c.Reason = ReasonWaitingForGC // the owner reference's event brings the next reconcile
		} else if errors.As(c.res.err, &notOwned) {
			c.Reason = ReasonNotOwned
			r.Recorder.Eventf(s.Object, nil, "Warning", ReasonNotOwned, stage.Name, "%s", notOwned.Error())
		} else if reason := apierrors.ReasonForError(c.res.err); reason != metav1.StatusReasonUnknown {
			c.Reason = string(reason) // Conflict, Forbidden, Invalid, ...
		}
	}
	if c.Message == "" {
		c.Message = stage.Name + " " + map[bool]string{true: "ready", false: "not ready"}[c.Status == metav1.ConditionTrue]
	}
	return c
}

func minPositive(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// NewReconciler returns the stages reconciler of a pattern: its clients and event recorder from
// the manager, field manager and managed-by label kpatterns-<pattern>.
func NewReconciler[T Object](mgr manager.Manager, pattern string, newObject func() T, stages []Stage[T]) *Reconciler[T] {
	return &Reconciler[T]{
		Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(pattern),
		FieldManager: app.FieldManager(pattern), ManagedBy: app.FieldManager(pattern),
		New: newObject, Stages: stages,
	}
}

// CacheChildren narrows the informers of the given child kinds to the pattern's own children
// (label app.kubernetes.io/managed-by=kpatterns-<pattern>), so memory follows the number of
// custom resources, not every object of those kinds in the cluster.
func CacheChildren(o *cache.Options, pattern string, kinds ...client.Object) {
	children := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{ManagedByLabel: app.FieldManager(pattern)})}
	for _, k := range kinds {
		app.CacheByObject(o, k, children)
	}
}
