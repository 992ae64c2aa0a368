// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package stages is what a pattern's reconcile steps are built from: an ordered table of named
// stages over a typed state, run by Run, which maintains the custom resource's status from their
// results — one condition per stage (<Stage>Ready), Ready from all of them, observedGeneration.
// The pattern's own Reconcile fetches the object, takes a status.Patcher and defers its one
// Patch, handles deletion, then calls Run, so its control flow reads in the pattern's file.
//
// Stages share a typed state S that the pattern defines (as flux's reconcile steps share typed
// values and cluster-api's reconcilers a *scope): S embeds *Scope[T] — the object and the means to
// write its children — and adds the fields one stage sets for the next. A stage may depend on
// earlier stages (Needs); one whose dependency did not finish is not run, and its condition says
// which one it waits for. Validate checks the Needs when the reconciler is built: an unknown or
// later stage is an error then, not a stage that waits forever.
//
// Children are written with Scope.Ensure: server-side apply with the pattern's field manager and a
// controller ownerReference, never onto a same-named object the custom resource does not own.
package stages

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/conditions"
	"github.com/kpatterns/kpatterns/shared/status"
)

// Object is a custom resource reconciled by stages. Its API type implements these with plain
// fields (status.conditions, status.observedGeneration): API packages import nothing from here.
type Object interface {
	client.Object
	GetConditions() []metav1.Condition
	SetConditions([]metav1.Condition)
	SetObservedGeneration(int64)
}

// Reasons the framework sets.
const (
	ReasonReady              = "Ready"
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

// Result is what a stage returns: Done, Waiting, Failed or Terminal.
type Result struct {
	outcome      outcome
	reason, msg  string
	requeueAfter time.Duration
	err          error
}

// Done: the stage converged; what it set on the state is there for the stages that need it.
func Done(message string) Result { return Result{outcome: done, msg: message} }

// Waiting: the stage did its part and waits for something else (a rollout, say); requeueAfter
// 0 waits for a watch event.
func Waiting(reason, message string, requeueAfter time.Duration) Result {
	return Result{outcome: waiting, reason: reason, msg: message, requeueAfter: requeueAfter}
}

// Failed: the stage could not do its part; the reconcile is retried with backoff, except for a
// NotOwnedError, which is reported and retried every NotOwnedRetry.
func Failed(err error) Result { return Result{outcome: failed, err: err} }

// Terminal: the object as written cannot converge (a spec no case accepts, say); retrying would
// not help, so the reconcile returns a reconcile.TerminalError and waits for the next change.
func Terminal(reason string, err error) Result {
	return Result{outcome: failed, reason: reason, msg: err.Error(), err: reconcile.TerminalError(err)}
}

// Stage is one named step over the pattern's state S. Its condition is <Name>Ready.
type Stage[S any] struct {
	Name  string
	Needs []string // earlier stages that must be Done before this one runs
	Run   func(ctx context.Context, s S) Result
}

// FieldManager is the server-side apply field manager a pattern's controller writes with, and the
// value of ManagedByLabel on the children it makes.
func FieldManager(pattern string) string { return "kpatterns-" + pattern }

// Clients are what a stages reconciler reads and writes with.
type Clients struct {
	Client    client.Client // cache reads, writes
	APIReader client.Reader // the live read before creating a child the cache does not hold
	Recorder  events.EventRecorder
	// FieldManager applies children; ManagedBy labels them (app.kubernetes.io/managed-by) so a
	// label-selected cache holds them.
	FieldManager, ManagedBy string
}

// Scope is what every stage's state embeds: the object being reconciled and the means to read
// the cache and write children.
type Scope[T Object] struct {
	Object T
	c      *Clients
}

// Reader reads from the manager's cache.
func (s *Scope[T]) Reader() client.Reader { return s.c.Client }

// NewClients returns a pattern's clients from its manager: the cache client, the API reader, the
// event recorder, and field manager and managed-by label kpatterns-<pattern>.
func NewClients(mgr manager.Manager, pattern string) Clients {
	return Clients{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: mgr.GetEventRecorder(pattern),
		FieldManager: FieldManager(pattern), ManagedBy: FieldManager(pattern)}
}

// NewScope is the scope of one reconcile of obj: what a pattern's state embeds.
func NewScope[T Object](c *Clients, obj T) *Scope[T] { return &Scope[T]{Object: obj, c: c} }

func (s *Scope[T]) scope() *Scope[T] { return s }

// State is a pattern's stage state: a struct that embeds *Scope[T].
type State[T Object] interface{ scope() *Scope[T] }

// Validate checks a stage table: names non-empty and unique, every Need an earlier stage.
func Validate[S any](table []Stage[S]) error {
	earlier := map[string]bool{}
	for i, st := range table {
		if st.Name == "" || st.Run == nil {
			return fmt.Errorf("stage %d: a stage needs a Name and a Run", i)
		}
		if earlier[st.Name] {
			return fmt.Errorf("stage %s: the name is used twice", st.Name)
		}
		for _, need := range st.Needs {
			if !earlier[need] {
				return fmt.Errorf("stage %s needs %q, which is not an earlier stage", st.Name, need)
			}
		}
		earlier[st.Name] = true
	}
	return nil
}

// Run runs the table's stages in order over s and writes their results into the object's status
// (a condition per stage, Ready, observedGeneration); the transitions' events are queued on p, to
// go out once the pattern's deferred p.Patch succeeded. It returns the requeue the waiting stages
// ask for and the failed stages' errors.
func Run[T Object, S State[T]](ctx context.Context, p *status.Patcher[T], s S, table []Stage[S]) (reconcile.Result, error) {
	obj, rec := s.scope().Object, s.scope().c.Recorder
	conds := obj.GetConditions()
	finished := map[string]bool{}
	var requeue time.Duration
	var errs []error
	var notReady *metav1.Condition
	for _, stage := range table {
		c, res := run(ctx, s, stage, finished, obj.GetGeneration())
		switch {
		case res.outcome == failed && errors.As(res.err, new(*NotOwnedError)):
			requeue = minPositive(requeue, NotOwnedRetry)
		case res.outcome == failed:
			errs = append(errs, fmt.Errorf("stage %s: %w", stage.Name, res.err))
		case res.outcome == waiting:
			requeue = minPositive(requeue, res.requeueAfter)
		}
		event(rec, p, obj, meta.FindStatusCondition(conds, c.Type), c, res, stage.Name)
		meta.SetStatusCondition(&conds, c)
		if c.Status != metav1.ConditionTrue && notReady == nil {
			notReady = &c
		}
	}
	// Ready sums up the stages: True when all are, else the first stage that is not, as flux's
	// summarize does, so `kubectl get` shows the reason that matters.
	ready := metav1.Condition{Type: conditions.Ready, Status: metav1.ConditionTrue, Reason: ReasonReady,
		Message: "all stages are ready", ObservedGeneration: obj.GetGeneration()}
	if notReady != nil {
		ready.Status, ready.Reason, ready.Message = metav1.ConditionFalse, notReady.Reason, notReady.Type+": "+notReady.Message
	}
	meta.SetStatusCondition(&conds, ready)
	obj.SetConditions(conds)
	obj.SetObservedGeneration(obj.GetGeneration())
	return reconcile.Result{RequeueAfter: requeue}, joinErrors(errs)
}

// joinErrors returns a terminal error only if every error is terminal: a retryable failure of
// one stage must still be retried.
func joinErrors(errs []error) error {
	var retry []error
	for _, err := range errs {
		if !errors.Is(err, reconcile.TerminalError(nil)) {
			retry = append(retry, err)
		}
	}
	if len(retry) > 0 {
		return errors.Join(retry...)
	}
	return errors.Join(errs...)
}

// run runs one stage unless a dependency did not finish, and turns its result into a condition.
func run[S any](ctx context.Context, s S, stage Stage[S], finished map[string]bool, generation int64) (metav1.Condition, Result) {
	c := metav1.Condition{Type: stage.Name + "Ready", ObservedGeneration: generation}
	for _, need := range stage.Needs {
		if !finished[need] {
			c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonDependencyNotReady, "waiting for stage "+need
			return c, Result{outcome: waiting}
		}
	}
	res := stage.Run(ctx, s)
	switch res.outcome {
	case done:
		finished[stage.Name] = true
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, ReasonReady, res.msg
	case waiting:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, res.reason, res.msg
	case failed:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, ReasonFailed, res.err.Error()
		if res.msg != "" {
			c.Message = res.msg
		}
		var notOwned *NotOwnedError
		switch {
		case res.reason != "":
			c.Reason = res.reason
		case errors.As(res.err, &notOwned) && notOwned.Stale:
			c.Reason = ReasonWaitingForGC // the owner reference's event brings the next reconcile
		case errors.As(res.err, &notOwned):
			c.Reason = ReasonNotOwned
		case apierrors.ReasonForError(res.err) != metav1.StatusReasonUnknown:
			c.Reason = string(apierrors.ReasonForError(res.err)) // Conflict, Forbidden, Invalid, ...
		}
	}
	if c.Message == "" {
		c.Message = stage.Name + " " + map[bool]string{true: "ready", false: "not ready"}[c.Status == metav1.ConditionTrue]
	}
	return c, res
}

// event queues on p the event of a stage's transition, none for a steady state: Normal when it
// becomes ready, Warning when it fails with a reason it did not fail with before. Waiting — for a
// dependency, a rollout, or the garbage collector — is no failure.
func event[T Object](rec events.EventRecorder, p *status.Patcher[T], obj T, prev *metav1.Condition, c metav1.Condition, res Result, action string) {
	wasReady := prev != nil && prev.Status == metav1.ConditionTrue
	switch {
	case c.Status == metav1.ConditionTrue && !wasReady:
		p.Eventf(rec, obj, corev1.EventTypeNormal, c.Type, action, "%s", c.Message)
	case res.outcome == failed && c.Reason != ReasonWaitingForGC && (prev == nil || prev.Reason != c.Reason):
		p.Eventf(rec, obj, corev1.EventTypeWarning, c.Reason, action, "%s", c.Message)
	}
}

func minPositive(a, b time.Duration) time.Duration {
	if a == 0 || (b > 0 && b < a) {
		return b
	}
	return a
}

// CacheChildren narrows the informers of the given child kinds to the pattern's own children
// (label app.kubernetes.io/managed-by=kpatterns-<pattern>), so memory follows the number of
// custom resources, not every object of those kinds in the cluster.
func CacheChildren(o *cache.Options, pattern string, kinds ...client.Object) {
	children := cache.ByObject{Label: labels.SelectorFromSet(labels.Set{ManagedByLabel: FieldManager(pattern)})}
	if o.ByObject == nil {
		o.ByObject = map[client.Object]cache.ByObject{}
	}
	for _, k := range kinds {
		o.ByObject[k] = children
	}
}
