// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller keeps one external record per ExternalRecord, through a finalizer: the
// finalizer is stored before any external call, the record is created (keyed by the object's UID),
// checked and repaired on a timer (external state has no watch), and deleted — idempotently,
// retried with backoff — before the finalizer is removed.
package controller

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/conditions"
	"github.com/kpatterns/kpatterns/shared/status"
)

// Name is the pattern's name.
const Name = "finalizers"

// Finalizer holds an ExternalRecord until its external record is deleted.
const Finalizer = "patterns.kpatterns.dev/external-record"

// Reasons of the Ready condition and of events.
const (
	ReasonSynced        = "Synced"
	ReasonCreated       = "Created"
	ReasonRepaired      = "Repaired"
	ReasonProviderError = "ProviderError"
	ReasonDeleteFailed  = "DeleteFailed"
)

// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=externalrecords,verbs=list;watch;patch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=externalrecords/status,verbs=patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Options are the pattern's flags of `run`.
type Options struct {
	// RepairInterval is how often a synced record is checked against the external system.
	RepairInterval time.Duration
	Demo           provider.DemoOptions
}

// BindFlags binds the options to run's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.RepairInterval, "repair-interval", time.Minute, "how often a synced record is checked and repaired")
	o.Demo.BindFlags(fs)
}

// Reconciler reconciles ExternalRecords against a Provider.
type Reconciler struct {
	Client         client.Client // cache reads; writes
	Provider       provider.Provider
	Recorder       events.EventRecorder
	RepairInterval time.Duration
	orphans        orphans
}

// orphans are the external records of objects the API server deleted while they still held the
// finalizer, by object name: known from the watch's delete event, whose last state shows the
// finalizer. This happens when a DELETE read the object just before the finalizer was added: the
// API server then deletes it without re-checking finalizers (registry Store.Delete), so the
// record created meanwhile would be left behind.
type orphans struct {
	mu   sync.Mutex
	uids map[types.NamespacedName][]string
}

func (o *orphans) add(key types.NamespacedName, uid string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.uids == nil {
		o.uids = map[types.NamespacedName][]string{}
	}
	o.uids[key] = append(o.uids[key], uid)
}

func (o *orphans) take(key types.NamespacedName) []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	uids := o.uids[key]
	delete(o.uids, key)
	return uids
}

// deletedHoldingFinalizer queues the external record of an object deleted while it still held
// the finalizer (see orphans) and the object's name for a reconcile.
func (r *Reconciler) deletedHoldingFinalizer(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if !controllerutil.ContainsFinalizer(e.Object, Finalizer) {
		return // the usual end: finalize removed the finalizer after deleting the record
	}
	key := client.ObjectKeyFromObject(e.Object)
	r.orphans.add(key, string(e.Object.GetUID()))
	q.Add(reconcile.Request{NamespacedName: key})
}

// deleteOrphans deletes the records of objects deleted while holding the finalizer. The watch's
// delete event authorizes it — never the mere absence of an object from the cache.
func (r *Reconciler) deleteOrphans(ctx context.Context, key types.NamespacedName) error {
	var failed []string
	var errs []error
	for _, uid := range r.orphans.take(key) {
		err := r.Provider.Delete(ctx, uid)
		logf.FromContext(ctx).Info("external delete of an object deleted while holding the finalizer", "id", uid, "err", err)
		if err != nil {
			failed = append(failed, uid)
			errs = append(errs, err)
		}
	}
	for _, uid := range failed {
		r.orphans.add(key, uid) // retried with the returned error's backoff
	}
	return errors.Join(errs...)
}

// Setup registers the controller with provider p. Reconciles follow spec changes and the start
// of a deletion, not the controller's own status writes (each would cost an external call).
func Setup(mgr ctrl.Manager, p provider.Provider, o Options) error {
	r := &Reconciler{Client: mgr.GetClient(), Provider: p, Recorder: mgr.GetEventRecorder(Name), RepairInterval: o.RepairInterval}
	deletionStarted := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	}}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ExternalRecord{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionStarted))).
		Watches(&v1alpha1.ExternalRecord{}, handler.Funcs{DeleteFunc: r.deletedHoldingFinalizer}).
		WithOptions(controller.Options{
			// External calls wait on the network, not on this process: a few run at once.
			MaxConcurrentReconciles: 4,
			// A failed external call is retried per object with exponential backoff (50 ms, doubling,
			// at most 30 s); all retries together are held to 50/s so a failing external system
			// is not stormed. (controller-runtime's default holds them to 10/s.)
			RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](50*time.Millisecond, 30*time.Second),
				&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(50), 100)}),
		}).
		Complete(r)
}

// Reconcile converges one ExternalRecord. An object missing from the cache is never a reason to
// delete anything external: only a deletion held by the finalizer is.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	rec := &v1alpha1.ExternalRecord{}
	if err := r.Client.Get(ctx, req.NamespacedName, rec); apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.deleteOrphans(ctx, req.NamespacedName)
	} else if err != nil {
		return reconcile.Result{}, err
	}
	if rec.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, rec)
	}
	if !controllerutil.ContainsFinalizer(rec, Finalizer) {
		// The finalizer is stored — a live write, optimistic-locked — before any external call:
		// no record can exist that a deletion would not wait for.
		patch := client.MergeFromWithOptions(rec.DeepCopy(), client.MergeFromWithOptimisticLock{})
		controllerutil.AddFinalizer(rec, Finalizer)
		if err := r.Client.Patch(ctx, rec, patch); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		if rec.DeletionTimestamp != nil { // the response is the stored object: deleted meanwhile
			return reconcile.Result{}, nil // the deletion's event brings finalize; nothing was created
		}
	}
	return r.sync(ctx, rec)
}

// sync makes the external record hold spec.value: created the first time, updated after a spec
// change, repaired when it went missing or changed behind the controller's back.
func (r *Reconciler) sync(ctx context.Context, rec *v1alpha1.ExternalRecord) (reconcile.Result, error) {
	patcher := status.NewPatcher(r.Client, rec)
	id := string(rec.UID)
	want := provider.Record{Value: rec.Spec.Value}
	got, found, err := r.Provider.Get(ctx, id)
	if err == nil && (!found || got != want) {
		err = r.Provider.Put(ctx, id, want)
		logf.FromContext(ctx).Info("external put", "id", id, "found", found, "err", err)
		if err == nil {
			r.recordWrite(rec, found, got)
		}
	}
	if err != nil {
		r.setReady(patcher, rec, metav1.ConditionFalse, ReasonProviderError, err.Error())
		return reconcile.Result{}, joinStatus(err, patchStatus(ctx, patcher, rec))
	}
	rec.Status.ExternalID = id
	r.setReady(patcher, rec, metav1.ConditionTrue, ReasonSynced, "the external record holds spec.value")
	if err := patchStatus(ctx, patcher, rec); err != nil {
		return reconcile.Result{}, err
	}
	return reconcile.Result{RequeueAfter: r.RepairInterval}, nil
}

// recordWrite tells what a Put was: the first create, an update after a spec change, or a repair
// of drift (the spec had not changed since the last sync). Its events report an external write
// that happened, so they go out at once, whatever becomes of the status patch.
func (r *Reconciler) recordWrite(rec *v1alpha1.ExternalRecord, found bool, got provider.Record) {
	switch {
	case rec.Status.ExternalID == "":
		r.Recorder.Eventf(rec, nil, corev1.EventTypeNormal, ReasonCreated, "Create", "external record %s created", rec.UID)
	case rec.Status.ObservedGeneration == rec.Generation:
		what := "was missing"
		if found {
			what = fmt.Sprintf("held %q", got.Value)
		}
		now := metav1.Now()
		rec.Status.Repairs++
		rec.Status.LastRepairTime = &now
		r.Recorder.Eventf(rec, nil, corev1.EventTypeWarning, ReasonRepaired, "Repair", "external record %s %s; put back", rec.UID, what)
	}
}

// finalize deletes the external record and then removes the finalizer. A failed delete is
// reported (Ready=False/DeleteFailed, a Warning event on the transition) and retried with the
// controller's backoff; the finalizer stays until the delete succeeded.
func (r *Reconciler) finalize(ctx context.Context, rec *v1alpha1.ExternalRecord) error {
	if !controllerutil.ContainsFinalizer(rec, Finalizer) {
		return nil
	}
	err := r.Provider.Delete(ctx, string(rec.UID))
	logf.FromContext(ctx).Info("external delete", "id", string(rec.UID), "err", err)
	if err != nil {
		patcher := status.NewPatcher(r.Client, rec)
		r.setReady(patcher, rec, metav1.ConditionFalse, ReasonDeleteFailed, "deleting the external record: "+err.Error())
		return joinStatus(err, patchStatus(ctx, patcher, rec))
	}
	patch := client.MergeFromWithOptions(rec.DeepCopy(), client.MergeFromWithOptimisticLock{})
	controllerutil.RemoveFinalizer(rec, Finalizer)
	return client.IgnoreNotFound(r.Client.Patch(ctx, rec, patch))
}

// setReady sets the Ready condition; a change of reason to a failure is announced once, as a
// Warning event, once the status that records it is written (p).
func (r *Reconciler) setReady(p *status.Patcher[*v1alpha1.ExternalRecord], rec *v1alpha1.ExternalRecord, s metav1.ConditionStatus, reason, msg string) {
	prev := meta.FindStatusCondition(rec.Status.Conditions, conditions.Ready)
	if s == metav1.ConditionFalse && (prev == nil || prev.Reason != reason) {
		p.Eventf(r.Recorder, rec, corev1.EventTypeWarning, reason, "Sync", "%s", msg)
	}
	meta.SetStatusCondition(&rec.Status.Conditions, metav1.Condition{Type: conditions.Ready, Status: s,
		Reason: reason, Message: msg, ObservedGeneration: rec.Generation})
	rec.Status.ObservedGeneration = rec.Generation
}

// patchStatus writes the status (status.Patcher); an object deleted meanwhile needs none.
func patchStatus(ctx context.Context, p *status.Patcher[*v1alpha1.ExternalRecord], rec *v1alpha1.ExternalRecord) error {
	return client.IgnoreNotFound(p.Patch(ctx, rec))
}

func joinStatus(err, statusErr error) error {
	if statusErr != nil {
		return fmt.Errorf("%w (and the status: %v)", err, statusErr)
	}
	return err
}

// RegisterDemoMetrics exposes the demo provider's counts on the manager's metrics endpoint, so a
// test or a person can see from outside the process that no record leaked or was created twice:
// the records held now (a gauge) and counters of creates, distinct ids ever created and injected
// failures.
func RegisterDemoMetrics(d *provider.Demo) error {
	const prefix = "finalizers_demo_provider_"
	stat := func(v func(provider.DemoStats) int) func() float64 {
		return func() float64 { return float64(v(d.Stats())) }
	}
	for _, c := range []prometheus.Collector{
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: prefix + "records", Help: "Records the demo provider holds now."},
			stat(func(s provider.DemoStats) int { return s.Records })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: prefix + "creates_total", Help: "Puts that created a record."},
			stat(func(s provider.DemoStats) int { return int(s.Creates) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: prefix + "created_ids_total", Help: "Distinct ids ever created (creates above this: a record created twice)."},
			stat(func(s provider.DemoStats) int { return s.Created })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: prefix + "injected_failures_total", Help: "Calls failed by fault injection."},
			stat(func(s provider.DemoStats) int { return int(s.Failures) })),
	} {
		if err := metrics.Registry.Register(c); err != nil {
			return err
		}
	}
	return nil
}
