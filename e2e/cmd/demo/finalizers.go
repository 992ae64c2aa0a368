// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	finalizersv1alpha1 "github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	finalizersconfig "github.com/kpatterns/kpatterns/finalizers/config"
	finalizers "github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
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
	server, db := &finalizersv1alpha1.PostgresServer{}, &finalizersv1alpha1.PostgresDatabase{}
	if err := errors.Join(sample(finalizersconfig.FS, "finalizers", "patterns_v1alpha1_postgresserver.yaml", "", server),
		sample(finalizersconfig.FS, "finalizers", "patterns_v1alpha1_postgresdatabase.yaml", ns, db)); err != nil {
		return err
	}
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
	step("A restore: the object is lost without its finalizer running (a cluster rebuilt, a GitOps re-creation) and made again with the same\n" +
		"    spec, so a new UID; the controller adopts what its predecessor left, data and all, instead of dropping it or making an empty one")
	oldUID := db.UID
	fmt.Println("    kubectl patch postgresdatabase demo --type=merge -p '{\"metadata\":{\"finalizers\":null}}'; kubectl delete postgresdatabase demo")
	patch := client.MergeFrom(db.DeepCopy())
	db.Finalizers = nil
	if err := errors.Join(d.c.Patch(d.ctx, db, patch), d.c.Delete(d.ctx, db)); err != nil {
		return err
	}
	if err := gone(d, db); err != nil {
		return err
	}
	fmt.Println("    kubectl apply -f postgresdatabase.yaml   # the same spec")
	restored := &finalizersv1alpha1.PostgresDatabase{}
	if err := sample(finalizersconfig.FS, "finalizers", "patterns_v1alpha1_postgresdatabase.yaml", ns, restored); err != nil {
		return err
	}
	if err := d.c.Create(d.ctx, restored); err != nil {
		return err
	}
	db = restored
	if err := d.waitFor(db.Name, db, func() bool { return ready(db.Status.Conditions) }); err != nil {
		return err
	}
	adopted := ""
	for deadline := time.Now().Add(30 * time.Second); adopted == "" && time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := d.c.List(d.ctx, events, client.InNamespace(ns), client.MatchingFields{"involvedObject.name": db.Name}); err != nil {
			return err
		}
		for _, e := range events.Items { // events are recorded asynchronously
			if e.Reason == finalizers.ReasonAdopted && e.InvolvedObject.UID == db.UID {
				adopted = fmt.Sprintf("    event %s %s: %s", e.Type, e.Reason, e.Message)
			}
		}
	}
	if adopted == "" {
		return fmt.Errorf("no %s event on the restored %s", finalizers.ReasonAdopted, db.Name)
	}
	fmt.Println(adopted)
	fmt.Printf("    (uid %s → %s)\n", oldUID, db.UID)
	if err := onServer(); err != nil {
		return err
	}
	step("Delete it: the finalizer holds the object until the database and the role are dropped")
	fmt.Println("    kubectl delete postgresdatabase demo")
	if err := d.c.Delete(d.ctx, db); err != nil {
		return err
	}
	if err := gone(d, db); err != nil {
		return err
	}
	fmt.Printf("    postgresdatabase.patterns.kpatterns.dev \"demo\" deleted (finalizer %s removed after the drop)\n", finalizers.Finalizer)
	return onServer()
}

// gone waits until db no longer exists.
func gone(d *demo, db *finalizersv1alpha1.PostgresDatabase) error {
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := d.c.Get(d.ctx, client.ObjectKeyFromObject(db), db)
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil || time.Now().After(deadline) {
			return fmt.Errorf("%s not deleted: %v", db.Name, err)
		}
	}
}
