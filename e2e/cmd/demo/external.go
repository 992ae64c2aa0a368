// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The scenes whose patterns reach past the API server: a real PostgreSQL, the lifetime hooks.

import (
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	finalizersv1alpha1 "github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	finalizers "github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	lifespanv1alpha1 "github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	lifespan "github.com/kpatterns/kpatterns/lifespan/controller"
	"github.com/kpatterns/kpatterns/shared/postgres"
)

// finalizers shows a database and a role in a real PostgreSQL (the OS's, started for the part):
// created under the finalizer, drift repaired with an event naming the change, dropped on delete.
func (d *demo) finalizers() error {
	step("Start a PostgreSQL server on this machine (Debian's postgresql package; installed when missing), in a temporary directory")
	pg, err := postgres.Start()
	if err != nil {
		return err
	}
	defer func() { d.stop("finalizers"); _ = pg.Remove() }() // the part's server goes with it
	fmt.Printf("    postgres listening on %s:%d (log %s)\n", pg.Host, pg.Port, pg.Log())
	if err := d.start("finalizers"); err != nil {
		return err
	}
	step("PostgresServer demo (cluster-scoped, an administrator's) names Secret pg-admin in the operator namespace, which says how to reach it;\n" +
		"    PostgresDatabase demo, on that server, asks for database demo_app, owned by role demo_app, connection limit 5")
	admin := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pg-admin", Namespace: ns}, StringData: map[string]string{
		"host": pg.Host, "port": strconv.Itoa(pg.Port), "username": postgres.User, "password": pg.Password, "sslmode": "disable"}}
	server := &finalizersv1alpha1.PostgresServer{ObjectMeta: metav1.ObjectMeta{Name: "demo"}, Spec: finalizersv1alpha1.PostgresServerSpec{ConnectionSecret: admin.Name}}
	db := &finalizersv1alpha1.PostgresDatabase{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec: finalizersv1alpha1.PostgresDatabaseSpec{ServerName: server.Name, Database: "demo_app", Role: "demo_app",
			ConnectionLimit: ptr.To[int32](5), PollInterval: &metav1.Duration{Duration: 10 * time.Second}}}
	for _, o := range []client.Object{admin, server, db} {
		if err := d.recreate(o, o.DeepCopyObject().(client.Object)); err != nil {
			return err
		}
	}
	if err := d.waitFor(db.Name, db, func() bool { return ready(db.Status.Conditions) }); err != nil {
		return err
	}
	conn := provider.Conn{Host: pg.Host, Port: strconv.Itoa(pg.Port), Username: postgres.User, Password: pg.Password, SSLMode: "disable"}
	p := provider.NewPostgres()
	defer p.Close()
	want := provider.Want{Conn: conn, Database: db.Spec.Database, Role: db.Spec.Role}
	onServer := func() error {
		o, err := p.Observe(d.ctx, want)
		fmt.Printf("    in PostgreSQL: database exists=%v owner=%s comment=%q; role exists=%v connection limit=%d\n",
			o.DatabaseExists, o.DatabaseOwner, o.DatabaseTag, o.RoleExists, o.ConnectionLimit)
		return err
	}
	show(db.Name, map[string]any{"finalizers": db.Finalizers, "status.externalName": db.Status.ExternalName})
	if err := onServer(); err != nil {
		return err
	}
	fmt.Printf("    (its role's login is in Secret %s, owned by the object)\n", finalizers.CredentialsSecret(db))
	step("Someone changes the role behind the controller's back; the next poll (pollInterval 10s) puts it back, with an event")
	fmt.Println("    psql: ALTER ROLE demo_app CONNECTION LIMIT 50")
	pc, err := pgx.Connect(d.ctx, pg.URL("", "postgres"))
	if err != nil {
		return err
	}
	_, err = pc.Exec(d.ctx, "ALTER ROLE demo_app CONNECTION LIMIT 50")
	_ = pc.Close(d.ctx)
	if err != nil {
		return err
	}
	if err := d.waitFor(db.Name, db, func() bool { return db.Status.Repairs > 0 }); err != nil {
		return err
	}
	events := &corev1.EventList{}
	if err := d.c.List(d.ctx, events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": db.Name}); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.Reason == finalizers.ReasonRepaired {
			fmt.Printf("    event %s %s: %s\n", e.Type, e.Reason, e.Message)
		}
	}
	if err := onServer(); err != nil {
		return err
	}
	step("Delete it: the finalizer holds the object until the database and the role are dropped")
	fmt.Println("    kubectl delete postgresdatabase demo")
	if err := d.c.Delete(d.ctx, db); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := d.c.Get(d.ctx, client.ObjectKeyFromObject(db), db)
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			return fmt.Errorf("demo not deleted: %v", err)
		}
	}
	fmt.Printf("    postgresdatabase.patterns.kpatterns.dev \"demo\" deleted (finalizer %s removed after the drop)\n", finalizers.Finalizer)
	return onServer()
}

// lifespan shows the lifetime hooks: a Heartbeat term per leader, a restart (SIGTERM, a new
// process) ending one term and starting the next, and Observed events not repeated across it.
func (d *demo) lifespan() error {
	hb := &lifespanv1alpha1.Heartbeat{}
	beating := func(since time.Time) func() bool { // a term of a process started after since
		return func() bool { t := hb.Current(); return t != nil && t.Acquired.After(since) && t.Beats > 1 }
	}
	since := time.Now()
	if err := d.start("lifespan"); err != nil {
		return err
	}
	if err := d.waitFor(lifespan.Name, hb, beating(since)); err != nil {
		return err
	}
	step("Label ConfigMap demo-observed patterns.kpatterns.dev/observe=true: the leader emits one Observed event for its version")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-observed", Namespace: ns, Labels: map[string]string{lifespan.ObserveLabel: "true"}},
		Data: map[string]string{"at": time.Now().UTC().Format(time.RFC3339)}}
	if err := d.recreate(cm, cm.DeepCopy()); err != nil {
		return err
	}
	ev := &eventsv1.Event{}
	if err := d.waitFor(lifespan.ObservedEventName(cm), ev, func() bool { return true }); err != nil {
		return err
	}
	fmt.Printf("    kubectl events: %s %s %q (by %s)\n", ev.Type, ev.Reason, ev.Note, ev.ReportingInstance)
	step("Restart lifespan (SIGTERM, then a new process): its leader exit hook ends the term, the new leader starts one")
	since = time.Now()
	if err := d.start("lifespan"); err != nil {
		return err
	}
	if err := d.waitFor(lifespan.Name, hb, beating(since)); err != nil {
		return err
	}
	fmt.Println("    kubectl get heartbeat lifespan -o jsonpath='{.status.terms}'   # the latest terms")
	ts := hb.Status.Terms
	for _, t := range ts[max(0, len(ts)-2):] {
		stopped := "-"
		if t.Stopped != nil {
			stopped = t.Stopped.Format("15:04:05.000")
		}
		fmt.Printf("    holder %s  acquired %s  last beat %s  beats %d  stopped %s\n", t.Holder,
			t.Acquired.Format("15:04:05.000"), t.LastBeat.Format("15:04:05.000"), t.Beats, stopped)
	}
	list := &eventsv1.EventList{}
	if err := d.c.List(d.ctx, list, client.InNamespace(ns), client.MatchingLabels{lifespan.EmittedByLabel: lifespan.Name}); err != nil {
		return err
	}
	observed := 0
	for _, e := range list.Items {
		if e.Reason == string(lifespan.Observed) && e.Regarding.UID == cm.UID {
			observed++
		}
	}
	fmt.Printf("    Observed events for demo-observed after the restart: %d (the new leader found its version already observed)\n", observed)
	return nil
}
