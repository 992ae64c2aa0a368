// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests against a real API server (envtest), generated CRD and RBAC installed, the
// manager running as the pattern's ServiceAccount. The rollout itself (a new ReplicaSet) is
// asserted by the e2e suite, where kube-controller-manager runs.

import (
	"context"
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	"github.com/kpatterns/kpatterns/conditional/config"
	"github.com/kpatterns/kpatterns/conditional/controller"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, AddToScheme: v1alpha1.AddToScheme, NewManager: newManager, Setup: controller.Setup}, func(e *testenv.Env) { env = e })
}

// update changes the profile's spec on its latest version (the controller writes its status).
func update(t *testing.T, ns, name string, mutate func(*v1alpha1.ConfigProfileSpec)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		p := &v1alpha1.ConfigProfile{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		mutate(&p.Spec)
		return env.Client.Update(context.Background(), p)
	})
	if err != nil {
		t.Fatal(err)
	}
}

type observed struct {
	profile    *v1alpha1.ConfigProfile
	config     *corev1.ConfigMap
	deployment *appsv1.Deployment
}

// settled waits until the profile's status describes its current generation with the given case,
// and returns the profile and its children.
func settled(t *testing.T, ns, name, matched string) observed {
	t.Helper()
	var o observed
	testenv.Eventually(t, name+" settles on case "+matched, func() error {
		ctx := context.Background()
		o = observed{&v1alpha1.ConfigProfile{}, &corev1.ConfigMap{}, &appsv1.Deployment{}}
		key := client.ObjectKey{Namespace: ns, Name: name}
		if err := env.Client.Get(ctx, key, o.profile); err != nil {
			return err
		}
		st := o.profile.Status
		if st.ObservedGeneration != o.profile.Generation || st.MatchedCase != matched {
			return fmt.Errorf("status: generation %d/%d, case %q", st.ObservedGeneration, o.profile.Generation, st.MatchedCase)
		}
		if err := env.Client.Get(ctx, key, o.config); err != nil {
			return err
		}
		if err := env.Client.Get(ctx, key, o.deployment); err != nil {
			return err
		}
		if got := o.deployment.Spec.Template.Annotations[digest.Annotation]; got != st.ConfigDigest {
			return fmt.Errorf("pod template digest %q, status digest %q", got, st.ConfigDigest)
		}
		return nil
	})
	return o
}

func TestFirstMatchingCaseAndDigest(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	p := &v1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "app", Namespace: ns},
		Spec: v1alpha1.ConfigProfileSpec{Image: "nginx:1.27", Settings: map[string]string{"log-level": "trace", "region": "eu"}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	o := settled(t, ns, "app", "default")
	want := map[string]string{"mode": "development", "log-level": "trace", "region": "eu"} // settings win
	if d := cmp.Diff(want, o.config.Data); d != "" {
		t.Errorf("generated config (-want +got):\n%s", d)
	}
	if o.profile.Status.ConfigDigest != digest.Map(want) {
		t.Errorf("digest %s, want the digest of the generated config", o.profile.Status.ConfigDigest)
	}
	if ref := o.deployment.Spec.Template.Spec.Containers[0].EnvFrom[0].ConfigMapRef; ref == nil || ref.Name != "app" {
		t.Errorf("Deployment does not consume the ConfigMap: %+v", o.deployment.Spec.Template.Spec.Containers[0])
	}
	c := meta.FindStatusCondition(o.profile.Status.Conditions, "ConfigReady")
	if c == nil || c.Status != metav1.ConditionTrue {
		t.Errorf("ConfigReady = %+v", c)
	}
	// envtest runs no deployment controller: the Workload stage waits for the rollout.
	if c := meta.FindStatusCondition(o.profile.Status.Conditions, "WorkloadReady"); c == nil || c.Reason != "Progressing" {
		t.Errorf("WorkloadReady = %+v, want Progressing", c)
	}

	// production matches next; maintenance wins over it.
	update(t, ns, "app", func(s *v1alpha1.ConfigProfileSpec) { s.Environment = "production" })
	prod := settled(t, ns, "app", "production")
	if prod.config.Data["mode"] != "production" || prod.profile.Status.ConfigDigest == o.profile.Status.ConfigDigest {
		t.Errorf("production: data %v, digest %s (was %s)", prod.config.Data, prod.profile.Status.ConfigDigest, o.profile.Status.ConfigDigest)
	}
	update(t, ns, "app", func(s *v1alpha1.ConfigProfileSpec) { s.Maintenance = true })
	if m := settled(t, ns, "app", "maintenance"); m.config.Data["read-only"] != "true" {
		t.Errorf("maintenance data = %v", m.config.Data)
	}
}

// A spec change that generates the same configuration writes neither child: no rollout.
func TestUnchangedConfigurationCausesNoRollout(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	p := &v1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "steady", Namespace: ns},
		Spec: v1alpha1.ConfigProfileSpec{Image: "nginx:1.27", Environment: "production"}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	before := settled(t, ns, "steady", "production")
	// what the production case sets anyway
	update(t, ns, "steady", func(s *v1alpha1.ConfigProfileSpec) { s.Settings = map[string]string{"log-level": "warn"} })
	after := settled(t, ns, "steady", "production")
	if after.profile.Status.ObservedGeneration == before.profile.Status.ObservedGeneration {
		t.Fatal("the spec change was not observed")
	}
	if after.config.ResourceVersion != before.config.ResourceVersion || after.deployment.ResourceVersion != before.deployment.ResourceVersion {
		t.Errorf("an unchanged configuration wrote a child: ConfigMap %s->%s, Deployment %s->%s",
			before.config.ResourceVersion, after.config.ResourceVersion, before.deployment.ResourceVersion, after.deployment.ResourceVersion)
	}
}

// The Workload stage depends on Config's output: when Config cannot finish (a foreign ConfigMap
// holds the name), no Deployment is written and the condition says why.
func TestWorkloadWaitsForConfig(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	if err := env.Client.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "blocked", Namespace: ns}}); err != nil {
		t.Fatal(err)
	}
	p := &v1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "blocked", Namespace: ns},
		Spec: v1alpha1.ConfigProfileSpec{Image: "nginx:1.27"}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "conditions", func() error {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		config := meta.FindStatusCondition(p.Status.Conditions, "ConfigReady")
		workload := meta.FindStatusCondition(p.Status.Conditions, "WorkloadReady")
		if config == nil || config.Reason != "NotOwned" || workload == nil || workload.Reason != "DependencyNotReady" ||
			workload.Message != "waiting for stage Config" {
			return fmt.Errorf("conditions = %+v", p.Status.Conditions)
		}
		return nil
	})
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &appsv1.Deployment{}); !apierrors.IsNotFound(err) {
		t.Errorf("Deployment: err = %v, want NotFound", err)
	}
}

// condition waits until the profile's condition of type typ has the status and reason at the
// profile's generation, and returns the profile.
func condition(t *testing.T, ns, name, typ string, status metav1.ConditionStatus, reason string) *v1alpha1.ConfigProfile {
	t.Helper()
	p := &v1alpha1.ConfigProfile{}
	testenv.Eventually(t, fmt.Sprintf("%s %s=%s/%s", name, typ, status, reason), func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, typ)
		if c == nil || c.Status != status || c.Reason != reason || c.ObservedGeneration != p.Generation {
			return fmt.Errorf("%s = %+v at generation %d", typ, c, p.Generation)
		}
		return nil
	})
	return p
}

// A suspended profile waits: Ready False with reason Suspended, the Workload stage not run, and
// nothing generated; resuming generates as usual.
func TestSuspendedCaseWaits(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	p := &v1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "paused", Namespace: ns},
		Spec: v1alpha1.ConfigProfileSpec{Image: "nginx:1.27", Suspended: true}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = condition(t, ns, "paused", "Ready", metav1.ConditionFalse, controller.ReasonSuspended)
	if p.Status.MatchedCase != "suspended" {
		t.Errorf("matched case %q", p.Status.MatchedCase)
	}
	if c := meta.FindStatusCondition(p.Status.Conditions, "WorkloadReady"); c == nil || c.Reason != "DependencyNotReady" {
		t.Errorf("WorkloadReady = %+v", c)
	}
	for _, child := range []client.Object{&corev1.ConfigMap{}, &appsv1.Deployment{}} {
		if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), child); !apierrors.IsNotFound(err) {
			t.Errorf("%T of a suspended profile: err = %v, want NotFound", child, err)
		}
	}
	update(t, ns, "paused", func(s *v1alpha1.ConfigProfileSpec) { s.Suspended = false })
	settled(t, ns, "paused", "default")
}

// The input case reads a labelled ConfigMap named in the spec. Missing, it waits with a clear
// condition; its creation and its changes reach the profile through the field index.
func TestInputCaseFollowsItsConfigMap(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	p := &v1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "fed", Namespace: ns},
		Spec: v1alpha1.ConfigProfileSpec{Image: "nginx:1.27", ConfigFrom: "upstream", Settings: map[string]string{"region": "eu"}}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = condition(t, ns, "fed", "ConfigReady", metav1.ConditionFalse, controller.ReasonInputMissing)
	if c := meta.FindStatusCondition(p.Status.Conditions, "ConfigReady"); c.Message != "waiting for ConfigMap upstream labelled patterns.kpatterns.dev/conditional=input" {
		t.Errorf("message = %q", c.Message)
	}

	// Unlabelled, it is not an input (and not cached): still missing. Labelled, it is read.
	in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "upstream", Namespace: ns}, Data: map[string]string{"mode": "fed", "a": "1"}}
	if err := env.Client.Create(ctx, in); err != nil {
		t.Fatal(err)
	}
	condition(t, ns, "fed", "ConfigReady", metav1.ConditionFalse, controller.ReasonInputMissing)
	in.Labels = map[string]string{controller.Label: controller.Input}
	if err := env.Client.Update(ctx, in); err != nil {
		t.Fatal(err)
	}
	o := settled(t, ns, "fed", "input")
	if d := cmp.Diff(map[string]string{"mode": "fed", "a": "1", "region": "eu"}, o.config.Data); d != "" {
		t.Errorf("generated config (-want +got):\n%s", d)
	}

	in.Data["a"] = "2"
	if err := env.Client.Update(ctx, in); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "input change reaches the profile", func() error {
		o = settled(t, ns, "fed", "input")
		if o.config.Data["a"] != "2" {
			return fmt.Errorf("config = %v", o.config.Data)
		}
		if want := digest.Map(o.config.Data); o.profile.Status.ConfigDigest != want {
			return fmt.Errorf("digest %s, want %s", o.profile.Status.ConfigDigest, want)
		}
		return nil
	})
}

// No case matches: a terminal error with a condition that says so, a Warning event, no child.
func TestNoMatchingCaseIsTerminal(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	ctx := context.Background()
	p := &v1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "lost", Namespace: ns},
		Spec: v1alpha1.ConfigProfileSpec{Image: "nginx:1.27", Environment: "qa"}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	p = condition(t, ns, "lost", "Ready", metav1.ConditionFalse, controller.ReasonNoMatchingCase)
	c := meta.FindStatusCondition(p.Status.Conditions, "ConfigReady")
	if c == nil || c.Reason != controller.ReasonNoMatchingCase || c.Message != `no case matches environment "qa": use production, staging, development or leave it empty` {
		t.Errorf("ConfigReady = %+v", c)
	}
	env.WaitForEvent(t, ns, "lost", corev1.EventTypeWarning, controller.ReasonNoMatchingCase, "")
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(p), &corev1.ConfigMap{}); !apierrors.IsNotFound(err) {
		t.Errorf("ConfigMap: err = %v, want NotFound", err)
	}
	// Fixing the spec recovers.
	update(t, ns, "lost", func(s *v1alpha1.ConfigProfileSpec) { s.Environment = "staging" })
	settled(t, ns, "lost", "default")
}

// A stage that becomes ready emits a Normal event (through the API server); re-reconciling a
// steady profile emits none. (The recorder folds repeats into a series whose count reaches the
// API server only every 30 minutes, so the hand-driven reconciles record into a fake.)
func TestEventsOnTransitionsOnly(t *testing.T) {
	ns := env.Namespace(t)
	mgr := env.Manager(t)
	ctx := context.Background()
	p := &v1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "loud", Namespace: ns},
		Spec: v1alpha1.ConfigProfileSpec{Image: "nginx:1.27"}}
	if err := env.Client.Create(ctx, p); err != nil {
		t.Fatal(err)
	}
	o := settled(t, ns, "loud", "default")
	env.WaitForEvent(t, ns, "loud", corev1.EventTypeNormal, "ConfigReady", "case default: 2 keys")
	for _, obj := range []client.Object{o.profile, o.config, o.deployment} {
		testenv.WaitCached(t, mgr.GetClient(), obj)
	}
	r, err := controller.NewReconciler(mgr)
	if err != nil {
		t.Fatal(err)
	}
	recorded := events.NewFakeRecorder(10)
	r.Recorder = recorded
	for range 3 {
		if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(p)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(recorded.Events); n != 0 {
		t.Errorf("%d events re-reconciling a steady profile, want 0: %s", n, <-recorded.Events)
	}
}
