// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// What objects left without their finalizer running: the orphan sweep over every server, and the
// objects deleted while still holding the finalizer.

import (
	"context"
	"errors"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/event"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/provider"
)

// Sweep drops what the controller created for objects that no longer exist, on every server an
// object references (or referenced, in this process). An object counts as gone only when a live
// read finds it missing or with another UID; a cache miss never decides. Resources released
// (Orphan policy) carry no tag and are never listed.
func (r *Reconciler) Sweep(ctx context.Context) error {
	list := &v1alpha1.PostgresDatabaseList{}
	if err := r.Client.List(ctx, list); err != nil {
		return err
	}
	inCache := map[types.UID]bool{}
	named := map[string]bool{}
	for _, db := range list.Items {
		inCache[db.UID] = true
		named[db.Spec.ServerName] = true
	}
	servers := map[provider.Conn]bool{}
	for name := range named { // each server's Secret read once
		if c, err := r.conn(ctx, name); err == nil {
			servers[c] = true
		}
	}
	r.conns.Range(func(_, c any) bool { servers[c.(provider.Conn)] = true; return true })
	var errs []error
	for c := range servers {
		owned, err := r.Provider.Owned(ctx, c)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		for _, w := range owned {
			if inCache[types.UID(w.Owner.UID)] || w.Owner.Orphan {
				continue
			}
			live := &v1alpha1.PostgresDatabase{}
			err := r.APIReader.Get(ctx, client.ObjectKey{Namespace: w.Owner.Namespace, Name: w.Owner.Name}, live)
			if err == nil && string(live.UID) == w.Owner.UID || err != nil && !apierrors.IsNotFound(err) {
				continue // it exists (the cache is behind), or it cannot be known now
			}
			err = r.Provider.Delete(ctx, w)
			logf.FromContext(ctx).Info("swept: its object no longer exists", "database", w.Database, "role", w.Role,
				"object", w.Owner.Namespace+"/"+w.Owner.Name, "uid", w.Owner.UID, "err", err)
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
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
		w, err := r.want(ctx, db, true)
		if err == nil && policy(db) == v1alpha1.Full {
			err = r.Provider.Delete(ctx, w)
		}
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
