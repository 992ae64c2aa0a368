// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests: a real kube-apiserver and etcd (envtest) with the generated CRD and RBAC
// installed, a real PostgreSQL server (the OS's, started for the package in a temporary directory),
// and the controller running as its ServiceAccount. Each test owns its namespace and names its
// databases after it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/config"
	"github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/postgres"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var (
	env   *testenv.Env
	pg    *postgres.Server
	admin = provider.NewPostgres() // the tests' own reads of the server, as its superuser
)

func TestMain(m *testing.M) {
	if os.Getenv(childEnv) != "" {
		runChild() // never returns
	}
	var err error
	if pg, err = postgres.Start(); err != nil {
		fmt.Fprintln(os.Stderr, "postgres:", err)
		os.Exit(1)
	}
	p := testenv.Pattern{Pattern: config.Pattern, AddToScheme: v1alpha1.AddToScheme, NewManager: newManager, Setup: func(mgr manager.Manager) error {
		return controller.Setup(mgr, provider.NewPostgres(), controller.Options{SweepInterval: time.Minute, Namespace: testenv.Namespace})
	}}
	testenv.Main(m, p, func(e *testenv.Env) {
		env = e
		e.AtExit(func() { admin.Close(); _ = pg.Remove() })
		if err := createServer(); err != nil {
			fmt.Fprintln(os.Stderr, "PostgresServer:", err)
			os.Exit(1)
		}
	})
}

// prefix turns a test namespace into a prefix of database and role names.
func prefix(ns string) string { return strings.ReplaceAll(ns, "-", "_") + "_" }

// server is the PostgresServer every test's objects name (createServer makes it).
const server = "pg"

// newDB is a PostgresDatabase named name in ns, for database and role <ns>_<name>, on server.
func newDB(ns, name string) *v1alpha1.PostgresDatabase {
	n := prefix(ns) + name
	return &v1alpha1.PostgresDatabase{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.PostgresDatabaseSpec{ServerName: server, Database: n, Role: n + "_owner", ConnectionLimit: ptr.To[int32](5),
			PollInterval: &metav1.Duration{Duration: 10 * time.Second}}}
}

// createServer creates the PostgresServer server and its Secret pg-admin in the operator
// namespace: the server's superuser.
func createServer() error {
	ctx := context.Background()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pg-admin", Namespace: testenv.Namespace}, StringData: map[string]string{
		"host": pg.Host, "port": strconv.Itoa(pg.Port), "username": postgres.User, "password": pg.Password, "sslmode": "disable"}}
	return errors.Join(env.Client.Create(ctx, s), env.Client.Create(ctx, &v1alpha1.PostgresServer{
		ObjectMeta: metav1.ObjectMeta{Name: server}, Spec: v1alpha1.PostgresServerSpec{ConnectionSecret: s.Name}}))
}

func adminConn() provider.Conn {
	return provider.Conn{Host: pg.Host, Port: strconv.Itoa(pg.Port), Username: postgres.User, Password: pg.Password, SSLMode: "disable"}
}

// superuser runs f on a new connection to the server as its superuser.
func superuser(t *testing.T, f func(*pgx.Conn) error) {
	t.Helper()
	c, err := pgx.Connect(context.Background(), pg.URL("", "postgres"))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close(context.Background()) }()
	if err := f(c); err != nil {
		t.Fatal(err)
	}
}

// sql runs statements on the server as its superuser: the tests' hand behind the controller's back.
func sql(t *testing.T, stmt string, args ...any) {
	t.Helper()
	superuser(t, func(c *pgx.Conn) error {
		_, err := c.Exec(context.Background(), stmt, args...)
		return err
	})
}

// state is what the server holds under db's names (the provider's own observation, read as admin).
func state(t *testing.T, db *v1alpha1.PostgresDatabase) provider.Observed {
	t.Helper()
	o, err := admin.Observe(context.Background(), provider.Want{Conn: adminConn(), Database: db.Spec.Database, Role: db.Spec.Role})
	if err != nil {
		t.Fatal(err)
	}
	return o
}

// owned is what carries a tag of the pattern on the server, for objects in namespace ns.
func owned(t *testing.T, ns string) []string {
	t.Helper()
	ws, err := admin.Owned(context.Background(), adminConn())
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, w := range ws {
		if w.Owner.Namespace == ns {
			names = append(names, w.Database+"/"+w.Role)
		}
	}
	return names
}

// newProvider is a Postgres provider whose connections close when the test ends.
func newProvider(t *testing.T) *provider.Postgres {
	p := provider.NewPostgres()
	t.Cleanup(p.Close)
	return p
}

// runWith starts the controller (as its ServiceAccount) against p, watching ns only, until the
// (sub)test ends.
func runWith(t *testing.T, ns string, p provider.Provider) manager.Manager {
	t.Helper()
	return env.ManagerWith(t, func(mgr manager.Manager) error {
		return controller.Setup(mgr, p, controller.Options{SweepInterval: time.Hour, Namespace: testenv.Namespace})
	}, ns)
}

// recordedCreate waits until db's create is recorded: status.externalName set and the
// create-pending mark removed (the last write of a create), the external name kept.
func recordedCreate(t *testing.T, db *v1alpha1.PostgresDatabase) {
	t.Helper()
	testenv.Eventually(t, "the create recorded", func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(db), db); err != nil {
			return err
		}
		if db.Status.ExternalName != db.Spec.Database || db.Annotations[controller.ExternalNameAnnotation] != db.Spec.Database || db.Annotations[controller.CreatePendingAnnotation] != "" {
			return fmt.Errorf("status %+v, annotations %v", db.Status, db.Annotations)
		}
		return nil
	})
}

func create(t *testing.T, objs ...client.Object) {
	t.Helper()
	for _, o := range objs {
		if err := env.Client.Create(context.Background(), o); err != nil {
			t.Fatal(err)
		}
	}
}

func remove(t *testing.T, obj client.Object) {
	t.Helper()
	if err := env.Client.Delete(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

func gone(t *testing.T, obj client.Object) {
	t.Helper()
	testenv.Eventually(t, obj.GetName()+" deleted", func() error {
		err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj)
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("still there (finalizers %v): %v", obj.GetFinalizers(), err)
	})
}

// counting is the provider as a test sees it: every call counted, each external write, and — before
// every call — a live read of the object that records a violation if its finalizer is not stored.
// A share of calls can be made to fail before reaching the server.
type counting struct {
	provider.Provider
	ns     string
	mu     sync.Mutex
	calls  []string
	bad    []string
	writes atomic.Int64
	// tenths of every ten calls fail, the first ones in sequence: in a pattern, not at random (a
	// random run of failures would back an object off past any wait: the controller's backoff
	// doubles with each failure).
	tenths   atomic.Int64
	seq      atomic.Int64
	failures atomic.Int64
	// failOp's next failLeft calls fail.
	failOp   atomic.Value // string
	failLeft atomic.Int64
}

var errInjected = errors.New("injected failure")

func newCounting(t *testing.T, ns string) *counting {
	return &counting{Provider: newProvider(t), ns: ns}
}

func (c *counting) fail(share float64) { c.tenths.Store(int64(math.Round(share * 10))) }

// failNext makes the next n calls of op fail.
func (c *counting) failNext(op string, n int64) { c.failOp.Store(op); c.failLeft.Store(n) }

func (c *counting) call(op string, w provider.Want, write bool) error {
	if write {
		c.writes.Add(1)
	}
	if uid := w.Owner.UID; uid != "" {
		list := &v1alpha1.PostgresDatabaseList{}
		if err := env.Client.List(context.Background(), list, client.InNamespace(c.ns)); err != nil {
			return err
		}
		c.mu.Lock()
		for _, db := range list.Items {
			if string(db.UID) == uid && !controllerutil.ContainsFinalizer(&db, controller.Finalizer) {
				c.bad = append(c.bad, op+" before the finalizer was stored")
			}
		}
		c.mu.Unlock()
	}
	c.mu.Lock()
	c.calls = append(c.calls, op)
	c.mu.Unlock()
	if c.seq.Add(1)%10 < c.tenths.Load() || c.failOp.Load() == op && c.failLeft.Add(-1) >= 0 {
		c.failures.Add(1)
		return errInjected
	}
	return nil
}

func (c *counting) Observe(ctx context.Context, w provider.Want) (provider.Observed, error) {
	if err := c.call("observe", w, false); err != nil {
		return provider.Observed{}, err
	}
	return c.Provider.Observe(ctx, w)
}

func (c *counting) Apply(ctx context.Context, w provider.Want, o provider.Observed) error {
	if err := c.call("apply", w, true); err != nil {
		return err
	}
	return c.Provider.Apply(ctx, w, o)
}

func (c *counting) Delete(ctx context.Context, w provider.Want) error {
	if err := c.call("delete", w, true); err != nil {
		return err
	}
	return c.Provider.Delete(ctx, w)
}

func (c *counting) Release(ctx context.Context, w provider.Want) error {
	if err := c.call("release", w, true); err != nil {
		return err
	}
	return c.Provider.Release(ctx, w)
}

func (c *counting) Retag(ctx context.Context, w provider.Want, o provider.Observed) error {
	if err := c.call("retag", w, true); err != nil {
		return err
	}
	return c.Provider.Retag(ctx, w, o)
}

func (c *counting) SetPassword(ctx context.Context, w provider.Want) error {
	if err := c.call("password", w, true); err != nil {
		return err
	}
	return c.Provider.SetPassword(ctx, w)
}

// The whole life: the finalizer before any external call; the database and the role created,
// tagged, the role's login in the credentials Secret (and working); dropped on delete.
func TestCreateAndDelete(t *testing.T) {
	ns := env.Namespace(t)
	p := newCounting(t, ns)
	runWith(t, ns, p)
	ctx := context.Background()
	db := newDB(ns, "app")
	create(t, db)
	env.WaitCondition(t, db, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	env.WaitForEvent(t, ns, db.Name, corev1.EventTypeNormal, controller.ReasonCreated, "")
	o := state(t, db)
	if !o.RoleExists || !o.DatabaseExists || o.ConnectionLimit != 5 || o.DatabaseOwner != db.Spec.Role || !strings.Contains(o.DatabaseTag, string(db.UID)) {
		t.Errorf("server holds %+v", o)
	}
	recordedCreate(t, db)
	s := &corev1.Secret{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: controller.CredentialsSecret(db)}, s); err != nil {
		t.Fatal(err)
	}
	login := strings.Replace(pg.URL("", db.Spec.Database), postgres.User+":"+pg.Password, db.Spec.Role+":"+string(s.Data["password"]), 1)
	c, err := pgx.Connect(ctx, login)
	if err != nil {
		t.Fatalf("logging in with the credentials Secret: %v", err)
	}
	_ = c.Close(ctx)
	remove(t, db)
	gone(t, db)
	if o := state(t, db); o.RoleExists || o.DatabaseExists {
		t.Errorf("after delete the server holds %+v", o)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.bad) > 0 {
		t.Errorf("calls %v; violations %v", p.calls, p.bad)
	}
}

// A user who may create PostgresDatabases in a namespace but not read its Secrets cannot make the
// controller use one of them: the field that named a Secret is gone (a strict request naming it is
// refused), a Secret named as if it were a server is not read, and a PostgresServer's Secret is
// read from the operator namespace only, never from the object's.
func TestCredentialsComeOnlyFromServers(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	login := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "admin-pg", Namespace: ns}, StringData: map[string]string{ // a working superuser login
		"host": pg.Host, "port": strconv.Itoa(pg.Port), "username": postgres.User, "password": pg.Password, "sslmode": "disable"}}
	writer := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "pgdb-writer", Namespace: ns}, Rules: []rbacv1.PolicyRule{{
		APIGroups: []string{v1alpha1.GroupVersion.Group}, Resources: []string{"postgresdatabases"}, Verbs: []string{"get", "create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "alice", Namespace: ns},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "alice"}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: writer.Name}}
	beside := &v1alpha1.PostgresServer{ObjectMeta: metav1.ObjectMeta{Name: ns + "-beside"}, Spec: v1alpha1.PostgresServerSpec{ConnectionSecret: login.Name}}
	create(t, login, writer, binding, beside)
	t.Cleanup(func() { _ = env.Client.Delete(context.Background(), beside) })
	cfg := rest.CopyConfig(env.Admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: "alice"}
	alice, err := client.New(cfg, client.Options{Scheme: env.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	if err := alice.Get(ctx, client.ObjectKeyFromObject(login), &corev1.Secret{}); !apierrors.IsForbidden(err) {
		t.Fatalf("alice reading %s: %v, want forbidden", login.Name, err)
	}
	runWith(t, ns, newProvider(t))

	old := &unstructured.Unstructured{Object: map[string]any{"apiVersion": v1alpha1.GroupVersion.String(), "kind": "PostgresDatabase",
		"metadata": map[string]any{"name": "old", "namespace": ns},
		"spec":     map[string]any{"connectionSecret": login.Name, "serverName": server, "database": prefix(ns) + "old", "role": prefix(ns) + "old"}}}
	if err := alice.Create(ctx, old, client.FieldValidation("Strict")); err == nil || !strings.Contains(err.Error(), `unknown field "spec.connectionSecret"`) {
		t.Errorf("alice creating an object naming the Secret %s: %v, want refused for the unknown field", login.Name, err)
	}
	for _, c := range []struct{ name, server, message string }{
		{"named", login.Name, `PostgresServer.patterns.kpatterns.dev "admin-pg" not found`},
		{"beside", beside.Name, "PostgresServer " + beside.Name + ": connection Secret " + testenv.Namespace + "/admin-pg: secrets \"admin-pg\" not found"},
	} {
		db := newDB(ns, c.name)
		db.Spec.ServerName = c.server
		if err := alice.Create(ctx, db); err != nil {
			t.Fatal(err)
		}
		got := env.WaitCondition(t, db, "Ready", metav1.ConditionFalse, controller.ReasonConnectionError)
		if got.Message != c.message {
			t.Errorf("server %s: Ready message %q, want %q", c.server, got.Message, c.message)
		}
		if o := state(t, db); o.RoleExists || o.DatabaseExists {
			t.Errorf("server %s: the PostgreSQL server holds %+v, want nothing", c.server, o)
		}
	}
}

// An object the cache does not hold is never a reason for an external call, let alone a delete.
func TestCacheAbsenceCallsNothing(t *testing.T) {
	ns := env.Namespace(t)
	p := newCounting(t, ns)
	mgr := env.IdleManager(t)
	r := reconciler(t, mgr, p)
	if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKey{Namespace: ns, Name: "absent"}}); err != nil {
		t.Fatal(err)
	}
	if len(p.calls) != 0 {
		t.Errorf("external calls %v for an object not in the cache", p.calls)
	}
}

// Drift is repaired at the next poll, each repair one Warning event naming what changed: an
// attribute, and a role dropped behind the controller's back (its database handed to another
// owner first, as PostgreSQL requires).
func TestDriftIsRepaired(t *testing.T) {
	ns := env.Namespace(t)
	runWith(t, ns, newProvider(t))
	a, b := newDB(ns, "a"), newDB(ns, "b")
	create(t, a, b)
	env.WaitCondition(t, a, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	env.WaitCondition(t, b, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	sql(t, fmt.Sprintf("ALTER ROLE %s CONNECTION LIMIT 10", a.Spec.Role))
	sql(t, fmt.Sprintf("ALTER DATABASE %s OWNER TO postgres; DROP ROLE %s", b.Spec.Database, b.Spec.Role))
	env.WaitForEvent(t, ns, a.Name, corev1.EventTypeWarning, controller.ReasonRepaired, "role connection limit 10 → 5")
	env.WaitForEvent(t, ns, b.Name, corev1.EventTypeWarning, controller.ReasonRepaired,
		fmt.Sprintf("role %s missing → created; database owner postgres → %s", b.Spec.Role, b.Spec.Role))
	for _, db := range []*v1alpha1.PostgresDatabase{a, b} {
		testenv.Eventually(t, db.Name+" repaired", func() error {
			if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(db), db); err != nil {
				return err
			}
			if o := state(t, db); db.Status.Repairs != 1 || o.ConnectionLimit != 5 || o.DatabaseOwner != db.Spec.Role {
				return fmt.Errorf("repairs %d, server %+v", db.Status.Repairs, o)
			}
			return nil
		})
	}
	// A spec change is an update, not a repair.
	a.Spec.ConnectionLimit = ptr.To[int32](7)
	if err := env.Client.Update(context.Background(), a); err != nil {
		t.Fatal(err)
	}
	env.WaitForEvent(t, ns, a.Name, corev1.EventTypeNormal, controller.ReasonUpdated, "role connection limit 5 → 7")
}

// ObserveOnly reports how what exists differs from the spec and changes nothing, not even on
// deletion; a Full object over a database it did not create reports a conflict and adopts nothing.
func TestObserveOnlyAndConflict(t *testing.T) {
	ns := env.Namespace(t)
	runWith(t, ns, newProvider(t))
	seen, taken := newDB(ns, "seen"), newDB(ns, "taken")
	for _, db := range []*v1alpha1.PostgresDatabase{seen, taken} {
		sql(t, fmt.Sprintf("CREATE ROLE %s LOGIN CONNECTION LIMIT 3", db.Spec.Role))
		sql(t, fmt.Sprintf("CREATE DATABASE %s OWNER %s", db.Spec.Database, db.Spec.Role))
	}
	seen.Spec.ManagementPolicy = v1alpha1.ObserveOnly
	create(t, seen, taken)
	c := env.WaitCondition(t, seen, "Ready", metav1.ConditionFalse, controller.ReasonDrifted)
	if !strings.Contains(c.Message, "role connection limit 3 → 5") {
		t.Errorf("message %q", c.Message)
	}
	c = env.WaitCondition(t, taken, "Ready", metav1.ConditionFalse, controller.ReasonConflict)
	if !strings.Contains(c.Message, "was not created for this object (no ownership tag)") {
		t.Errorf("message %q", c.Message)
	}
	for _, db := range []*v1alpha1.PostgresDatabase{seen, taken} {
		remove(t, db)
		gone(t, db)
		if o := state(t, db); !o.RoleExists || !o.DatabaseExists || o.ConnectionLimit != 3 || o.RoleTag != "" || o.DatabaseTag != "" {
			t.Errorf("%s: the server holds %+v, want it untouched", db.Name, o)
		}
	}
}

// Orphan: the finalizer goes, the database and the role stay, released (their tags removed).
func TestOrphanPolicy(t *testing.T) {
	ns := env.Namespace(t)
	runWith(t, ns, newProvider(t))
	db := newDB(ns, "kept")
	db.Spec.ManagementPolicy = v1alpha1.Orphan
	create(t, db)
	env.WaitCondition(t, db, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	if o := state(t, db); !strings.HasSuffix(o.DatabaseTag, "deletion=Orphan") {
		t.Errorf("tag %q", o.DatabaseTag)
	}
	remove(t, db)
	gone(t, db)
	if o := state(t, db); !o.RoleExists || !o.DatabaseExists || o.RoleTag != "" || o.DatabaseTag != "" {
		t.Errorf("the server holds %+v, want both, untagged", o)
	}
}

// The pause annotation stops every external call, a deletion's too; removing it resumes.
func TestPause(t *testing.T) {
	ns := env.Namespace(t)
	p := newCounting(t, ns)
	runWith(t, ns, p)
	ctx := context.Background()
	db := newDB(ns, "paused")
	db.Annotations = map[string]string{controller.PausedAnnotation: "true"}
	create(t, db)
	env.WaitCondition(t, db, "Ready", metav1.ConditionFalse, controller.ReasonPaused)
	setPause := func(v string) {
		t.Helper()
		patch := client.MergeFrom(db.DeepCopy())
		metav1.SetMetaDataAnnotation(&db.ObjectMeta, controller.PausedAnnotation, v)
		if err := env.Client.Patch(ctx, db, patch); err != nil {
			t.Fatal(err)
		}
	}
	if o := state(t, db); o.DatabaseExists || len(p.calls) != 0 {
		t.Fatalf("paused, yet calls %v and the server holds %+v", p.calls, o)
	}
	setPause("false")
	env.WaitCondition(t, db, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	setPause("true")
	env.WaitCondition(t, db, "Ready", metav1.ConditionFalse, controller.ReasonPaused)
	remove(t, db)
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil || db.DeletionTimestamp == nil {
		t.Fatalf("want it Terminating: %v", err)
	}
	if o := state(t, db); !o.DatabaseExists {
		t.Fatal("the database was dropped while paused")
	}
	setPause("false")
	gone(t, db)
	if o := state(t, db); o.DatabaseExists || o.RoleExists {
		t.Errorf("after the pause the server holds %+v", o)
	}
}

// A failing delete holds the object Terminating (DeleteFailed, one Warning event), then completes.
func TestDeleteFailuresHoldTheFinalizer(t *testing.T) {
	ns := env.Namespace(t)
	p := newCounting(t, ns)
	runWith(t, ns, p)
	db := newDB(ns, "held")
	create(t, db)
	env.WaitCondition(t, db, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	p.fail(1)
	remove(t, db)
	c := env.WaitCondition(t, db, "Ready", metav1.ConditionFalse, controller.ReasonDeleteFailed)
	if c.Message != "deleting: "+errInjected.Error() {
		t.Errorf("message = %q", c.Message)
	}
	env.WaitForEvent(t, ns, db.Name, corev1.EventTypeWarning, controller.ReasonDeleteFailed, "")
	if o := state(t, db); db.DeletionTimestamp == nil || !o.DatabaseExists {
		t.Fatalf("want it Terminating and its database kept: %+v", o)
	}
	p.fail(0)
	gone(t, db)
	if o := state(t, db); o.DatabaseExists || o.RoleExists {
		t.Errorf("server holds %+v", o)
	}
}

// Objects created and deleted at once, while 30 % of external calls fail, race the finalizer's
// addition; some are deleted synced, some before: nothing may be left on the server.
func TestImmediateDeletesUnderFailuresLeaveNothing(t *testing.T) {
	ns := env.Namespace(t)
	p := newCounting(t, ns)
	p.fail(0.3)
	runWith(t, ns, p)
	var dbs []*v1alpha1.PostgresDatabase
	for i := range 30 {
		db := newDB(ns, fmt.Sprintf("d%d", i))
		create(t, db)
		if i%3 == 0 { // a third once synced
			env.WaitCondition(t, db, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
		}
		remove(t, db)
		dbs = append(dbs, db)
	}
	for _, db := range dbs {
		gone(t, db)
	}
	testenv.Eventually(t, "nothing left on the server", func() error {
		if left := owned(t, ns); len(left) > 0 {
			return fmt.Errorf("left: %v", left)
		}
		return nil
	})
	if p.failures.Load() == 0 {
		t.Error("no failure was injected")
	}
}

// What an object left behind while the controller was down — its finalizer removed by hand, as
// after an uninstalled operator — is swept when the controller comes back: found by a live read
// of the object's absence. A released (Orphan) database is not.
func TestSweepAfterDowntime(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	lost, kept := newDB(ns, "lost"), newDB(ns, "kept")
	kept.Spec.ManagementPolicy = v1alpha1.Orphan
	t.Run("controller running", func(t *testing.T) {
		runWith(t, ns, newProvider(t))
		create(t, lost, kept)
		env.WaitCondition(t, lost, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
		env.WaitCondition(t, kept, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	})
	for _, db := range []*v1alpha1.PostgresDatabase{lost, kept} { // the controller is down
		remove(t, db)
		patch := client.MergeFrom(db.DeepCopy())
		db.Finalizers = nil
		if err := env.Client.Patch(ctx, db, patch); err != nil {
			t.Fatal(err)
		}
		gone(t, db)
	}
	other := newDB(ns, "other") // a live object through the same Secret: the sweep reaches the server through it
	create(t, other)
	runWith(t, ns, newProvider(t))
	env.WaitCondition(t, other, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	testenv.Eventually(t, "lost swept", func() error {
		if o := state(t, lost); o.DatabaseExists || o.RoleExists {
			return fmt.Errorf("lost: the server holds %+v", o)
		}
		return nil
	})
	if o := state(t, kept); !o.DatabaseExists || !o.RoleExists {
		t.Errorf("kept (Orphan): the server holds %+v, want both", o)
	}
	if o := state(t, other); !o.DatabaseExists {
		t.Errorf("other: %+v", o)
	}
}

// No write — to the API server or to PostgreSQL — re-reconciling a synced object.
func TestNoWriteWhenSynced(t *testing.T) {
	ns := env.Namespace(t)
	p := newCounting(t, ns)
	mgr := runWith(t, ns, p)
	db := newDB(ns, "calm")
	create(t, db)
	env.WaitCondition(t, db, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	recordedCreate(t, db) // the last write of the create: the pending mark removed
	testenv.WaitCached(t, mgr.GetClient(), db)
	writes := testenv.CountWrites(mgr.GetClient())
	before := p.writes.Load()
	r := reconciler(t, mgr, p)
	r.Client = writes
	for range 3 {
		res, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(db)})
		if err != nil || res.RequeueAfter != 10*time.Second {
			t.Fatalf("reconcile: %v %v, want a requeue after the poll interval", res, err)
		}
	}
	if n, ext := writes.N(), p.writes.Load()-before; n != 0 || ext != 0 {
		t.Errorf("%d API writes and %d external writes re-reconciling a synced object, want 0 and 0", n, ext)
	}
}

// The controller is SIGKILLed right after the external create, before it records the result: the
// next process observes the database it created (the ownership tag says so), records it, and
// neither creates it again nor reports a conflict. The kill is injected by this test binary's
// own provider wrapper, in a child process.
func TestKilledBetweenCreateAndStatus(t *testing.T) {
	ns := env.Namespace(t)
	ctx := context.Background()
	db := newDB(ns, "killed")
	create(t, db)
	child := exec.Command(os.Args[0], "-test.run=^$")
	cfg := filepath.Join(t.TempDir(), "admin.json")
	b, _ := json.Marshal(childConfig{Host: env.Admin.Host, CA: env.Admin.CAData, Cert: env.Admin.CertData, Key: env.Admin.KeyData, Namespace: ns})
	if err := os.WriteFile(cfg, b, 0o600); err != nil {
		t.Fatal(err)
	}
	child.Env = append(os.Environ(), childEnv+"="+cfg)
	out, err := child.CombinedOutput()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("child: %v, want killed by SIGKILL: %s", err, out)
	}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil {
		t.Fatal(err)
	}
	o := state(t, db)
	if db.Status.ExternalName != "" || db.Annotations[controller.CreatePendingAnnotation] == "" || !o.DatabaseExists {
		t.Fatalf("after the kill: status %+v, annotations %v, server %+v; want the create done, unrecorded, pending", db.Status, db.Annotations, o)
	}
	oid := databaseOID(t, db.Spec.Database)
	runWith(t, ns, newProvider(t))
	env.WaitCondition(t, db, "Ready", metav1.ConditionTrue, controller.ReasonSynced)
	env.WaitForEvent(t, ns, db.Name, corev1.EventTypeNormal, controller.ReasonCreateRecorded, "")
	testenv.Eventually(t, "pending mark cleared", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(db), db); err != nil || db.Annotations[controller.CreatePendingAnnotation] != "" {
			return fmt.Errorf("annotations %v: %v", db.Annotations, err)
		}
		return nil
	})
	if got := databaseOID(t, db.Spec.Database); got != oid || db.Status.ExternalName != db.Spec.Database || db.Status.Repairs != 0 {
		t.Errorf("database oid %d → %d, status %+v: want the same database, recorded, no repair", oid, got, db.Status)
	}
}

func databaseOID(t *testing.T, name string) uint32 {
	t.Helper()
	var oid uint32
	superuser(t, func(c *pgx.Conn) error {
		return c.QueryRow(context.Background(), "SELECT oid FROM pg_database WHERE datname = $1", name).Scan(&oid)
	})
	return oid
}

// childEnv names the file with the API server's admin login: set, the test binary is the child of
// TestKilledBetweenCreateAndStatus.
const childEnv = "FINALIZERS_TEST_CHILD"

type childConfig struct {
	Host          string
	CA, Cert, Key []byte
	Namespace     string
}

// killAfterCreate is the child's provider: the real one, and SIGKILL right after a create.
type killAfterCreate struct{ provider.Provider }

func (k killAfterCreate) Apply(ctx context.Context, w provider.Want, o provider.Observed) error {
	err := k.Provider.Apply(ctx, w, o)
	if err == nil && !o.DatabaseExists {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
	}
	return err
}

// runChild runs the controller as its ServiceAccount with killAfterCreate until the kill.
func runChild() {
	b, err := os.ReadFile(os.Getenv(childEnv))
	var c childConfig
	if err == nil {
		err = json.Unmarshal(b, &c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	admin := &rest.Config{Host: c.Host, TLSClientConfig: rest.TLSClientConfig{CAData: c.CA, CertData: c.Cert, KeyData: c.Key}}
	opts, err := app.ManagerOptions(config.Pattern, app.RunOptions{Options: app.Options{Namespace: testenv.Namespace, WatchNamespaces: []string{c.Namespace}},
		ProbeAddr: "0", MetricsAddr: "0"})
	if err == nil {
		var mgr manager.Manager
		if mgr, err = newManager(app.Impersonate(admin, testenv.Namespace, controller.Name), opts); err == nil {
			if err = controller.Setup(mgr, killAfterCreate{provider.NewPostgres()}, controller.Options{SweepInterval: time.Hour, Namespace: testenv.Namespace}); err == nil {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				err = app.Start(ctx, mgr)
			}
		}
	}
	fmt.Fprintln(os.Stderr, "child ended without being killed:", err)
	os.Exit(3)
}
