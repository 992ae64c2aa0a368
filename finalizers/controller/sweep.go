// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// What objects left without their finalizer running: the orphan sweep over every server, and the
// objects deleted while still holding the finalizer.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/provider"
)

// SweepReport is what one sweep found: each orphan as "<database>/<role> of <namespace>/<name> (uid …)".
type SweepReport struct {
	Dropped   []string // dropped
	WouldDrop []string // dry run: reported, not dropped
	Refused   []string // more than SweepMaxDrops in the pass: none dropped
	Failed    []string // the drop failed (retried at the next pass)
}

// sweepOrphans counts the sweep's orphans by what became of them, the metric of a destructive
// loop: dropped, would_drop (dry run), refused (over the bound), failed.
var sweepOrphans = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "finalizers_sweep_orphans_total",
	Help: "Databases and roles the orphan sweep found of objects that no longer exist, by what it did: dropped, would_drop (dry run), refused (more than --sweep-max-drops in one pass), failed.",
}, []string{"action"})

func init() { metrics.Registry.MustRegister(sweepOrphans) }

// Sweep drops what this installation created for objects that no longer exist, on every server
// an object references (or referenced, in this process). Only what is provably its own: a tag of
// this installation (never another's, nor one of no installation), deletion=Delete (Orphan and
// ObserveOnly write Orphan), and an object that a live read finds missing. A cache miss never
// decides, and an object of that namespace and name under another UID adopts what its
// predecessor left (a restore, a re-creation) rather than losing it. A pass that finds more
// orphans than SweepMaxDrops drops none; with SweepDryRun it drops nothing. Each orphan is logged,
// counted (finalizers_sweep_orphans_total) and told in one event per outcome on its PostgresServer.
func (r *Reconciler) Sweep(ctx context.Context) (SweepReport, error) {
	var rep SweepReport
	list := &v1alpha1.PostgresDatabaseList{}
	if err := r.Client.List(ctx, list); err != nil {
		return rep, err
	}
	inCache := map[types.UID]bool{}
	named := map[string]bool{}
	for _, db := range list.Items {
		inCache[db.UID] = true
		named[db.Spec.ServerName] = true
	}
	servers := map[provider.Conn]string{} // → the PostgresServer's name
	r.conns.Range(func(_, c any) bool { servers[c.(serverConn).conn] = c.(serverConn).name; return true })
	for name := range named { // each server's Secret read once
		if c, err := r.conn(ctx, name); err == nil {
			servers[c] = name
		}
	}
	type orphan struct {
		w      provider.Want
		server string
	}
	var orphans []orphan
	var errs []error
	for c, server := range servers {
		owned, err := r.Provider.Owned(ctx, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range owned {
			if w.Owner.Installation != r.Installation || inCache[types.UID(w.Owner.UID)] || w.Owner.Orphan {
				continue // another installation's (or one written before installations were named), live, or released
			}
			live := &v1alpha1.PostgresDatabase{}
			err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: w.Owner.Namespace, Name: w.Owner.Name}, live)
			if err == nil || !apierrors.IsNotFound(err) {
				continue // it exists (the cache is behind, or a new object of that name adopts it), or it cannot be known now
			}
			orphans = append(orphans, orphan{w, server})
		}
	}
	log := logf.FromContext(ctx)
	refuse := r.SweepMaxDrops > 0 && len(orphans) > r.SweepMaxDrops
	if refuse {
		errs = append(errs, fmt.Errorf("the sweep found %d orphans, more than --sweep-max-drops=%d: dropped none (a wrong cluster or server, or a mass deletion? Check, then raise the bound)",
			len(orphans), r.SweepMaxDrops))
	}
	told := map[string]map[string][]string{} // server → event reason → orphans
	for _, o := range orphans {
		w := o.w
		what := fmt.Sprintf("%s/%s of %s/%s (uid %s)", w.Database, w.Role, w.Owner.Namespace, w.Owner.Name, w.Owner.UID)
		var action, reason string
		var err error
		switch {
		case refuse:
			action, reason, rep.Refused = "refused", "SweepRefused", append(rep.Refused, what)
		case r.SweepDryRun:
			action, reason, rep.WouldDrop = "would_drop", "SweepDryRun", append(rep.WouldDrop, what)
		default:
			if err = r.Provider.Delete(ctx, w); err != nil {
				action, reason, rep.Failed = "failed", "SweepFailed", append(rep.Failed, what)
				errs = append(errs, err)
			} else {
				action, reason, rep.Dropped = "dropped", "Swept", append(rep.Dropped, what)
			}
		}
		sweepOrphans.WithLabelValues(action).Inc()
		log.Info("sweep: its object no longer exists", "orphan", what, "action", action, "err", err)
		if told[o.server] == nil {
			told[o.server] = map[string][]string{}
		}
		told[o.server][reason] = append(told[o.server][reason], what)
	}
	for server, byReason := range told { // one event per server and outcome of the pass
		ps := &v1alpha1.PostgresServer{}
		if r.Recorder == nil || r.Client.Get(ctx, client.ObjectKey{Name: server}, ps) != nil {
			continue
		}
		for reason, whats := range byReason {
			kind, note := corev1.EventTypeWarning, map[string]string{"Swept": "dropped", "SweepDryRun": "would drop (dry run)",
				"SweepRefused": "not dropped: more orphans than --sweep-max-drops", "SweepFailed": "dropping failed"}[reason]
			if reason == "Swept" || reason == "SweepDryRun" {
				kind = corev1.EventTypeNormal
			}
			r.Recorder.Eventf(ps, nil, kind, reason, "Sweep", "%s, of objects that no longer exist: %s", note, strings.Join(whats, ", "))
		}
	}
	return rep, errors.Join(errs...)
}

// orphans are objects the API server deleted while they still held the finalizer, by name: known
// from the watch's delete event, whose last state shows the finalizer. This happens when a DELETE
// read the object just before the finalizer was added: the API server then deletes it without
// re-checking finalizers (registry Store.Delete), so what was created meanwhile would be left
// behind until the next sweep. Deleting it on that event closes the gap at once.
type orphans struct {
	mu   sync.Mutex
	objs map[types.NamespacedName][]*v1alpha1.PostgresDatabase
}

func (o *orphans) add(key types.NamespacedName, db *v1alpha1.PostgresDatabase) {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.objs == nil {
		o.objs = map[types.NamespacedName][]*v1alpha1.PostgresDatabase{}
	}
	o.objs[key] = append(o.objs[key], db)
}

func (o *orphans) take(key types.NamespacedName) []*v1alpha1.PostgresDatabase {
	o.mu.Lock()
	defer o.mu.Unlock()
	objs := o.objs[key]
	delete(o.objs, key)
	return objs
}

// deletedHoldingFinalizer queues an object deleted while it still held the finalizer (see
// orphans) for a reconcile of its name.
func (r *Reconciler) deletedHoldingFinalizer(_ context.Context, e event.TypedDeleteEvent[client.Object], q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	db, ok := e.Object.(*v1alpha1.PostgresDatabase)
	if !ok || !controllerutil.ContainsFinalizer(db, Finalizer) {
		return // the usual end: finalize removed the finalizer after dropping the database
	}
	key := client.ObjectKeyFromObject(db)
	r.orphans.add(key, db)
	q.Add(reconcile.Request{NamespacedName: key})
}

// deleteOrphans finalizes the objects deleted while holding the finalizer. The watch's delete
// event authorizes it — never the mere absence of an object from the cache.
func (r *Reconciler) deleteOrphans(ctx context.Context, key types.NamespacedName) error {
	var errs []error
	for _, db := range r.orphans.take(key) {
		err := r.deleteExternal(ctx, db)
		if err == nil {
			r.conns.Delete(db.UID)
		}
		logf.FromContext(ctx).Info("external delete of an object deleted while holding the finalizer", "database", db.Spec.Database, "err", err)
		if err != nil {
			r.orphans.add(key, db) // retried with the returned error's backoff
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
