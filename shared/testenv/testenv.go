// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package testenv runs a pattern's integration tests against a real API server: envtest's etcd
// and kube-apiserver, built once by package controlplane. The pattern's generated manifests
// (CRDs, ServiceAccount, RBAC) are installed, and its manager runs as its ServiceAccount, so the
// tests exercise the same RBAC as a deployment.
package testenv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"testing"
	"time"

	"go.uber.org/zap/zapcore"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// Namespace is the operator namespace the tests install into.
const Namespace = "default"

// Pattern is what a pattern's integration tests run: its declaration (manifests), its API types,
// and the two halves of its main.go — the manager it builds and the controllers and webhooks it
// registers.
type Pattern struct {
	app.Pattern
	// AddToScheme registers the pattern's own API types for Env.Client (optional).
	AddToScheme func(*runtime.Scheme) error
	// NewManager builds the pattern's manager from options as app.ManagerOptions makes them.
	NewManager func(*rest.Config, ctrl.Options) (manager.Manager, error)
	// Setup registers the pattern's controllers and webhooks on the manager.
	Setup func(manager.Manager) error
}

// Env is a running API server with a pattern installed.
type Env struct {
	Admin   *rest.Config  // system:masters
	Client  client.Client // admin client with the pattern's types: live reads and writes (no cache)
	Pattern Pattern
	env     *envtest.Environment
	atExit  []func()
}

// AtExit runs f when Main ends, after the API server stopped: to stop what a TestMain started
// beside it (an external system the pattern manages, say).
func (e *Env) AtExit(f func()) { e.atExit = append(e.atExit, f) }

// Main starts the API server, installs p's manifests (and fixtures, as Start does), runs the tests
// and stops the server. It is meant for TestMain:
// `func TestMain(m *testing.M) { testenv.Main(m, pattern, func(e *testenv.Env) { env = e }) }`;
// it never returns. A failure to start is fatal: no test skips for lack of binaries.
func Main(m *testing.M, p Pattern, set func(*Env), fixtures ...client.Object) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapLevel())))
	e, err := Start(p, fixtures...)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testenv:", err)
		os.Exit(1)
	}
	set(e)
	code := m.Run()
	if err := e.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, "testenv: stop:", err)
	}
	for _, f := range e.atExit {
		f()
	}
	os.Exit(code)
}

// Start boots etcd and kube-apiserver and installs p's manifests, after fixtures: objects that
// someone else installs in a real cluster (another operator's CRD, say), created as admin before
// the pattern's own and, for CRDs, served before Start returns. If a step after the start fails,
// it stops what it started: no etcd or kube-apiserver outlives a failed Start.
func Start(p Pattern, fixtures ...client.Object) (_ *Env, retErr error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	dir, err := controlplane.Ensure(ctx, controlplane.EnvtestBinaries...)
	if err != nil {
		return nil, err
	}
	// Every feature on: its tests run with what --with grants, and no more.
	var with []string
	for _, f := range p.Features {
		with = append(with, f.Name)
	}
	objs, err := app.Objects(p.Pattern, app.Options{Namespace: Namespace, With: with})
	if err != nil {
		return nil, err
	}
	hooks, err := app.WebhookObjects(p.Pattern, app.Options{Namespace: Namespace})
	if err != nil {
		return nil, err
	}
	objs = append(objs, hooks...)
	if err := withoutRule(objs, "kpatterns-"+p.Name); err != nil {
		return nil, err
	}
	objs = append(slices.Clone(fixtures), objs...)
	// The pattern's webhook configurations (as `install` renders them: its namespace excluded) go
	// to envtest, which points them at a local TLS port with certificates of its own; the
	// manager serves there (see start).
	env := &envtest.Environment{BinaryAssetsDirectory: dir}
	// As on clusters that enable it (OpenShift, hardened ones): setting blockOwnerDeletion on a
	// child needs update on the owner's finalizers subresource, so that rule is tested too.
	env.ControlPlane.GetAPIServer().Configure().Append("enable-admission-plugins", "OwnerReferencesPermissionEnforcement").
		// As the local cluster does: list and watch by hash range (the sharding pattern's server mode).
		Append("feature-gates", "ShardedListAndWatch=true")
	objs = slices.DeleteFunc(objs, func(o client.Object) bool {
		switch o := o.(type) {
		case *admissionregistrationv1.MutatingWebhookConfiguration:
			env.WebhookInstallOptions.MutatingWebhooks = append(env.WebhookInstallOptions.MutatingWebhooks, o)
			return true
		case *admissionregistrationv1.ValidatingWebhookConfiguration:
			env.WebhookInstallOptions.ValidatingWebhooks = append(env.WebhookInstallOptions.ValidatingWebhooks, o)
			return true
		}
		return false
	})
	cfg, err := env.Start()
	if err != nil {
		_ = env.Stop() // stopping a process that is not running is a no-op
		return nil, fmt.Errorf("starting envtest: %w", err)
	}
	defer func() {
		if retErr != nil {
			if err := env.Stop(); err != nil {
				retErr = errors.Join(retErr, fmt.Errorf("stopping envtest: %w", err))
			}
		}
	}()
	e := &Env{Admin: cfg, Pattern: p, env: env}
	s, err := app.NewScheme(p.AddToScheme)
	if err != nil {
		return nil, err
	}
	if e.Client, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		return nil, err
	}
	if err := app.Install(ctx, cfg, objs, io.Discard); err != nil {
		return nil, err
	}
	var crds []*apiextensionsv1.CustomResourceDefinition
	for _, o := range objs {
		if crd, ok := o.(*apiextensionsv1.CustomResourceDefinition); ok {
			crds = append(crds, crd)
		}
	}
	// The CRDs must be served before a manager can watch them.
	opts := envtest.CRDInstallOptions{MaxTime: time.Minute, PollInterval: 100 * time.Millisecond}
	if err := envtest.WaitForCRDs(cfg, crds, opts); err != nil {
		return nil, err
	}
	return e, nil
}

// Stop stops kube-apiserver and etcd.
func (e *Env) Stop() error { return e.env.Stop() }

// Manager builds the pattern's manager as `run --as-service-account --leader-elect=false
// [--watch-namespaces ...]` would, with its controllers and webhooks, starts it, and stops it when
// the test ends. The returned manager's client reads from its cache.
func (e *Env) Manager(t testing.TB, watchNamespaces ...string) manager.Manager {
	t.Helper()
	return e.ManagerWith(t, e.Pattern.Setup, watchNamespaces...)
}

// IdleManager is Manager without the pattern's controllers: the same cache and clients, for tests
// that drive a reconciler by hand with no other writer. setup, if given, runs in place of the
// pattern's Setup before the manager starts (to register the field indexes the reconciler reads).
func (e *Env) IdleManager(t testing.TB, setup ...func(manager.Manager) error) manager.Manager {
	t.Helper()
	return e.ManagerWith(t, func(mgr manager.Manager) error {
		for _, s := range setup {
			if err := s(mgr); err != nil {
				return err
			}
		}
		return nil
	})
}

// ManagerWith is Manager with setup in place of the pattern's Setup: its controller wired to a
// test's own collaborators (an external system that outlives one manager, say). The manager stops
// when the test — or subtest — that started it ends.
func (e *Env) ManagerWith(t testing.TB, setup func(manager.Manager) error, watchNamespaces ...string) manager.Manager {
	t.Helper()
	mgr := e.NewManager(t, app.RunOptions{Options: app.Options{WatchNamespaces: watchNamespaces}})
	if err := setup(mgr); err != nil {
		t.Fatalf("setup: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- app.Start(ctx, mgr) }() // bounded once stopped, as run is: a cache that never synced
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
	// Bounded like Eventually: an informer whose list and watch are forbidden never syncs.
	syncCtx, cancelSync := context.WithTimeout(ctx, eventuallyBound())
	defer cancelSync()
	if !mgr.GetCache().WaitForCacheSync(syncCtx) {
		t.Fatalf("manager cache did not sync within %s (is list or watch forbidden?)", eventuallyBound())
	}
	if hooks, _ := app.HasWebhooks(e.Pattern.Pattern); hooks { // the API server may call the webhooks at once
		Eventually(t, "webhook server started", func() error { return mgr.GetWebhookServer().StartedChecker()(nil) })
	}
	return mgr
}

// NewManager builds, without starting it, the pattern's manager as `run --as-service-account`
// with o would (leader election off unless o asks for it, no probe or metrics listener, the
// webhook server on envtest's port): for a test that starts and stops it itself.
func (e *Env) NewManager(t testing.TB, o app.RunOptions) manager.Manager {
	t.Helper()
	wh := e.env.WebhookInstallOptions
	o.Namespace = Namespace
	o.ProbeAddr, o.MetricsAddr = "0", "0"
	if o.Workers == 0 { // run's default
		o.Workers = e.Pattern.Workers
	}
	o.WebhookHost, o.WebhookPort, o.CertDir = wh.LocalServingHost, wh.LocalServingPort, wh.LocalServingCertDir
	opts, err := app.ManagerOptions(e.Pattern.Pattern, o)
	if err != nil {
		t.Fatalf("manager options: %v", err)
	}
	// controller-runtime refuses a second controller of one name in a process; a test process
	// runs many managers one after another.
	opts.Controller.SkipNameValidation = ptr.To(true)
	mgr, err := e.Pattern.NewManager(app.Impersonate(e.Admin, Namespace, e.Pattern.Name), opts)
	if err != nil {
		t.Fatalf("manager: %v", err)
	}
	return mgr
}

func zapLevel() zapcore.Level {
	if os.Getenv("TESTENV_VERBOSE") != "" {
		return -1
	}
	return 2 // errors only
}

// Namespace creates a namespace with a random name for one test.
func (e *Env) Namespace(t testing.TB) string {
	t.Helper()
	ns := "t-" + utilrand.String(6)
	if err := e.Client.Create(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		t.Fatal(err)
	}
	return ns
}

// EventuallyEnv shortens Eventually's bound (a Go duration): the least-privilege run, whose
// tests are expected to fail, sets it so that a missing permission costs seconds, not 30 s.
const EventuallyEnv = "KPATTERNS_EVENTUALLY"

// eventuallyBound is 30 s, or $KPATTERNS_EVENTUALLY.
func eventuallyBound() time.Duration {
	if d, err := time.ParseDuration(os.Getenv(EventuallyEnv)); err == nil {
		return d
	}
	return 30 * time.Second
}

// Bounded is a context that ends after Eventually's bound ($KPATTERNS_EVENTUALLY), or with the
// test: for one call that can block on a cache that never syncs — a reconcile driven by hand, a
// read from a manager's cache, a cache's sync — so that a missing list or watch permission fails
// the test in seconds instead of hanging it until go test's timeout.
func Bounded(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), eventuallyBound())
	t.Cleanup(cancel)
	return ctx
}

// Eventually polls cond until it returns nil and fails the test with cond's last error if that
// takes more than 30 seconds ($KPATTERNS_EVENTUALLY): the deadline only bounds a hung test, it is
// no timing assertion.
func Eventually(t testing.TB, what string, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(eventuallyBound())
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
