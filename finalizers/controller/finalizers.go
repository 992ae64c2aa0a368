// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller keeps a database and a login role in a PostgreSQL server per
// PostgresDatabase, with the lifecycle of Crossplane's managed resources: the finalizer, the
// external name and a create-pending mark are stored before the external create; the resources
// are observed every pollInterval and drift is repaired (one event naming what changed); deletion
// drops them (or, by policy, leaves them) before the finalizer is removed; and a periodic sweep
// drops what the controller created for objects that no longer exist, found by a live read.
package controller

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/conditions"
	"github.com/kpatterns/kpatterns/shared/status"
)

// Name is the pattern's name.
const Name = "finalizers"

// Finalizer holds a PostgresDatabase until its database and role are dropped (or released).
const Finalizer = "patterns.kpatterns.dev/postgres-database"

// Annotations the controller writes (the first two) and reads (the last).
const (
	// ExternalNameAnnotation records the database's name before it is created.
	ExternalNameAnnotation = "patterns.kpatterns.dev/external-name"
	// CreatePendingAnnotation is set before the external create and removed once its result is
	// recorded in the status: found set, the next reconcile observes what the create left.
	CreatePendingAnnotation = "patterns.kpatterns.dev/external-create-pending"
	// PasswordResetPendingAnnotation is set before a new password is written to the credentials
	// Secret of an existing role, and removed once the role has it: found set, the next reconcile
	// sets the Secret's password on the role.
	PasswordResetPendingAnnotation = "patterns.kpatterns.dev/password-reset-pending"
	// PausedAnnotation "true" stops every external call for the object, its deletion's included.
	PausedAnnotation = "patterns.kpatterns.dev/paused"
)

// Reasons of the Ready condition and of events.
const (
	ReasonSynced          = "Synced"
	ReasonCreated         = "Created"        // an external create
	ReasonCreateRecorded  = "CreateRecorded" // the result of an earlier process's create, found and recorded
	ReasonAdopted         = "Adopted"        // what an earlier object of the same name left (a restore, a re-creation), taken over
	ReasonUpdated         = "Updated"
	ReasonRepaired        = "Repaired"
	ReasonDrifted         = "Drifted"         // ObserveOnly: differs from the spec
	ReasonNotFound        = "NotFound"        // ObserveOnly: nothing to observe
	ReasonConflict        = "Conflict"        // a database, role or Secret of that name is not this object's
	ReasonConnectionError = "ConnectionError" // the PostgresServer or its Secret is missing or incomplete
	ReasonProviderError   = "ProviderError"
	ReasonDeleteFailed    = "DeleteFailed"
	ReasonPaused          = "Paused"
)

// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=postgresdatabases,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=postgresdatabases/status,verbs=patch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=postgresservers,verbs=list;watch
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;create
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,namespace=system
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get,resourceNames=kube-system

// Reconciler reconciles PostgresDatabases against a Provider.
type Reconciler struct {
	Client    client.Client // cache reads; writes
	APIReader client.Reader // live reads: Secrets, and the sweep's check that an object is gone
	Provider  provider.Provider
	Namespace string // the operator's: where PostgresServers' Secrets are
	// Installation is written in every tag (Options.Installation, resolved).
	Installation  string
	SweepDryRun   bool
	SweepMaxDrops int
	Recorder      events.EventRecorder
	conns         sync.Map // object UID → serverConn last read: a deletion still reaches the server after its Secret went
	orphans       orphans
}

// serverConn is a PostgresServer's name and the connection its Secret gave.
type serverConn struct {
	name string
	conn provider.Conn
}

// Setup registers the controller and the sweep with provider p. Reconciles follow spec changes,
// the pause annotation and the start of a deletion, not the controller's own writes.
func Setup(mgr ctrl.Manager, p provider.Provider, o Options) error {
	if o.Namespace == "" {
		return errors.New("finalizers: the operator namespace, where PostgresServers' Secrets are, is not set")
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	inst, err := InstallationID(ctx, mgr.GetAPIReader(), o)
	if err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Provider: p, Recorder: mgr.GetEventRecorder(Name), Namespace: o.Namespace,
		Installation: inst, SweepDryRun: o.SweepDryRun, SweepMaxDrops: o.SweepMaxDrops}
	deletionStarted := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetDeletionTimestamp() == nil && e.ObjectNew.GetDeletionTimestamp() != nil
	}}
	pauseChanged := predicate.Funcs{UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[PausedAnnotation] != e.ObjectNew.GetAnnotations()[PausedAnnotation]
	}}
	err = ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.PostgresDatabase{}, builder.WithPredicates(predicate.Or(predicate.GenerationChangedPredicate{}, deletionStarted, pauseChanged))).
		Watches(&v1alpha1.PostgresDatabase{}, handler.Funcs{DeleteFunc: r.deletedHoldingFinalizer}).
		WithOptions(controller.Options{ // workers: run --max-concurrent-reconciles (4 by default)
			// A failed call is retried per object with exponential backoff (50 ms doubling to 5 min);
			// all retries together are held to 50/s so a failing server is not stormed.
			RateLimiter: workqueue.NewTypedMaxOfRateLimiter(
				workqueue.NewTypedItemExponentialFailureRateLimiter[reconcile.Request](50*time.Millisecond, 5*time.Minute),
				&workqueue.TypedBucketRateLimiter[reconcile.Request]{Limiter: rate.NewLimiter(rate.Limit(50), 100)}),
		}).
		Complete(r)
	if err != nil {
		return err
	}
	return mgr.Add(manager.RunnableFunc(func(ctx context.Context) error { // the leader's only
		for {
			if _, err := r.Sweep(ctx); err != nil {
				logf.FromContext(ctx).Error(err, "orphan sweep")
			}
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(o.SweepInterval):
			}
		}
	}))
}

// Reconcile converges one PostgresDatabase: fetch; one deferred status patch; pause; deletion;
// the finalizer first; then sync. An object missing from the cache is never a reason to drop
// anything: only a deletion held by the finalizer, or the sweep's live read, is.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (_ reconcile.Result, retErr error) {
	db := &v1alpha1.PostgresDatabase{}
	if err := r.Client.Get(ctx, req.NamespacedName, db); apierrors.IsNotFound(err) {
		return reconcile.Result{}, r.deleteOrphans(ctx, req.NamespacedName)
	} else if err != nil {
		return reconcile.Result{}, err
	}
	// The status is patched once, deferred, if it changed (an object deleted meanwhile needs
	// none); sync also patches it earlier, where the crash-safe order needs it.
	p := status.NewPatcher(r.Client, db)
	defer p.PatchOnReturn(ctx, db, &retErr)
	if db.Annotations[PausedAnnotation] == "true" {
		r.setReady(p, db, metav1.ConditionFalse, ReasonPaused, "external calls paused by the annotation "+PausedAnnotation)
		return reconcile.Result{}, nil
	}
	if db.DeletionTimestamp != nil {
		return reconcile.Result{}, r.finalize(ctx, p, db)
	}
	if !controllerutil.ContainsFinalizer(db, Finalizer) {
		// The finalizer and the external name are stored before any external call: nothing can
		// exist that a deletion would not wait for.
		err := r.patchMeta(ctx, p, db, func() {
			controllerutil.AddFinalizer(db, Finalizer)
			metav1.SetMetaDataAnnotation(&db.ObjectMeta, ExternalNameAnnotation, db.Spec.Database)
		})
		if err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		if db.DeletionTimestamp != nil { // the response is the stored object: deleted meanwhile
			return reconcile.Result{}, nil // the deletion's event brings finalize; nothing was created
		}
	}
	return r.sync(ctx, p, db)
}

// patchMeta writes what mutate changes in db's metadata — a live write, optimistic-locked — and
// takes the response, the stored object, as p's base; on an error db is left as it was. The
// response replaces db's status too, so a status change must be patched before.
func (r *Reconciler) patchMeta(ctx context.Context, p *status.Patcher[*v1alpha1.PostgresDatabase], db *v1alpha1.PostgresDatabase, mutate func()) error {
	before := db.DeepCopy()
	mutate()
	if err := r.Client.Patch(ctx, db, client.MergeFromWithOptions(before, client.MergeFromWithOptimisticLock{})); err != nil {
		before.DeepCopyInto(db) // not stored: db as it was
		return err
	}
	p.Stored(db)
	return nil
}

// sync observes the database and the role and, by the management policy, creates, repairs or
// only reports them; then it polls again after spec.pollInterval. A failure sets Ready=False
// with its reason and is retried with backoff.
func (r *Reconciler) sync(ctx context.Context, p *status.Patcher[*v1alpha1.PostgresDatabase], db *v1alpha1.PostgresDatabase) (reconcile.Result, error) {
	fail := func(reason string, err error) (reconcile.Result, error) {
		r.setReady(p, db, metav1.ConditionFalse, reason, err.Error())
		return reconcile.Result{}, err
	}
	poll := reconcile.Result{RequeueAfter: pollInterval(db)}
	w, err := r.want(ctx, db, false)
	if err != nil {
		return fail(ReasonConnectionError, err)
	}
	observed, err := r.Provider.Observe(ctx, w)
	if err != nil {
		return fail(ReasonProviderError, err)
	}
	if why := provider.Foreign(w, observed); why != "" {
		r.setReady(p, db, metav1.ConditionFalse, ReasonConflict, why) // a state, not a failure: polled again
		return poll, nil
	}
	drift := provider.Drift(w, observed)
	if policy(db) == v1alpha1.ObserveOnly {
		if provider.Retags(w, observed) { // managed before: its tags now say deletion=Orphan, so no sweep drops them
			if err := r.Provider.Retag(ctx, w, observed); err != nil {
				return fail(ReasonProviderError, err)
			}
		}
		switch {
		case !observed.RoleExists && !observed.DatabaseExists:
			r.setReady(p, db, metav1.ConditionFalse, ReasonNotFound, fmt.Sprintf("neither database %s nor role %s exists", w.Database, w.Role))
		case len(drift) > 0:
			r.setReady(p, db, metav1.ConditionFalse, ReasonDrifted, "differs from the spec (not corrected: ObserveOnly): "+strings.Join(drift, "; "))
		default:
			db.Status.ExternalName = w.Database
			r.setReady(p, db, metav1.ConditionTrue, ReasonSynced, "the database and the role are as the spec says (observed only)")
		}
		return poll, nil
	}
	reset, err := r.credentials(ctx, p, db, &w, observed)
	if err != nil {
		if c := (conflict)(""); errors.As(err, &c) {
			r.setReady(p, db, metav1.ConditionFalse, ReasonConflict, err.Error())
			return poll, nil
		}
		return fail(ReasonProviderError, err)
	}
	creating := db.Status.ExternalName == "" // the result of no create is recorded yet
	if len(drift) > 0 || reset {
		if err := r.applyDrift(ctx, p, db, w, observed, creating, reset, drift); err != nil {
			return fail(ReasonProviderError, err)
		}
	} else if creating { // a create whose result was not recorded (a crash, a conflicting write): found complete
		r.Recorder.Eventf(db, nil, corev1.EventTypeNormal, ReasonCreateRecorded, "Create",
			"database %s and role %s found created by an earlier attempt; recorded, not created again", w.Database, w.Role)
	}
	db.Status.ExternalName = w.Database
	r.setReady(p, db, metav1.ConditionTrue, ReasonSynced, "the database and the role are as the spec says")
	_, pending := db.Annotations[CreatePendingAnnotation]
	if _, resetting := db.Annotations[PasswordResetPendingAnnotation]; pending || resetting {
		// The result is recorded in the status first, then the marks cleared: a crash between the
		// two leaves a mark the next reconcile finds recorded (or sets the password again).
		if err := p.Patch(ctx, db); err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
		err := r.patchMeta(ctx, p, db, func() {
			delete(db.Annotations, CreatePendingAnnotation)
			delete(db.Annotations, PasswordResetPendingAnnotation)
		})
		if err != nil {
			return reconcile.Result{}, client.IgnoreNotFound(err)
		}
	}
	return poll, nil
}

// applyDrift creates or corrects the database and the role. A create is marked pending on the
// object first; a repair of drift (the spec unchanged since the last sync) counts in the status
// and emits one Warning event naming every change.
func (r *Reconciler) applyDrift(ctx context.Context, p *status.Patcher[*v1alpha1.PostgresDatabase], db *v1alpha1.PostgresDatabase, w provider.Want, o provider.Observed, creating, reset bool, drift []string) error {
	if _, pending := db.Annotations[CreatePendingAnnotation]; creating && !pending {
		err := r.patchMeta(ctx, p, db, func() {
			metav1.SetMetaDataAnnotation(&db.ObjectMeta, CreatePendingAnnotation, time.Now().UTC().Format(time.RFC3339))
		})
		if err != nil {
			return err
		}
	}
	if err := r.Provider.Apply(ctx, w, o); err != nil {
		return err
	}
	if reset {
		if err := r.Provider.SetPassword(ctx, w); err != nil {
			return err
		}
		drift = append(drift, "role password: its Secret was missing → a new password set")
	}
	logf.FromContext(ctx).Info("external apply", "database", w.Database, "role", w.Role, "changes", drift)
	change := strings.Join(drift, "; ")
	switch earlier := provider.Adopting(w, o); {
	case earlier != "":
		r.Recorder.Eventf(db, nil, corev1.EventTypeNormal, ReasonAdopted, "Adopt",
			"database %s and role %s, left by an earlier object of this name (uid %s), adopted: %s", w.Database, w.Role, earlier, change)
	case creating:
		r.Recorder.Eventf(db, nil, corev1.EventTypeNormal, ReasonCreated, "Create", "%s", change)
	case db.Status.ObservedGeneration != db.Generation:
		r.Recorder.Eventf(db, nil, corev1.EventTypeNormal, ReasonUpdated, "Update", "%s", change)
	case provider.Unnamed(w, o): // the first reconcile of this version: no repair of anyone's change
		r.Recorder.Eventf(db, nil, corev1.EventTypeNormal, ReasonUpdated, "Upgrade",
			"brought to this version's ownership (an installation in the tags, PUBLIC's privileges revoked): %s", change)
	default:
		now := metav1.Now()
		db.Status.Repairs++
		db.Status.LastRepairTime = &now
		r.Recorder.Eventf(db, nil, corev1.EventTypeWarning, ReasonRepaired, "Repair", "%s", change)
	}
	return nil
}

// finalize drops the database and the role (Full) or releases what carries the object's tag
// (Orphan, and ObserveOnly over what it managed before), then removes the finalizer. A failure is
// reported (Ready=False/DeleteFailed, a Warning event on the transition) and retried with backoff;
// the finalizer stays until it succeeded.
func (r *Reconciler) finalize(ctx context.Context, p *status.Patcher[*v1alpha1.PostgresDatabase], db *v1alpha1.PostgresDatabase) error {
	if !controllerutil.ContainsFinalizer(db, Finalizer) {
		return nil
	}
	if err := r.deleteExternal(ctx, db); err != nil {
		r.setReady(p, db, metav1.ConditionFalse, ReasonDeleteFailed, "deleting: "+err.Error())
		return err
	}
	if err := r.patchMeta(ctx, p, db, func() { controllerutil.RemoveFinalizer(db, Finalizer) }); err != nil {
		return client.IgnoreNotFound(err)
	}
	r.conns.Delete(db.UID)
	return nil
}

// deleteExternal is what db's deletion does on its server, by its management policy: Full drops
// what carries its tag; Orphan and ObserveOnly remove its tags, so that no sweep ever drops what
// they leave (ObserveOnly has tags only where it was Full or Orphan before). An ObserveOnly object
// whose PostgresServer or Secret is gone has nothing to release that can be reached.
func (r *Reconciler) deleteExternal(ctx context.Context, db *v1alpha1.PostgresDatabase) error {
	pol := policy(db)
	w, err := r.want(ctx, db, true)
	switch {
	case err != nil && pol == v1alpha1.ObserveOnly && apierrors.IsNotFound(err):
		err = nil
	case err != nil:
	case pol == v1alpha1.Full:
		err = r.Provider.Delete(ctx, w)
	default:
		err = r.Provider.Release(ctx, w)
	}
	logf.FromContext(ctx).Info("external delete", "database", db.Spec.Database, "policy", pol, "err", err)
	return err
}

func policy(db *v1alpha1.PostgresDatabase) v1alpha1.ManagementPolicy {
	if db.Spec.ManagementPolicy == "" {
		return v1alpha1.Full
	}
	return db.Spec.ManagementPolicy
}

func pollInterval(db *v1alpha1.PostgresDatabase) time.Duration {
	if db.Spec.PollInterval == nil || db.Spec.PollInterval.Duration < 10*time.Second {
		return time.Minute // the API's default and floor hold for stored objects; this is for others
	}
	return db.Spec.PollInterval.Duration
}

// setReady sets the Ready condition; a change of reason to a failure is announced once, as a
// Warning event, once the status that records it is written (p).
func (r *Reconciler) setReady(p *status.Patcher[*v1alpha1.PostgresDatabase], db *v1alpha1.PostgresDatabase, s metav1.ConditionStatus, reason, msg string) {
	prev := meta.FindStatusCondition(db.Status.Conditions, conditions.Ready)
	if s == metav1.ConditionFalse && (prev == nil || prev.Reason != reason) {
		p.Eventf(r.Recorder, db, corev1.EventTypeWarning, reason, "Sync", "%s", msg)
	}
	meta.SetStatusCondition(&db.Status.Conditions, metav1.Condition{Type: conditions.Ready, Status: s,
		Reason: reason, Message: msg, ObservedGeneration: db.Generation})
	db.Status.ObservedGeneration = db.Generation
}
