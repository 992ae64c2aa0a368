package main

// Integration tests against a real API server (envtest), the generated RBAC installed and the
// manager running as the reloader's ServiceAccount (so it has exactly get/list/watch ConfigMaps
// and get/list/watch/patch Deployments).

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) { testenv.Main(m, pattern, func(e *testenv.Env) { env = e }) }

func configMap(t *testing.T, ns, name string, data map[string]string) *corev1.ConfigMap {
	t.Helper()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
	if err := env.Client.Create(context.Background(), cm); err != nil {
		t.Fatal(err)
	}
	return cm
}

func deployment(t *testing.T, ns, name string, optIn bool, spec func(*corev1.PodSpec)) *appsv1.Deployment {
	t.Helper()
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Spec: appsv1.DeploymentSpec{
		Selector: &metav1.LabelSelector{MatchLabels: labels},
		Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}},
	}}
	if optIn {
		d.Labels = map[string]string{controller.OptIn: "true"}
	}
	spec(&d.Spec.Template.Spec)
	if err := env.Client.Create(context.Background(), d); err != nil {
		t.Fatal(err)
	}
	return d
}

// digestOf is the digest the reloader must write for refs, computed from the live ConfigMaps.
func digestOf(t *testing.T, ns string, refs ...string) string {
	t.Helper()
	rs := make([]controller.Ref, len(refs))
	for i, r := range refs {
		rs[i] = controller.Ref{Name: r}
	}
	slices.SortFunc(rs, func(a, b controller.Ref) int { return cmpString(a.Name, b.Name) })
	return controller.Digest(rs, func(name string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			return nil
		}
		return cm
	})
}

func cmpString(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// annotated waits until the Deployment's Pod template digest is want ("" = no annotation).
func annotated(t *testing.T, ns, name, want string) *appsv1.Deployment {
	t.Helper()
	d := &appsv1.Deployment{}
	testenv.Eventually(t, name+" digest", func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, d); err != nil {
			return err
		}
		got, ok := d.Spec.Template.Annotations[digest.Annotation]
		if got != want || (want == "" && ok) {
			return fmt.Errorf("digest %q (present %v), want %q", got, ok, want)
		}
		return nil
	})
	return d
}

func updateData(t *testing.T, ns, name string, mutate func(*corev1.ConfigMap)) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			return err
		}
		mutate(cm)
		return env.Client.Update(context.Background(), cm)
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestEveryReferenceForm(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	forms := map[string]func(*corev1.PodSpec){
		"volume": func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{
				ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-volume"}}}}}
		},
		"projected": func(s *corev1.PodSpec) {
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-projected"}}}}}}}}
		},
		"envfrom": func(s *corev1.PodSpec) {
			s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-envfrom"}}}}
		},
		"keyref": func(s *corev1.PodSpec) {
			s.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "cm-keyref"}, Key: "k"}}}}
		},
		"init": func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cm-init"}}}}}}
		},
	}
	for form, spec := range forms {
		configMap(t, ns, "cm-"+form, map[string]string{"k": "v1"})
		deployment(t, ns, "d-"+form, true, spec)
	}
	for form := range forms {
		first := annotated(t, ns, "d-"+form, digestOf(t, ns, "cm-"+form))
		updateData(t, ns, "cm-"+form, func(cm *corev1.ConfigMap) { cm.Data["k"] = "v2" })
		second := digestOf(t, ns, "cm-"+form)
		if second == first.Spec.Template.Annotations[digest.Annotation] {
			t.Fatalf("%s: the digest did not change with the data", form)
		}
		annotated(t, ns, "d-"+form, second)
	}
}

func TestOptionalMissingConfigMap(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	deployment(t, ns, "opt", true, func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Optional: ptr.To(true)}}}
	})
	absent := annotated(t, ns, "opt", digestOf(t, ns, "later")).Spec.Template.Annotations[digest.Annotation]
	configMap(t, ns, "later", map[string]string{"k": "v"})
	present := digestOf(t, ns, "later")
	if present == absent {
		t.Fatal("an absent ConfigMap digests like a present one")
	}
	annotated(t, ns, "opt", present)
}

func TestNoWriteWithoutDataChange(t *testing.T) {
	ns := env.Namespace(t)
	mgr := env.Manager(t)
	ctx := context.Background()
	configMap(t, ns, "settings", map[string]string{"k": "v"})
	deployment(t, ns, "calm", true, func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}}
	})
	d := annotated(t, ns, "calm", digestOf(t, ns, "settings"))

	updateData(t, ns, "settings", func(cm *corev1.ConfigMap) { cm.Labels = map[string]string{"touched": "yes"} })
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	cm = configMap(t, ns, "settings", map[string]string{"k": "v"})
	testenv.WaitCached(t, mgr.GetClient(), cm)
	testenv.WaitCached(t, mgr.GetClient(), d)

	writes := testenv.CountWrites(mgr.GetClient())
	recorded := events.NewFakeRecorder(10)
	r := &controller.Reconciler{Client: writes, Recorder: recorded}
	if _, err := r.Reconcile(ctx, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(d)}); err != nil {
		t.Fatal(err)
	}
	if n := writes.N(); n != 0 {
		t.Fatalf("%d writes, want 0", n)
	}
	if n := len(recorded.Events); n != 0 {
		t.Fatalf("%d events without a rollout, want 0", n)
	}
	after := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(d), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != d.ResourceVersion {
		t.Fatalf("Deployment written: resourceVersion %s -> %s", d.ResourceVersion, after.ResourceVersion)
	}
}

func TestReferenceRemovalRecomputes(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t)
	configMap(t, ns, "a", map[string]string{"k": "1"})
	configMap(t, ns, "b", map[string]string{"k": "2"})
	deployment(t, ns, "two", true, func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "a"}}},
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "b"}}},
		}
	})
	annotated(t, ns, "two", digestOf(t, ns, "a", "b"))
	setEnvFrom := func(names ...string) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			d := &appsv1.Deployment{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "two"}, d); err != nil {
				return err
			}
			d.Spec.Template.Spec.Containers[0].EnvFrom = nil
			for _, n := range names {
				d.Spec.Template.Spec.Containers[0].EnvFrom = append(d.Spec.Template.Spec.Containers[0].EnvFrom,
					corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: n}}})
			}
			return env.Client.Update(context.Background(), d)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	env.WaitForEvent(t, ns, "two", corev1.EventTypeNormal, controller.ReasonRollingOut, "first digest of ConfigMap(s): a, b")
	setEnvFrom("b")
	d := annotated(t, ns, "two", digestOf(t, ns, "b"))
	if got := d.Annotations[controller.ConfigMapsAnnotation]; !strings.HasPrefix(got, "b=") || strings.Contains(got, ",") {
		t.Errorf("%s = %q, want b's digest alone", controller.ConfigMapsAnnotation, got)
	}
	// The event names what changed: a is no longer referenced.
	env.WaitForEvent(t, ns, "two", corev1.EventTypeNormal, controller.ReasonRollingOut, "rolling out for changed ConfigMap(s): a")
	setEnvFrom()
	d = annotated(t, ns, "two", "")
	if _, ok := d.Annotations[controller.ConfigMapsAnnotation]; ok {
		t.Errorf("%s left after the last reference went", controller.ConfigMapsAnnotation)
	}
}

func TestSharedConfigMapAndTheIndex(t *testing.T) {
	ns := env.Namespace(t)
	mgr := env.Manager(t)
	ctx := context.Background()
	uses := func(name string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: name}}}}
		}
	}
	shared := configMap(t, ns, "shared", map[string]string{"k": "v1"})
	configMap(t, ns, "other", map[string]string{"k": "v1"})
	deployment(t, ns, "one", true, uses("shared"))
	deployment(t, ns, "two", true, uses("shared"))
	deployment(t, ns, "elsewhere", true, uses("other"))
	manual := deployment(t, ns, "not-opted-in", false, uses("shared"))
	annotated(t, ns, "one", digestOf(t, ns, "shared"))
	annotated(t, ns, "two", digestOf(t, ns, "shared"))

	var got []string
	for _, req := range controller.MapConfigMapToDeployments(mgr.GetClient())(ctx, shared) {
		got = append(got, req.Name)
	}
	slices.Sort(got)
	if !slices.Equal(got, []string{"one", "two"}) {
		t.Fatalf("the index maps ConfigMap shared to %v, want [one two]", got)
	}

	updateData(t, ns, "shared", func(cm *corev1.ConfigMap) { cm.Data["k"] = "v2" })
	annotated(t, ns, "one", digestOf(t, ns, "shared"))
	annotated(t, ns, "two", digestOf(t, ns, "shared"))
	after := &appsv1.Deployment{}
	if err := env.Client.Get(ctx, client.ObjectKeyFromObject(manual), after); err != nil {
		t.Fatal(err)
	}
	if after.ResourceVersion != manual.ResourceVersion {
		t.Fatal("a Deployment that did not opt in was written")
	}
}
