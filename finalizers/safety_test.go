// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// What the controller must never lose or touch: a restored object's database, another
// installation's, what a policy away from Full leaves; a password reset half done; SQL built
// from a user's value; one tenant reaching another; a re-pointed server; the administrator's
// login in the clear. Each test here failed on the code before its fix.

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/postgres"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// lose deletes db as an operator that was uninstalled would leave it: its finalizer removed by
// hand, nothing dropped.
func lose(t *testing.T, db *v1alpha1.PostgresDatabase) {
	t.Helper()
	remove(t, db)
	patch := client.MergeFrom(db.DeepCopy())
	db.Finalizers = nil
	if err := env.Client.Patch(context.Background(), db, patch); err != nil {
		t.Fatal(err)
	}
	gone(t, db)
}

// reconciler is a Reconciler of this installation on mgr's clients, for a test to call at once.
func reconciler(t *testing.T, mgr manager.Manager, p provider.Provider) *controller.Reconciler {
	t.Helper()
	inst, err := controller.InstallationID(testenv.Bounded(t), mgr.GetAPIReader(), controller.Options{Namespace: testenv.Namespace})
	if err != nil {
		t.Fatal(err)
	}
	return &controller.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Provider: p,
		Recorder: mgr.GetEventRecorder("test"), Namespace: testenv.Namespace, Installation: inst}
}

// syncedThenStopped creates dbs under a controller that stops once their creates are recorded.
func syncedThenStopped(t *testing.T, ns string, dbs ...*v1alpha1.PostgresDatabase) {
	t.Helper()
	t.Run("controller running", func(t *testing.T) {
		runWith(t, ns, newProvider(t))
		for _, db := range dbs {
			create(t, db)
			recordedCreate(t, db)
		}
	})
}

// sweeper is a Reconciler (as the ServiceAccount, over every namespace) for a test to call Sweep on.
func sweeper(t *testing.T) *controller.Reconciler {
	return reconciler(t, env.IdleManager(t), newProvider(t))
}

// mine keeps the sweep report's entries of objects in ns.
func mine(entries []string, ns string) []string {
	var m []string
	for _, e := range entries {
		if strings.Contains(e, " of "+ns+"/") {
			m = append(m, e)
		}
	}
	return m
}

// login connects to database as role with password (any characters), or returns why not.
func login(db, role, password string) error {
	cfg, err := pgx.ParseConfig(pg.URL("", db))
	if err != nil {
		return err
	}
	cfg.User, cfg.Password = role, password
	c, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		return err
	}
	return c.Close(context.Background())
}

func secretPassword(t *testing.T, db *v1alpha1.PostgresDatabase) string {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: db.Namespace, Name: controller.CredentialsSecret(db)}, s); err != nil {
		t.Fatal(err)
	}
	return string(s.Data["password"])
}

// newServer creates a PostgresServer for this test, named <ns>-<suffix>, and its Secret.
func newServer(t *testing.T, ns, suffix string, data map[string]string) (*v1alpha1.PostgresServer, *corev1.Secret) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + suffix, Namespace: testenv.Namespace}, StringData: data}
	ps := &v1alpha1.PostgresServer{ObjectMeta: metav1.ObjectMeta{Name: ns + "-" + suffix}, Spec: v1alpha1.PostgresServerSpec{ConnectionSecret: s.Name}}
	create(t, s, ps)
	t.Cleanup(func() {
		_ = env.Client.Delete(context.Background(), ps)
		_ = env.Client.Delete(context.Background(), s)
	})
	return ps, s
}

func loginData(p *postgres.Server, user, password string) map[string]string {
	return map[string]string{"host": p.Host, "port": strconv.Itoa(p.Port), "username": user, "password": password, "sslmode": "disable"}
}

// A restored object — same namespace, name and spec under a new UID, as a backup restore or a
// GitOps tool's re-creation gives it after its finalizer was removed — adopts the database its
// predecessor left, data and all: neither the sweep nor the create loses it.
func TestRestoredObjectAdoptsItsDatabase(t *testing.T) {
	ns := env.Namespace(t)
	db := newDB(ns, "restored")
	syncedThenStopped(t, ns, db)
	superuserIn(t, db.Spec.Database, "CREATE TABLE kept (x int); INSERT INTO kept VALUES (42)") // the user's data
	oid := databaseOID(t, db.Spec.Database)
	lose(t, db)
	restored := newDB(ns, "restored")
	restored.Annotations = map[string]string{controller.ExternalNameAnnotation: db.Spec.Database} // as the backup holds it
	create(t, restored)
	if restored.UID == db.UID {
		t.Fatal("the restored object kept its UID")
	}
	runWith(t, ns, newProvider(t)) // its start sweeps
	env.WaitCondition(t, restored, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	env.WaitForEvent(t, ns, restored.Name, corev1.EventTypeNormal, controller.ReasonAdopted, "")
	if got := databaseOID(t, db.Spec.Database); got != oid {
		t.Fatalf("database oid %d → %d: the restored object got an empty database", oid, got)
	}
	var x int
	withConn(t, db.Spec.Database, func(c *pgx.Conn) error { return c.QueryRow(context.Background(), "SELECT x FROM kept").Scan(&x) })
	if o := state(t, restored); x != 42 || !strings.Contains(o.DatabaseTag, string(restored.UID)) || !strings.Contains(o.RoleTag, string(restored.UID)) {
		t.Errorf("kept = %d, tags %q %q: want the data, tagged for the restored object", x, o.DatabaseTag, o.RoleTag)
	}
}

// A database of another installation on the same server — another cluster's, whose objects this
// API server has never held — is never swept; this installation's own orphan is.
func TestSweepTouchesOnlyItsInstallation(t *testing.T) {
	ns := env.Namespace(t)
	theirs := newDB(ns, "theirs") // another cluster's object: never created here
	tag := fmt.Sprintf("kpatterns-finalizers inst=0d6f2c54-another-cluster/kpatterns-system uid=6a1b5f6e-0000-4000-8000-000000000001 object=%s/%s deletion=Delete", ns, theirs.Name)
	sql(t, fmt.Sprintf("CREATE ROLE %s LOGIN; COMMENT ON ROLE %s IS '%s'", theirs.Spec.Role, theirs.Spec.Role, tag))
	sql(t, fmt.Sprintf("CREATE DATABASE %s OWNER %s", theirs.Spec.Database, theirs.Spec.Role))
	sql(t, fmt.Sprintf("COMMENT ON DATABASE %s IS '%s'", theirs.Spec.Database, tag))
	lost := newDB(ns, "lost")
	syncedThenStopped(t, ns, lost)
	lose(t, lost)
	create(t, newDB(ns, "other")) // a live object on the server: the sweep reaches it through its PostgresServer
	rep, err := sweeper(t).Sweep(testenv.Bounded(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := mine(rep.Dropped, ns); len(got) != 1 || !strings.Contains(got[0], lost.Spec.Database) {
		t.Errorf("dropped %v, want %s alone", got, lost.Spec.Database)
	}
	if o := state(t, theirs); !o.DatabaseExists || !o.RoleExists {
		t.Errorf("another installation's database and role were swept: the server holds %+v", o)
	}
}

// Full, then ObserveOnly or Orphan, then deleted: what the object made stays, and no later sweep
// drops it (its tags no longer say deletion=Delete).
func TestPolicyAwayFromFullKeepsTheData(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	observed, orphaned, lost, other := newDB(ns, "observed"), newDB(ns, "orphaned"), newDB(ns, "lost"), newDB(ns, "other")
	t.Run("controller running", func(t *testing.T) {
		runWith(t, ns, newProvider(t))
		create(t, observed, orphaned, lost)
		for _, db := range []*v1alpha1.PostgresDatabase{observed, orphaned, lost} {
			recordedCreate(t, db)
		}
		for db, pol := range map[*v1alpha1.PostgresDatabase]v1alpha1.ManagementPolicy{observed: v1alpha1.ObserveOnly, orphaned: v1alpha1.Orphan} {
			db.Spec.ManagementPolicy = pol
			if err := env.Client.Update(ctx, db); err != nil {
				t.Fatal(err)
			}
			env.WaitCondition(t, db, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
			remove(t, db)
			gone(t, db)
		}
	})
	lose(t, lost)
	create(t, other)
	rep, err := sweeper(t).Sweep(testenv.Bounded(t))
	if err != nil {
		t.Fatal(err)
	}
	if got := mine(rep.Dropped, ns); len(got) != 1 || !strings.Contains(got[0], lost.Spec.Database) {
		t.Errorf("dropped %v, want %s alone", got, lost.Spec.Database)
	}
	for _, db := range []*v1alpha1.PostgresDatabase{observed, orphaned} {
		if o := state(t, db); !o.DatabaseExists || !o.RoleExists || o.DatabaseTag != "" || o.RoleTag != "" {
			t.Errorf("%s (%s before its deletion): the server holds %+v, want both, untagged", db.Name, db.Spec.ManagementPolicy, o)
		}
	}
}

// The sweep in dry run reports and drops nothing; over its bound it drops none; then it drops
// them, each told as an event on the PostgresServer.
func TestSweepDryRunAndBound(t *testing.T) {
	ns := env.Namespace(t)
	dbs := []*v1alpha1.PostgresDatabase{newDB(ns, "a"), newDB(ns, "b"), newDB(ns, "c")}
	syncedThenStopped(t, ns, dbs...)
	for _, db := range dbs {
		lose(t, db)
	}
	create(t, newDB(ns, "live")) // the server stays referenced
	r := sweeper(t)
	left := func(want bool) {
		t.Helper()
		for _, db := range dbs {
			if o := state(t, db); o.DatabaseExists != want || o.RoleExists != want {
				t.Fatalf("%s: the server holds %+v, want exists=%v", db.Name, o, want)
			}
		}
	}
	r.SweepDryRun = true
	rep, err := r.Sweep(testenv.Bounded(t))
	if n := len(mine(rep.WouldDrop, ns)); err != nil || n != 3 || len(mine(rep.Dropped, ns)) != 0 {
		t.Fatalf("dry run: %+v, %v; want 3 that it would drop", rep, err)
	}
	left(true)
	r.SweepDryRun, r.SweepMaxDrops = false, 2
	rep, err = r.Sweep(testenv.Bounded(t))
	if n := len(mine(rep.Refused, ns)); err == nil || !strings.Contains(err.Error(), "more than --sweep-max-drops=2") || n != 3 {
		t.Fatalf("over the bound: %+v, %v; want 3 refused", rep, err)
	}
	left(true)
	r.SweepMaxDrops = 0
	dropped := sweptMetric(t, "dropped")
	if rep, err = r.Sweep(testenv.Bounded(t)); err != nil || len(mine(rep.Dropped, ns)) != 3 {
		t.Fatalf("unbounded: %+v, %v; want 3 dropped", rep, err)
	}
	left(false)
	if got := sweptMetric(t, "dropped") - dropped; got < 3 {
		t.Errorf("finalizers_sweep_orphans_total{action=dropped} rose by %v, want at least 3", got)
	}
	for _, reason := range []string{"SweepDryRun", "SweepRefused"} { // a cluster-scoped object's events are in default
		testenv.Eventually(t, "an event "+reason+" on the PostgresServer naming "+dbs[0].Spec.Database, func() error {
			for _, ev := range env.Events(t, metav1.NamespaceDefault, server) {
				if ev.Reason == reason && strings.Contains(ev.Message, dbs[0].Spec.Database+"/") {
					return nil
				}
			}
			return fmt.Errorf("none")
		})
	}
}

// sweptMetric is finalizers_sweep_orphans_total{action} in this process.
func sweptMetric(t *testing.T, action string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != "finalizers_sweep_orphans_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "action" && l.GetValue() == action {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A password reset that fails after its Secret was written is done again: the role ends with the
// Secret's password, not Ready over a login that does not work.
func TestLostPasswordResetIsRedone(t *testing.T) {
	ns := env.Namespace(t)
	p := newCounting(t, ns)
	runWith(t, ns, p)
	db := newDB(ns, "reset")
	create(t, db)
	recordedCreate(t, db)
	p.failNext("password", 1)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.CredentialsSecret(db)}}
	remove(t, s)
	testenv.Eventually(t, "the role logs in with the new Secret's password", func() error {
		s := &corev1.Secret{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: controller.CredentialsSecret(db)}, s); err != nil {
			return err
		}
		return login(db.Spec.Database, db.Spec.Role, string(s.Data["password"]))
	})
	if p.failures.Load() != 1 {
		t.Errorf("%d failures injected, want the one of the reset", p.failures.Load())
	}
	recordedCreate(t, db) // and the reset's mark is gone
	if _, ok := db.Annotations[controller.PasswordResetPendingAnnotation]; ok {
		t.Errorf("annotations %v: the reset's mark stayed", db.Annotations)
	}
}

// A password from a user's own credentials Secret never becomes SQL: on a server where the
// administrator's sessions read backslashes as escapes (standard_conforming_strings=off), a
// crafted one creates no role, and still logs in.
func TestPasswordsNeverReachSQL(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	admin, pwned := prefix(ns)+"legacy_admin", prefix(ns)+"pwned"
	sql(t, fmt.Sprintf("CREATE ROLE %s SUPERUSER LOGIN PASSWORD 'legacy'; ALTER ROLE %s SET standard_conforming_strings = off", admin, admin))
	legacy, _ := newServer(t, ns, "legacy", loginData(pg, admin, "legacy"))
	runWith(t, ns, newProvider(t))
	db := newDB(ns, "crafted")
	db.Spec.ServerName = legacy.Name
	db.Annotations = map[string]string{controller.PausedAnnotation: "true"}
	create(t, db)
	crafted := `x\'; CREATE ROLE ` + pwned + ` SUPERUSER; --`
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: controller.CredentialsSecret(db)},
		StringData: map[string]string{"password": crafted, "host": pg.Host, "port": strconv.Itoa(pg.Port)}}
	if err := controllerutil.SetControllerReference(db, s, env.Client.Scheme()); err != nil {
		t.Fatal(err)
	}
	create(t, s)
	patch := client.MergeFrom(db.DeepCopy())
	delete(db.Annotations, controller.PausedAnnotation)
	if err := env.Client.Patch(ctx, db, patch); err != nil {
		t.Fatal(err)
	}
	env.WaitCondition(t, db, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	var n int
	superuser(t, func(c *pgx.Conn) error {
		return c.QueryRow(ctx, "SELECT count(*) FROM pg_roles WHERE rolname = $1", pwned).Scan(&n)
	})
	if n != 0 {
		t.Fatalf("the password's text ran as SQL: role %s exists", pwned)
	}
	if err := login(db.Spec.Database, db.Spec.Role, crafted); err != nil {
		t.Errorf("logging in with the Secret's password: %v", err)
	}
}

// One tenant's role can neither connect to another's database nor, by granting it a privilege,
// keep the other's role from being dropped.
func TestTenantsAreIsolated(t *testing.T) {
	ns := env.Namespace(t)
	runWith(t, ns, newProvider(t))
	a, b := newDB(ns, "a"), newDB(ns, "b")
	create(t, a, b)
	recordedCreate(t, a)
	recordedCreate(t, b)
	if err := login(b.Spec.Database, a.Spec.Role, secretPassword(t, a)); err == nil || !strings.Contains(err.Error(), "permission denied for database") {
		t.Errorf("a's role connecting to b's database: %v, want permission denied", err)
	}
	cfg, err := pgx.ParseConfig(pg.URL("", a.Spec.Database))
	if err != nil {
		t.Fatal(err)
	}
	cfg.User, cfg.Password = a.Spec.Role, secretPassword(t, a)
	c, err := pgx.ConnectConfig(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.Exec(context.Background(), fmt.Sprintf("GRANT CONNECT, TEMPORARY ON DATABASE %s TO %s", a.Spec.Database, b.Spec.Role))
	_ = c.Close(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	remove(t, b)
	gone(t, b)
	if o := state(t, b); o.RoleExists || o.DatabaseExists {
		t.Errorf("after b's deletion the server holds %+v", o)
	}
}

// A PostgresServer re-pointed at another host is a Conflict for the objects made on the old one:
// no empty database on the new host behind a Secret that names the old.
func TestRepointedServerIsAConflict(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	pg2, err := postgres.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pg2.Stop(); _ = pg2.Remove() })
	moving, s := newServer(t, ns, "moving", loginData(pg, postgres.User, pg.Password))
	runWith(t, ns, newProvider(t))
	db := newDB(ns, "moved")
	db.Spec.ServerName = moving.Name
	create(t, db)
	recordedCreate(t, db)
	patch := client.MergeFrom(s.DeepCopy())
	s.StringData = loginData(pg2, postgres.User, pg2.Password)
	if err := env.Client.Patch(ctx, s, patch); err != nil {
		t.Fatal(err)
	}
	c := env.WaitCondition(t, db, "Ready", metav1.ConditionFalse, controller.ReasonConflict)
	if !strings.Contains(c.Message, "now reaches 127.0.0.1:"+strconv.Itoa(pg2.Port)) {
		t.Errorf("message %q", c.Message)
	}
	c2, err := pgx.Connect(ctx, pg2.URL("", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c2.Close(ctx) }()
	var n int
	if err := c2.QueryRow(ctx, "SELECT count(*) FROM pg_database WHERE datname = $1", db.Spec.Database).Scan(&n); err != nil || n != 0 {
		t.Errorf("the new host holds %d databases %s (%v), want none", n, db.Spec.Database, err)
	}
}

// A connection Secret that names no sslmode gets a verified TLS connection, not a plain one: this
// server has no TLS, so nothing is created and the reason says so.
func TestAdminLoginUsesTLSByDefault(t *testing.T) {
	ns := env.Namespace(t)
	data := loginData(pg, postgres.User, pg.Password)
	delete(data, "sslmode")
	plain, _ := newServer(t, ns, "plain", data)
	runWith(t, ns, newProvider(t))
	db := newDB(ns, "tls")
	db.Spec.ServerName = plain.Name
	create(t, db)
	c := env.WaitCondition(t, db, "Ready", metav1.ConditionFalse, controller.ReasonProviderError)
	if !strings.Contains(c.Message, "TLS") {
		t.Errorf("message %q, want the refused TLS named", c.Message)
	}
	if o := state(t, db); o.DatabaseExists || o.RoleExists {
		t.Errorf("the server holds %+v, want nothing", o)
	}
}

// superuserIn runs stmt as the superuser in database db.
func superuserIn(t *testing.T, db, stmt string) {
	t.Helper()
	withConn(t, db, func(c *pgx.Conn) error { _, err := c.Exec(context.Background(), stmt); return err })
}

func withConn(t *testing.T, db string, f func(*pgx.Conn) error) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), pg.URL("", db))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	if err := f(c); err != nil {
		t.Fatal(err)
	}
}

// An object synced by a version before installations were named — its tags without one, PUBLIC
// still granted its database — is brought to this version on its next reconcile: tags rewritten,
// PUBLIC revoked, told as a Normal Updated event, not counted as a repair of someone's change.
func TestUpgradeRetagsWithoutARepair(t *testing.T) {
	ns := env.Namespace(t)
	db := newDB(ns, "older")
	syncedThenStopped(t, ns, db)
	legacy := fmt.Sprintf("kpatterns-finalizers uid=%s object=%s/%s deletion=Delete", db.UID, ns, db.Name)
	sql(t, fmt.Sprintf("COMMENT ON ROLE %s IS '%s'; COMMENT ON DATABASE %s IS '%s'; GRANT CONNECT, TEMPORARY ON DATABASE %s TO PUBLIC",
		db.Spec.Role, legacy, db.Spec.Database, legacy, db.Spec.Database))
	runWith(t, ns, newProvider(t))
	env.WaitForEvent(t, ns, db.Name, corev1.EventTypeNormal, controller.ReasonUpdated, "")
	testenv.Eventually(t, "brought to this version", func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(db), db); err != nil {
			return err
		}
		if o := state(t, db); !strings.Contains(o.DatabaseTag, " inst=") || !strings.Contains(o.RoleTag, " inst=") || o.PublicAccess {
			return fmt.Errorf("server %+v", o)
		}
		return nil
	})
	if db.Status.Repairs != 0 {
		t.Errorf("repairs = %d, want 0: an upgrade is no repair", db.Status.Repairs)
	}
}
