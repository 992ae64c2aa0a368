// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/kindnode"
	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/postgres"
)

var (
	pgOnce   sync.Once
	pgServer *postgres.Server
	pgErr    error
	pgAdmin  = provider.NewPostgres() // the suite's own reads of the server
)

// postgresServer is the suite's PostgreSQL server (the OS's), started on first use — listening
// also on the real node's host address, where Pods reach it — and removed when the suite ends.
func postgresServer(t testing.TB) *postgres.Server {
	t.Helper()
	pg, err := startPostgres()
	if err != nil {
		t.Fatal(err)
	}
	return pg
}

func startPostgres() (*postgres.Server, error) {
	pgOnce.Do(func() {
		var extra []string
		if ip, err := podsReachHostAt(); err != nil {
			pgErr = err
			return
		} else if ip != "" {
			extra = append(extra, ip)
		}
		pgServer, pgErr = postgres.Start(extra...)
	})
	return pgServer, pgErr
}

// podsReachHostAt is this machine's address as the cluster's Pods reach it ("" where none does):
// the host's end of the local cluster's real node link, or kind's Docker network gateway.
func podsReachHostAt() (string, error) {
	if kindRun {
		return kindnode.Gateway(context.Background(), os.Environ())
	}
	if localProvider != nil && localProvider.Cluster() != nil && localProvider.Cluster().HasRealNode() {
		return localProvider.Cluster().HostIP(), nil
	}
	return "", nil
}

func hostIPForPods(t testing.TB) string {
	t.Helper()
	ip, err := podsReachHostAt()
	if err != nil || ip == "" {
		t.Fatalf("no address of this machine that the cluster's Pods reach (%v)", err)
	}
	return ip
}

// removePostgres is the suite's Finish step for postgresServer.
func removePostgres(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	pgAdmin.Close()
	if pgServer == nil {
		return ctx, nil
	}
	return ctx, pgServer.Remove()
}

// serverObject creates, for the test, the PostgresServer name (pgDatabase names it after the
// objects' namespace) and its Secret pg-<name> in the operator namespace opns: the suite's server
// as its superuser, at host.
func serverObject(ctx context.Context, t testing.TB, c client.Client, opns, name, host string) {
	t.Helper()
	if err := createPostgresServer(ctx, c, opns, name, host); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Delete(context.Background(), &v1alpha1.PostgresServer{ObjectMeta: metav1.ObjectMeta{Name: name}})
		_ = c.Delete(context.Background(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pg-" + name, Namespace: opns}})
	})
}

// createPostgresServer makes the PostgresServer name and its Secret, the Secret anew: a server of
// an earlier run had another password.
func createPostgresServer(ctx context.Context, c client.Client, opns, name, host string) error {
	pg, err := startPostgres()
	if err != nil {
		return err
	}
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "pg-" + name, Namespace: opns}, StringData: map[string]string{
		"host": host, "port": strconv.Itoa(pg.Port), "username": postgres.User, "password": pg.Password, "sslmode": "disable"}}
	if err := client.IgnoreNotFound(c.Delete(ctx, s)); err != nil {
		return err
	}
	return errors.Join(c.Create(ctx, s), client.IgnoreAlreadyExists(c.Create(ctx,
		&v1alpha1.PostgresServer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: v1alpha1.PostgresServerSpec{ConnectionSecret: s.Name}})))
}

// logLines counts the lines of the log at path that contain any of texts.
func logLines(t testing.TB, path string, texts ...string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for line := range strings.Lines(string(b)) {
		if slices.ContainsFunc(texts, func(s string) bool { return strings.Contains(line, s) }) {
			n++
		}
	}
	return n
}

// pgDatabase is a PostgresDatabase in ns on the PostgresServer named ns, for database and role
// named after it.
func pgDatabase(ns, name string) *v1alpha1.PostgresDatabase {
	n := "e2e_" + strings.ReplaceAll(name, "-", "_")
	return &v1alpha1.PostgresDatabase{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Spec: v1alpha1.PostgresDatabaseSpec{ServerName: ns, Database: n, Role: n}}
}

// ownedIn lists what carries the pattern's ownership tag for objects of namespace ns.
func ownedIn(t testing.TB, ns string) []string {
	t.Helper()
	pg := postgresServer(t)
	ws, err := pgAdmin.Owned(context.Background(), provider.Conn{Host: pg.Host, Port: strconv.Itoa(pg.Port), Username: postgres.User, Password: pg.Password, SSLMode: "disable"})
	if err != nil {
		t.Fatal(err)
	}
	var left []string
	for _, w := range ws {
		if w.Owner.Namespace == ns {
			left = append(left, w.Owner.Name)
		}
	}
	return left
}

// TestFinalizersUnderFaults: the pattern as its ServiceAccount against a real PostgreSQL. 200
// create/delete cycles, 10 at a time, while the server is stopped for 20 s: every object must be
// gone (none stuck Terminating), nothing left on the server, no object created twice. Then the
// process is stopped, objects lose their finalizer by hand and are deleted (an uninstalled
// operator's leftovers), and the restarted process sweeps what they left.
func TestFinalizersUnderFaults(t *testing.T) {
	const ns, cycles, outage = "e2e-finalizers", 200, 20 * time.Second
	f := features.New("finalizers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if kindRun {
				t.Skip("the fault run stops the suite's local PostgreSQL server")
			}
			return ctx
		})
	f = withPattern(f, "finalizers", ns, "--sweep-interval", "1h").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			serverObject(ctx, t, clientFor(t, cfg), operatorNamespace, ns, "127.0.0.1")
			return ctx
		}).
		Assess("200 create/delete cycles with PostgreSQL stopped for 20 s leave nothing behind", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			rc := rest.CopyConfig(cfg.Client().RESTConfig())
			rc.QPS, rc.Burst = 200, 400 // the load, not client-go's default 5/s, is what is tested
			c, err := client.New(rc, client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			pg := postgresServer(t)
			start := time.Now()
			var down sync.Once
			var restarted = make(chan error, 1)
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(10)
			for i := range cycles {
				if i == cycles/4 {
					down.Do(func() {
						pg.Stop()
						t.Logf("PostgreSQL stopped after %d cycles began (%s)", i, time.Since(start).Round(100*time.Millisecond))
						time.AfterFunc(outage, func() { restarted <- pg.Start() })
					})
				}
				g.Go(func() error {
					db := pgDatabase(ns, fmt.Sprintf("chaos-%d", i))
					if err := c.Create(gctx, db); err != nil {
						return err
					}
					if i%2 == 1 { // half are deleted once synced, half at once (maybe before the finalizer)
						for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
							if err := c.Get(gctx, client.ObjectKeyFromObject(db), db); err != nil {
								return err
							}
							if db.Status.ExternalName != "" {
								break
							}
							if time.Now().After(deadline) {
								return fmt.Errorf("%s never synced", db.Name)
							}
						}
					}
					return c.Delete(gctx, db)
				})
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			if err := <-restarted; err != nil {
				t.Fatal(err)
			}
			waitForLong(t, "every PostgresDatabase gone", 5*time.Minute, func(ctx context.Context) (bool, error) {
				list := &v1alpha1.PostgresDatabaseList{}
				err := c.List(ctx, list, client.InNamespace(ns))
				return err == nil && len(list.Items) == 0, err
			})
			took := time.Since(start)
			left := ownedIn(t, ns)
			created := map[string]int{}
			events := &corev1.EventList{}
			if err := c.List(ctx, events, client.InNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			failures := 0
			for _, e := range events.Items {
				switch e.Reason {
				case controller.ReasonCreated:
					created[e.InvolvedObject.Name] += int(max(e.Count, 1))
				case controller.ReasonProviderError:
					failures++
				}
			}
			twice := 0
			for _, n := range created {
				if n > 1 {
					twice++
				}
			}
			t.Logf("%d cycles in %s with a %s outage: %d objects created their database (Created events), %d twice; %d objects saw a provider error; left on the server: %d",
				cycles, took.Round(100*time.Millisecond), outage, len(created), twice, failures, len(left))
			if len(left) != 0 || twice != 0 || len(created) < cycles/2 || failures == 0 {
				t.Errorf("left %v, %d created twice, %d created (want ≥ %d), %d provider errors (want > 0: the outage was seen)", left, twice, len(created), cycles/2, failures)
			}
			return ctx
		}).
		Assess("objects deleted while the controller is down are swept when it is back", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			var dbs []*v1alpha1.PostgresDatabase
			for i := range 10 {
				db := pgDatabase(ns, fmt.Sprintf("down-%d", i))
				if err := c.Create(ctx, db); err != nil {
					t.Fatal(err)
				}
				dbs = append(dbs, db)
			}
			keep := pgDatabase(ns, "keep") // still there: the sweep reaches the server through its PostgresServer
			if err := c.Create(ctx, keep); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "all synced", func(ctx context.Context) (bool, error) {
				return len(ownedIn(t, ns)) == len(dbs)+1, nil
			})
			ctx.Value(stopKey{"finalizers"}).(func())() // the controller is down
			for _, db := range dbs {
				if err := c.Delete(ctx, db); err != nil {
					t.Fatal(err)
				}
				patch := client.MergeFrom(db.DeepCopy())
				db.Finalizers = nil
				if err := c.Patch(ctx, db, patch); client.IgnoreNotFound(err) != nil {
					t.Fatal(err)
				}
			}
			// Ten orphans in one pass: at the default bound (10); a pass that found more would drop none.
			ctx = context.WithValue(ctx, stopKey{"finalizers"}, runPattern(ctx, t, cfg, "finalizers", "--sweep-interval", "1h", "--sweep-max-drops", "20"))
			waitFor(t, "the deleted objects' databases swept", func(ctx context.Context) (bool, error) {
				left := ownedIn(t, ns)
				return len(left) == 1 && left[0] == keep.Name, nil
			})
			if err := c.Delete(ctx, keep); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "keep dropped", func(ctx context.Context) (bool, error) { return len(ownedIn(t, ns)) == 0, nil })
			return ctx
		})
	testEnv.Test(t, f.Feature())
}
