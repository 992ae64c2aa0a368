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
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	"github.com/kpatterns/kpatterns/conditional/controller"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, pattern, func(e *testenv.Env) { env = e }) }

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
		if got := o.deployment.Spec.Template.Annotations[controller.DigestAnnotation]; got != st.ConfigDigest {
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
	if o.profile.Status.ConfigDigest != controller.Digest(want) {
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
