// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// Integration tests against a real API server (envtest), the generated RBAC installed and the
// manager running as the reloader's ServiceAccount (so it has exactly get/list/watch ConfigMaps
// and Secrets, and get/list/watch/patch Deployments, StatefulSets and DaemonSets). envtest runs no
// workload controllers: a Pod template change shows as a new generation, which is what is counted.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/events"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/yaml"

	"github.com/google/go-cmp/cmp"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/kpatterns/kpatterns/reloader/config"
	"github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

var env *testenv.Env

func TestMain(m *testing.M) {
	// Argo Rollouts' CRD, as its module ships it (go tool task generate:rollout-crd): installed in a
	// cluster by whoever installs Argo Rollouts.
	b, err := os.ReadFile("testdata/argoproj.io_rollouts.yaml")
	if err != nil {
		panic(err)
	}
	rollouts := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(b, rollouts); err != nil {
		panic(err)
	}
	testenv.Main(m, testenv.Pattern{Pattern: config.Pattern, AddToScheme: controller.AddToScheme, NewManager: newManager, Setup: func(mgr manager.Manager) error {
		return controller.Setup(mgr, defaults)
	}}, func(e *testenv.Env) { env = e }, rollouts)
}

// start runs the reloader as its ServiceAccount until the test ends, and returns a cache built as
// the reloader builds its own (CacheOptions) in the same namespaces, to read what
// the reloader reads.
func start(t testing.TB, o controller.Options, watchNamespaces ...string) (manager.Manager, cache.Cache) {
	t.Helper()
	o.WatchNamespaces = watchNamespaces
	var c cache.Cache
	mgr := env.ManagerWith(t, func(mgr manager.Manager) (err error) {
		if c, err = app.OwnCache(mgr, "test", watchNamespaces, controller.CacheOptionsOf(o.Kinds())); err != nil {
			return err
		}
		return controller.Setup(mgr, o)
	}, watchNamespaces...)
	if !c.WaitForCacheSync(testenv.Bounded(t)) {
		t.Fatal("the reloader's cache did not sync")
	}
	return mgr, c
}

var defaults = controller.Options{CoalesceWindow: controller.DefaultCoalesceWindow}

func source(t *testing.T, ns string, kind controller.Kind, name string, data map[string]string) {
	t.Helper()
	var obj client.Object = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: data}
	if kind == controller.Secret {
		obj = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, StringData: data}
	}
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
}

// setData changes one key of a source's data.
func setData(t *testing.T, ns string, kind controller.Kind, name, key, value string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if kind == controller.Secret {
			s := &corev1.Secret{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, s); err != nil {
				return err
			}
			s.Data[key] = []byte(value)
			return env.Client.Update(context.Background(), s)
		}
		cm := &corev1.ConfigMap{}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, cm); err != nil {
			return err
		}
		cm.Data[key] = value
		return env.Client.Update(context.Background(), cm)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// workload creates an opted-in (or not) workload of w's kind whose Pod spec spec edits.
func workload(t *testing.T, w controller.WorkloadKind, ns, name string, optIn bool, spec func(*corev1.PodSpec)) client.Object {
	t.Helper()
	labels := map[string]string{"app": name}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}
	spec(&tpl.Spec)
	meta := metav1.ObjectMeta{Name: name, Namespace: ns}
	if optIn {
		meta.Labels = map[string]string{controller.OptIn: "true"}
	}
	sel := &metav1.LabelSelector{MatchLabels: labels}
	var obj client.Object
	switch w.Kind {
	case "Deployment":
		obj = &appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: tpl}}
	case "StatefulSet":
		obj = &appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{Replicas: ptr.To[int32](0), Selector: sel, Template: tpl}}
	case "DaemonSet":
		obj = &appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Selector: sel, Template: tpl}}
	case "Rollout":
		obj = &controller.Rollout{ObjectMeta: meta, Spec: controller.RolloutSpec{Template: tpl}}
	case "CronJob":
		tpl.Spec.RestartPolicy = corev1.RestartPolicyNever
		obj = &batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "0 0 1 1 *", Suspend: ptr.To(true),
			JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}}
	}
	if err := env.Client.Create(context.Background(), obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// get reads a workload live.
func get(t *testing.T, w controller.WorkloadKind, ns, name string) client.Object {
	t.Helper()
	var obj client.Object
	switch w.Kind {
	case "Deployment":
		obj = &appsv1.Deployment{}
	case "StatefulSet":
		obj = &appsv1.StatefulSet{}
	case "DaemonSet":
		obj = &appsv1.DaemonSet{}
	case "CronJob":
		obj = &batchv1.CronJob{}
	case "Rollout":
		obj = &controller.Rollout{}
	}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, obj); err != nil {
		t.Fatal(err)
	}
	return obj
}

// cached is what the reloader's cache holds of obj.
func cached(t *testing.T, obj client.Object) client.Object {
	t.Helper()
	c, err := controller.Cached(obj)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// template is a workload's Pod template, as the API serves it.
func template(t *testing.T, obj client.Object) *corev1.PodTemplateSpec {
	t.Helper()
	switch o := obj.(type) {
	case *appsv1.Deployment:
		return &o.Spec.Template
	case *appsv1.StatefulSet:
		return &o.Spec.Template
	case *appsv1.DaemonSet:
		return &o.Spec.Template
	case *batchv1.CronJob:
		return &o.Spec.JobTemplate.Spec.Template
	case *controller.Rollout:
		return &o.Spec.Template
	}
	t.Fatalf("no Pod template in %T", obj)
	return nil
}

// digestKey is the installation's digest key, which the reloader created on its first start.
func digestKey(t *testing.T) []byte {
	t.Helper()
	s := &corev1.Secret{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: testenv.Namespace, Name: controller.KeySecret}, s); err != nil {
		t.Fatal(err)
	}
	return s.Data["key"]
}

// want is the template digest the reloader must write for a workload: from the live sources,
// projected as its cache projects them.
func want(t *testing.T, w controller.WorkloadKind, obj client.Object) string {
	t.Helper()
	refs, _ := controller.WorkloadRefs(obj) // an entry that names no source is left out
	return controller.Combined(controller.Digests(digestKey(t), refs, func(r controller.Ref) client.Object {
		var src client.Object = &corev1.ConfigMap{}
		if r.Kind == controller.Secret {
			src = &corev1.Secret{}
		}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: obj.GetNamespace(), Name: r.Name}, src); err != nil {
			return nil
		}
		p, err := controller.Cached(src)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}))
}

// baselined waits until the reloader recorded what it saw on the workload's metadata, and
// checks it did not touch the Pod template. (A Deployment's generation does move: kube-apiserver
// bumps it on an annotation change too, as it copies them to the ReplicaSet — no new ReplicaSet.)
func baselined(t *testing.T, w controller.WorkloadKind, created client.Object) client.Object {
	t.Helper()
	var obj client.Object
	testenv.Eventually(t, created.GetName()+" baseline", func() error {
		obj = get(t, w, created.GetNamespace(), created.GetName())
		if obj.GetAnnotations()[controller.DigestsAnnotation] == "" {
			return fmt.Errorf("no %s yet", controller.DigestsAnnotation)
		}
		return nil
	})
	if d := cmp.Diff(template(t, created), template(t, obj)); d != "" {
		t.Errorf("%s %s: the reloader's first sight changed the Pod template (-before +after):\n%s", w.Kind, created.GetName(), d)
	}
	return obj
}

// rolled waits until the workload's template digest is the digest of its sources' current data,
// and returns how many writes the reloader made since before (each of its writes after the
// baseline is a rollout: template and metadata in one request, one generation).
func rolled(t *testing.T, w controller.WorkloadKind, before client.Object) (client.Object, int64) {
	t.Helper()
	var obj client.Object
	testenv.Eventually(t, before.GetName()+" rolled", func() error {
		obj = get(t, w, before.GetNamespace(), before.GetName())
		got, wanted := template(t, obj).Annotations[digest.Annotation], want(t, w, obj)
		if got != wanted {
			return fmt.Errorf("template digest %q, want %q (seen %q, gen %d)", got, wanted, obj.GetAnnotations()[controller.DigestsAnnotation], obj.GetGeneration())
		}
		return nil
	})
	return obj, obj.GetGeneration() - before.GetGeneration()
}

var forms = map[string]func(controller.Kind, string) func(*corev1.PodSpec){
	"volume": func(k controller.Kind, n string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			src := corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: n}}}
			if k == controller.Secret {
				src = corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: n}}
			}
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: src}}
		}
	},
	"projected": func(k controller.Kind, n string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			p := corev1.VolumeProjection{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: n}}}
			if k == controller.Secret {
				p = corev1.VolumeProjection{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: n}}}
			}
			s.Volumes = []corev1.Volume{{Name: "v", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{p}}}}}
		}
	},
	"envfrom": func(k controller.Kind, n string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) { s.Containers[0].EnvFrom = []corev1.EnvFromSource{envFrom(k, n)} }
	},
	"keyref": func(k controller.Kind, n string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			v := &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: n}, Key: "k"}}
			if k == controller.Secret {
				v = &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: n}, Key: "k"}}
			}
			s.Containers[0].Env = []corev1.EnvVar{{Name: "X", ValueFrom: v}}
		}
	},
	"init": func(k controller.Kind, n string) func(*corev1.PodSpec) {
		return func(s *corev1.PodSpec) {
			s.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", EnvFrom: []corev1.EnvFromSource{envFrom(k, n)}}}
		}
	},
}

func envFrom(k controller.Kind, n string) corev1.EnvFromSource {
	if k == controller.Secret {
		return corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: n}}}
	}
	return corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: n}}}
}

var kinds = []controller.Kind{controller.ConfigMap, controller.Secret}

// Every workload kind × source kind × reference form: the first sight writes the baseline and not
// the template; a data change rolls (one template change, the digest of the new data).
func TestEveryReferenceForm(t *testing.T) {
	ns := env.Namespace(t)
	start(t, defaults)
	type item struct {
		w      controller.WorkloadKind
		kind   controller.Kind
		name   string
		source string
		obj    client.Object
	}
	var items []item
	for _, w := range controller.Workloads {
		for _, k := range kinds {
			for form, spec := range forms {
				it := item{w: w, kind: k, name: strings.ToLower(fmt.Sprintf("%s-%s-%s", w.Kind, k, form))}
				it.source = it.name + "-src"
				source(t, ns, k, it.source, map[string]string{"k": "v1"})
				it.obj = workload(t, w, ns, it.name, true, spec(k, it.source))
				items = append(items, it)
			}
		}
	}
	for i, it := range items {
		items[i].obj = baselined(t, it.w, it.obj)
		setData(t, ns, it.kind, it.source, "k", "v2")
	}
	for _, it := range items {
		if _, n := rolled(t, it.w, it.obj); n != 1 {
			t.Errorf("%s: %d writes after one data change, want 1", it.name, n)
		}
	}
}

// Starting over existing opted-in workloads changes no template; one data change then changes
// exactly one, once.
func TestStartingRollsNothing(t *testing.T) {
	ns := env.Namespace(t)
	d := controller.Workloads[0]
	webs := make([]client.Object, 10)
	for i := range webs {
		source(t, ns, controller.ConfigMap, fmt.Sprintf("cm-%d", i), map[string]string{"k": "v"})
		webs[i] = workload(t, d, ns, fmt.Sprintf("web-%d", i), true, forms["envfrom"](controller.ConfigMap, fmt.Sprintf("cm-%d", i)))
	}
	// One stamped by the previous version of the reloader (a digest in its template): kept as is.
	old := workload(t, d, ns, "old", true, func(s *corev1.PodSpec) {
		forms["volume"](controller.ConfigMap, "cm-0")(s)
	})
	oldDigest := "0123456789abcdef"
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		o := get(t, d, ns, "old").(*appsv1.Deployment)
		o.Spec.Template.Annotations = map[string]string{digest.Annotation: oldDigest}
		return env.Client.Update(context.Background(), o)
	})
	if err != nil {
		t.Fatal(err)
	}
	start(t, defaults)
	for i := range webs {
		webs[i] = baselined(t, d, webs[i])
	}
	stamped := get(t, d, ns, old.GetName())
	if stamped.GetAnnotations()[controller.DigestsAnnotation] == "" { // created first: baselined by now
		baselined(t, d, stamped)
	}
	if o := get(t, d, ns, old.GetName()).(*appsv1.Deployment); o.Spec.Template.Annotations[digest.Annotation] != oldDigest {
		t.Errorf("the stamped Deployment's template digest %q, want %q kept", o.Spec.Template.Annotations[digest.Annotation], oldDigest)
	}
	setData(t, ns, controller.ConfigMap, "cm-3", "k", "changed")
	rolled(t, d, webs[3])
	for i, web := range webs {
		n := get(t, d, ns, web.GetName()).GetGeneration() - web.GetGeneration()
		if (i == 3 && n != 1) || (i != 3 && n != 0) {
			t.Errorf("web-%d: %d writes after cm-3 changed", i, n)
		}
	}
}

func TestOptionalMissingSource(t *testing.T) {
	ns := env.Namespace(t)
	start(t, defaults)
	d := controller.Workloads[0]
	opt := workload(t, d, ns, "opt", true, func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{{SecretRef: &corev1.SecretEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "later"}, Optional: ptr.To(true)}}}
	})
	opt = baselined(t, d, opt)
	source(t, ns, controller.Secret, "later", map[string]string{"k": "v"})
	if _, n := rolled(t, d, opt); n != 1 {
		t.Errorf("%d writes, want 1", n)
	}
}

// A label-only change and a re-creation with the same data cause no write at all.
func TestNoWriteWithoutDataChange(t *testing.T) {
	ns := env.Namespace(t)
	mgr, c := start(t, defaults)
	ctx := context.Background()
	d := controller.Workloads[0]
	source(t, ns, controller.ConfigMap, "settings", map[string]string{"k": "v"})
	before := baselined(t, d, workload(t, d, ns, "calm", true, forms["envfrom"](controller.ConfigMap, "settings")))

	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, cm); err != nil {
		t.Fatal(err)
	}
	cm.Labels = map[string]string{"touched": "yes"}
	if err := env.Client.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	source(t, ns, controller.ConfigMap, "settings", map[string]string{"k": "v"})
	recreated := &controller.Source[corev1.ConfigMap]{}
	testenv.Eventually(t, "the re-created ConfigMap cached", func() error {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "settings"}, recreated); err != nil {
			return err
		}
		if recreated.UID == cm.UID {
			return fmt.Errorf("the old one still")
		}
		return nil
	})
	testenv.WaitCached(t, c, cached(t, before))

	writes := testenv.CountWrites(mgr.GetClient())
	recorded := events.NewFakeRecorder(10)
	r := &controller.Reconciler{Workload: d, Cache: c, Client: writes, Recorder: recorded, Key: digestKey(t)}
	if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(before)}); err != nil {
		t.Fatal(err)
	}
	if n := writes.N(); n != 0 {
		t.Fatalf("%d writes, want 0", n)
	}
	if n := len(recorded.Events); n != 0 {
		t.Fatalf("%d events without a rollout, want 0", n)
	}
	if after := get(t, d, ns, "calm"); after.GetResourceVersion() != before.GetResourceVersion() {
		t.Fatalf("written: resourceVersion %s -> %s", before.GetResourceVersion(), after.GetResourceVersion())
	}
}

// A change of references is the template's own edit: the reloader records the new baseline and
// does not change the template again; with no reference left its metadata annotation goes.
func TestReferenceChangeIsNoRollout(t *testing.T) {
	ns := env.Namespace(t)
	start(t, defaults)
	d := controller.Workloads[0]
	source(t, ns, controller.ConfigMap, "a", map[string]string{"k": "1"})
	source(t, ns, controller.Secret, "b", map[string]string{"k": "2"})
	two := baselined(t, d, workload(t, d, ns, "two", true, func(s *corev1.PodSpec) {
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{envFrom(controller.ConfigMap, "a"), envFrom(controller.Secret, "b")}
	}))
	b0 := recordOf(t, two, "secret/b")
	setData(t, ns, controller.Secret, "b", "k", "3")
	two, _ = rolled(t, d, two)
	rolledDigest := template(t, two).Annotations[digest.Annotation]
	env.WaitForEvent(t, ns, "two", corev1.EventTypeNormal, controller.ReasonRollingOut,
		fmt.Sprintf("rolling out for changed data of secret/b (%s → %s; keys k)", b0, recordOf(t, two, "secret/b")))
	edit := func(from ...corev1.EnvFromSource) {
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
			o := get(t, d, ns, "two").(*appsv1.Deployment)
			o.Spec.Template.Spec.Containers[0].EnvFrom = from
			return env.Client.Update(context.Background(), o)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	edit(envFrom(controller.Secret, "b")) // generation 3: the user's edit
	testenv.Eventually(t, "the new baseline", func() error {
		if got := get(t, d, ns, "two").GetAnnotations()[controller.DigestsAnnotation]; !strings.HasPrefix(got, "secret/b=") || strings.Contains(got, ",") {
			return fmt.Errorf("%s = %q", controller.DigestsAnnotation, got)
		}
		return nil
	})
	edit() // generation 4
	testenv.Eventually(t, "the baseline removed", func() error {
		if _, ok := get(t, d, ns, "two").GetAnnotations()[controller.DigestsAnnotation]; ok {
			return fmt.Errorf("%s still there", controller.DigestsAnnotation)
		}
		return nil
	})
	if got := template(t, get(t, d, ns, "two")).Annotations[digest.Annotation]; got != rolledDigest {
		t.Errorf("the template digest changed from %q to %q without a data change", rolledDigest, got)
	}
}

func TestSharedSourceAndItsWorkloads(t *testing.T) {
	ns := env.Namespace(t)
	_, c := start(t, defaults)
	ctx := context.Background()
	d, s := controller.Workloads[0], controller.Workloads[1]
	source(t, ns, controller.ConfigMap, "shared", map[string]string{"k": "v1"})
	source(t, ns, controller.Secret, "shared", map[string]string{"k": "v1"}) // same name, other kind
	one := baselined(t, d, workload(t, d, ns, "one", true, forms["envfrom"](controller.ConfigMap, "shared")))
	two := baselined(t, s, workload(t, s, ns, "two", true, forms["volume"](controller.ConfigMap, "shared")))
	secretUser := baselined(t, d, workload(t, d, ns, "secret-user", true, forms["envfrom"](controller.Secret, "shared")))
	manual := workload(t, d, ns, "not-opted-in", false, forms["envfrom"](controller.ConfigMap, "shared"))

	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "shared", Namespace: ns}}
	var got []string
	for _, w := range []controller.WorkloadKind{d, s} {
		for _, req := range controller.MapSourceToWorkloads(c, w, controller.ConfigMap)(ctx, cm) {
			got = append(got, w.Kind+"/"+req.Name)
		}
	}
	if fmt.Sprint(got) != "[Deployment/one StatefulSet/two]" {
		t.Fatalf("ConfigMap shared maps to %v, want [Deployment/one StatefulSet/two]", got)
	}
	setData(t, ns, controller.ConfigMap, "shared", "k", "v2")
	rolled(t, d, one)
	rolled(t, s, two)
	if after := get(t, d, ns, "secret-user"); after.GetResourceVersion() != secretUser.GetResourceVersion() {
		t.Errorf("the Secret's user was written for the ConfigMap of the same name")
	}
	if after := get(t, d, ns, manual.GetName()); after.GetResourceVersion() != manual.GetResourceVersion() {
		t.Fatal("a Deployment that did not opt in was written")
	}
}

// 50 updates to one ConfigMap as fast as the API server takes them: the first rolls at once, the
// rest wait for the coalescing window, so the template changes at most once per window the burst
// spans, plus the first — never once per update — and ends with the digest of the final data.
func TestBurstIsCoalesced(t *testing.T) {
	ns := env.Namespace(t)
	start(t, defaults)
	d := controller.Workloads[0]
	source(t, ns, controller.ConfigMap, "hot", map[string]string{"k": "0"})
	web := baselined(t, d, workload(t, d, ns, "web", true, forms["envfrom"](controller.ConfigMap, "hot")))
	began := time.Now()
	for i := 1; i <= 50; i++ {
		setData(t, ns, controller.ConfigMap, "hot", "k", fmt.Sprint(i))
	}
	spanned := time.Since(began)
	_, n := rolled(t, d, web)
	changes := int(n)
	bound := 2 + int(spanned/controller.DefaultCoalesceWindow)
	t.Logf("50 updates in %s: %d template changes (bound %d)", spanned.Round(time.Millisecond), changes, bound)
	if changes > bound || changes < 1 {
		t.Errorf("%d template changes for 50 updates in %s, want 1..%d", changes, spanned, bound)
	}
}

// The reloader's cache holds no value of a ConfigMap or Secret, and no more of a workload than
// its references: listed whole and searched for the values.
func TestCacheHoldsNoValues(t *testing.T) {
	ns := env.Namespace(t)
	_, c := start(t, defaults)
	ctx := context.Background()
	value := "v@lue-" + ns
	source(t, ns, controller.ConfigMap, "cm", map[string]string{"k": value})
	source(t, ns, controller.Secret, "secret", map[string]string{"k": value})
	baselined(t, controller.Workloads[0], workload(t, controller.Workloads[0], ns, "web", true, func(s *corev1.PodSpec) {
		s.Containers[0].Image = "registry.example/" + value
		s.Containers[0].EnvFrom = []corev1.EnvFromSource{envFrom(controller.ConfigMap, "cm"), envFrom(controller.Secret, "secret")}
	}))
	lists := []client.ObjectList{&controller.SourceList[corev1.ConfigMap]{}, &controller.SourceList[corev1.Secret]{}, &controller.WorkloadList[appsv1.Deployment]{}}
	for _, l := range lists {
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), value) || !strings.Contains(string(b), `"namespace":"`+ns+`"`) {
			t.Errorf("%T in the reloader's cache holds the value (or nothing of the namespace): %s", l, b)
		}
	}
	// The reloader's own cache watches what the manager's watches (--watch-namespaces).
	source(t, env.Namespace(t), controller.ConfigMap, "elsewhere", map[string]string{"k": "v"})
	_, scoped := start(t, defaults, ns)
	all := &controller.SourceList[corev1.ConfigMap]{}
	if err := scoped.List(ctx, all); err != nil {
		t.Fatal(err)
	}
	for _, cm := range all.Items {
		if cm.Namespace != ns {
			t.Fatalf("a cache scoped to %s holds %s/%s", ns, cm.Namespace, cm.Name)
		}
	}
	// The baseline: the same check fails on a cache of whole objects.
	var whole cache.Cache
	env.ManagerWith(t, func(mgr manager.Manager) (err error) {
		whole, err = app.OwnCache(mgr, "whole", nil, func(o *cache.Options) { app.CacheByObject(o, &corev1.Secret{}, cache.ByObject{}) })
		return err
	})
	if !whole.WaitForCacheSync(testenv.Bounded(t)) {
		t.Fatal("the whole-object cache did not sync")
	}
	l := &corev1.SecretList{}
	if err := whole.List(ctx, l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	if b, _ := json.Marshal(l); !strings.Contains(string(b), value) && !strings.Contains(string(b), "dkBsdWUt") {
		t.Errorf("a whole-object cache should hold the Secret's value (base64 in JSON): %s", b)
	}
}

// annotate sets (or, with v "", removes) an annotation on an object, live.
func annotate(t *testing.T, obj client.Object, key, v string) {
	t.Helper()
	annotateAll(t, obj, map[string]string{key: v})
}

// annotateAll sets (or with "" removes) several annotations in one write.
func annotateAll(t *testing.T, obj client.Object, set map[string]string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := env.Client.Get(context.Background(), client.ObjectKeyFromObject(obj), obj); err != nil {
			return err
		}
		a := obj.GetAnnotations()
		if a == nil {
			a = map[string]string{}
		}
		for key, v := range set {
			if v == "" {
				delete(a, key)
			} else {
				a[key] = v
			}
		}
		obj.SetAnnotations(a)
		return env.Client.Update(context.Background(), obj)
	})
	if err != nil {
		t.Fatal(err)
	}
}

// recorded waits until the workload's record (DigestsAnnotation) has entry for key, and returns it.
func recorded(t *testing.T, w controller.WorkloadKind, obj client.Object, key, entry string) client.Object {
	t.Helper()
	testenv.Eventually(t, obj.GetName()+" records "+key+"="+entry, func() error {
		obj = get(t, w, obj.GetNamespace(), obj.GetName())
		if !strings.Contains(obj.GetAnnotations()[controller.DigestsAnnotation]+",", key+"="+entry+",") {
			return fmt.Errorf("record %q", obj.GetAnnotations()[controller.DigestsAnnotation])
		}
		return nil
	})
	return obj
}

// A source annotated reloader-ignore never rolls anything: its change is not rolled (the change of
// the other source after it is, alone), and neither setting nor removing the annotation rolls —
// after its removal it counts again. (StatefulSets: their generation moves only with the template.)
func TestIgnoredSourceNeverRolls(t *testing.T) {
	ns := env.Namespace(t)
	start(t, controller.Options{})
	s := controller.Workloads[1]
	source(t, ns, controller.ConfigMap, "noisy", map[string]string{"k": "v"})
	source(t, ns, controller.ConfigMap, "real", map[string]string{"k": "v"})
	noisy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "noisy", Namespace: ns}}
	annotate(t, noisy, controller.IgnoreAnnotation, "true")
	app := workload(t, s, ns, "app", true, func(p *corev1.PodSpec) {
		p.Containers[0].EnvFrom = []corev1.EnvFromSource{envFrom(controller.ConfigMap, "noisy"), envFrom(controller.ConfigMap, "real")}
	})
	app = recorded(t, s, baselined(t, s, app), "configmap/noisy", controller.Ignored)
	r0 := recordOf(t, app, "configmap/real")
	setData(t, ns, controller.ConfigMap, "noisy", "k", "v2")
	setData(t, ns, controller.ConfigMap, "real", "k", "v2")
	after, n := rolled(t, s, app)
	if n != 1 {
		t.Errorf("%d template changes for one counted change after an ignored one, want 1", n)
	}
	env.WaitForEvent(t, ns, "app", corev1.EventTypeNormal, controller.ReasonRollingOut,
		fmt.Sprintf("rolling out for changed data of configmap/real (%s → %s; keys k)", r0, recordOf(t, after, "configmap/real")))
	annotate(t, noisy, controller.IgnoreAnnotation, "")
	counted := rebaselined(t, s, after, "configmap/noisy", "removing the ignore annotation")
	setData(t, ns, controller.ConfigMap, "noisy", "k", "v3")
	if _, n := rolled(t, s, counted); n != 1 {
		t.Errorf("%d template changes for a change once counted again, want 1", n)
	}
}

// rebaselined waits until obj records the current digest (digestOf) under entry ("kind/name" and
// the keys read, Ref.Entry), and fails if that took a rollout (why says what led to it).
func rebaselined(t *testing.T, w controller.WorkloadKind, obj client.Object, entry, why string) client.Object {
	t.Helper()
	key, _, _ := strings.Cut(entry, ":")
	after := recorded(t, w, obj, entry, digestOf(t, w, obj, key))
	if after.GetGeneration() != obj.GetGeneration() {
		t.Errorf("%s rolled: generation %d → %d", why, obj.GetGeneration(), after.GetGeneration())
	}
	return after
}

// digestOf is the record's entry for a source the workload references, from the live source.
func digestOf(t *testing.T, w controller.WorkloadKind, obj client.Object, key string) string {
	t.Helper()
	refs, err := controller.WorkloadRefs(obj)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range refs {
		if r.Key() != key {
			continue
		}
		var src client.Object = &corev1.ConfigMap{}
		if r.Kind == controller.Secret {
			src = &corev1.Secret{}
		}
		if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: obj.GetNamespace(), Name: r.Name}, src); err != nil {
			t.Fatal(err)
		}
		p, err := controller.Cached(src)
		if err != nil {
			t.Fatal(err)
		}
		return controller.Digests(digestKey(t), []controller.Ref{r}, func(controller.Ref) client.Object { return p })[0][:16]
	}
	t.Fatalf("%s does not reference %s", obj.GetName(), key)
	return ""
}

// A paused workload is not rolled — the record is left as it was, so the changes made meanwhile
// roll once when the pause ends, also through a restart of the reloader. A pause until a time ends
// by itself; a time that does not parse holds rollouts, with a Warning event.
func TestPauseRollsOnceWhenItEnds(t *testing.T) {
	ns := env.Namespace(t)
	s := controller.Workloads[1]
	source(t, ns, controller.ConfigMap, "cfg", map[string]string{"k": "v"})
	app := workload(t, s, ns, "app", true, forms["envfrom"](controller.ConfigMap, "cfg"))
	t.Run("paused, two changes", func(t *testing.T) {
		_, c := start(t, controller.Options{}, ns)
		app = baselined(t, s, app)
		annotate(t, app, controller.PausedAnnotation, "true")
		testenv.WaitCached(t, c, cached(t, app)) // else the change may meet the unpaused workload
		setData(t, ns, controller.ConfigMap, "cfg", "k", "v2")
		setData(t, ns, controller.ConfigMap, "cfg", "k", "v3")
	}) // the reloader stops here
	mgr, c := start(t, controller.Options{}, ns)
	held := get(t, s, ns, "app")
	testenv.WaitCached(t, c, cached(t, held))
	testenv.Eventually(t, "the last change cached", func() error {
		cm := &controller.Source[corev1.ConfigMap]{}
		if err := c.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cfg"}, cm); err != nil {
			return err
		}
		if digestOf(t, s, held, "configmap/cfg") != controller.Digests(digestKey(t), []controller.Ref{{Kind: controller.ConfigMap, Name: "cfg"}}, func(controller.Ref) client.Object { return cm })[0][:16] {
			return fmt.Errorf("not yet")
		}
		return nil
	})
	writes := testenv.CountWrites(mgr.GetClient())
	r := &controller.Reconciler{Workload: s, Cache: c, Client: writes, Recorder: events.NewFakeRecorder(10), Key: digestKey(t)}
	if res, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(held)}); err != nil || writes.N() != 0 || res.RequeueAfter != 0 {
		t.Fatalf("paused: %v, %v, %d writes; want no write, no requeue", res, err, writes.N())
	}
	if held.GetGeneration() != app.GetGeneration() {
		t.Fatalf("rolled while paused: generation %d → %d", app.GetGeneration(), held.GetGeneration())
	}
	annotate(t, held, controller.PausedAnnotation, "")
	after, n := rolled(t, s, held)
	if n != 1 {
		t.Errorf("%d template changes when the pause ended, want 1", n)
	}

	annotate(t, after, controller.PausedUntilAnnotation, "tomorrow")
	setData(t, ns, controller.ConfigMap, "cfg", "k", "v4")
	env.WaitForEvent(t, ns, "app", corev1.EventTypeWarning, controller.ReasonInvalidPause, "")
	annotate(t, after, controller.PausedUntilAnnotation, time.Now().Add(2*time.Second).UTC().Format(time.RFC3339))
	if _, n := rolled(t, s, after); n != 1 {
		t.Errorf("%d template changes when the pause's time passed, want 1", n)
	}
}

// With --max-rollouts-per-second, a change to a source 200 workloads read rolls every one of them,
// each once.
func TestRolloutRateLimit(t *testing.T) {
	ns := env.Namespace(t)
	start(t, controller.Options{MaxRolloutsPerSecond: 20}, ns)
	s := controller.Workloads[1]
	source(t, ns, controller.ConfigMap, "shared", map[string]string{"k": "v"})
	apps := make([]client.Object, 200)
	for i := range apps {
		apps[i] = workload(t, s, ns, fmt.Sprintf("app-%03d", i), true, forms["envfrom"](controller.ConfigMap, "shared"))
	}
	for i := range apps {
		apps[i] = baselined(t, s, apps[i])
	}
	began := time.Now()
	setData(t, ns, controller.ConfigMap, "shared", "k", "v2")
	for _, a := range apps {
		if _, n := rolled(t, s, a); n != 1 {
			t.Errorf("%s: %d template changes, want 1", a.GetName(), n)
		}
	}
	t.Logf("200 rollouts at 20/s took %s", time.Since(began).Round(100*time.Millisecond))
}

// Only what a workload reads counts: of one ConfigMap and one Secret, each StatefulSet reads key a
// in one form — env valueFrom in a container or an init container, volume items, projected items
// — or everything (envFrom with a prefix). Changing key b rolls only the whole readers; changing
// key a rolls every one, once.
func TestOnlyReadKeysCount(t *testing.T) {
	ns := env.Namespace(t)
	mgr, c := start(t, controller.Options{}, ns)
	s := controller.Workloads[1]
	readA := map[string]func(controller.Kind, string) func(*corev1.PodSpec){
		"env": func(k controller.Kind, n string) func(*corev1.PodSpec) {
			return func(p *corev1.PodSpec) {
				forms["keyref"](k, n)(p)
				p.Containers[0].Env[0].ValueFrom = keyRef(k, n, "a")
			}
		},
		"init": func(k controller.Kind, n string) func(*corev1.PodSpec) {
			return func(p *corev1.PodSpec) {
				p.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Env: []corev1.EnvVar{{Name: "A", ValueFrom: keyRef(k, n, "a")}}}}
			}
		},
		"items": func(k controller.Kind, n string) func(*corev1.PodSpec) {
			return func(p *corev1.PodSpec) {
				forms["volume"](k, n)(p)
				items := []corev1.KeyToPath{{Key: "a", Path: "a"}}
				if v := p.Volumes[0].VolumeSource; v.ConfigMap != nil {
					v.ConfigMap.Items = items
				} else {
					v.Secret.Items = items
				}
			}
		},
		"projected": func(k controller.Kind, n string) func(*corev1.PodSpec) {
			return func(p *corev1.PodSpec) {
				forms["projected"](k, n)(p)
				items := []corev1.KeyToPath{{Key: "a", Path: "a"}}
				if src := p.Volumes[0].Projected.Sources[0]; src.ConfigMap != nil {
					src.ConfigMap.Items = items
				} else {
					src.Secret.Items = items
				}
			}
		},
	}
	whole := func(k controller.Kind, n string) func(*corev1.PodSpec) {
		return func(p *corev1.PodSpec) {
			forms["envfrom"](k, n)(p)
			p.Containers[0].EnvFrom[0].Prefix = "CFG_"
		}
	}
	readers := map[string]client.Object{}
	for _, k := range kinds {
		src := string(k) + "-src"
		source(t, ns, k, src, map[string]string{"a": "1", "b": "1"})
		for form, spec := range readA {
			readers[string(k)+"-"+form] = workload(t, s, ns, string(k)+"-"+form, true, spec(k, src))
		}
		readers[string(k)+"-whole"] = workload(t, s, ns, string(k)+"-whole", true, whole(k, src))
	}
	for name, o := range readers {
		readers[name] = baselined(t, s, o)
	}
	for _, k := range kinds {
		setData(t, ns, k, string(k)+"-src", "b", "2")
	}
	for _, k := range kinds { // the whole readers roll ...
		readers[string(k)+"-whole"], _ = rolled(t, s, readers[string(k)+"-whole"])
	}
	for _, k := range kinds {
		sourceCached(t, c, k, ns, string(k)+"-src")
	}
	writes := testenv.CountWrites(mgr.GetClient())
	for name, o := range readers { // ... and, with that change cached, the others have nothing to write
		if strings.HasSuffix(name, "-whole") {
			continue
		}
		testenv.WaitCached(t, c, cached(t, o))
		r := &controller.Reconciler{Workload: s, Cache: c, Client: writes, Recorder: events.NewFakeRecorder(10), Key: digestKey(t)}
		if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(o)}); err != nil {
			t.Fatal(err)
		}
		if now := get(t, s, ns, name); now.GetGeneration() != o.GetGeneration() {
			t.Errorf("%s rolled for a key it does not read", name)
		}
	}
	if n := writes.N(); n != 0 {
		t.Errorf("%d writes for a key only the whole readers read, want 0", n)
	}
	for _, k := range kinds {
		setData(t, ns, k, string(k)+"-src", "a", "2")
	}
	for name, o := range readers {
		if _, n := rolled(t, s, o); n != 1 {
			t.Errorf("%s: %d template changes for a change of the key it reads, want 1", name, n)
		}
	}
}

// sourceCached waits until c holds the live version of a source.
func sourceCached(t *testing.T, c client.Reader, k controller.Kind, ns, name string) {
	t.Helper()
	var live, cached client.Object = &corev1.ConfigMap{}, &controller.Source[corev1.ConfigMap]{}
	if k == controller.Secret {
		live, cached = &corev1.Secret{}, &controller.Source[corev1.Secret]{}
	}
	key := client.ObjectKey{Namespace: ns, Name: name}
	if err := env.Client.Get(context.Background(), key, live); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, name+" cached", func() error {
		if err := c.Get(context.Background(), key, cached); err != nil {
			return err
		}
		if cached.GetResourceVersion() != live.GetResourceVersion() {
			return fmt.Errorf("cached %s, live %s", cached.GetResourceVersion(), live.GetResourceVersion())
		}
		return nil
	})
}

func keyRef(k controller.Kind, n, key string) *corev1.EnvVarSource {
	if k == controller.Secret {
		return &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: n}, Key: key}}
	}
	return &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: n}, Key: key}}
}

// A record written before only read keys counted (the whole source's digest under its plain name)
// is replaced by the new format's without a rollout.
func TestUpgradeFromWholeSourceRecordRollsNothing(t *testing.T) {
	ns := env.Namespace(t)
	s := controller.Workloads[1]
	source(t, ns, controller.ConfigMap, "cfg", map[string]string{"a": "1", "b": "1"})
	app := workload(t, s, ns, "app", true, func(p *corev1.PodSpec) {
		p.Containers[0].Env = []corev1.EnvVar{{Name: "A", ValueFrom: keyRef(controller.ConfigMap, "cfg", "a")}}
	})
	whole := controller.Ref{Kind: controller.ConfigMap, Name: "cfg"} // as the previous version read it
	cm := &corev1.ConfigMap{}
	if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "cfg"}, cm); err != nil {
		t.Fatal(err)
	}
	p, err := controller.Cached(cm)
	if err != nil {
		t.Fatal(err)
	}
	old := controller.Digests(nil, []controller.Ref{whole}, func(controller.Ref) client.Object { return p })
	annotate(t, app, controller.DigestsAnnotation, whole.Key()+"="+old[0][:16])
	before := get(t, s, ns, "app")
	start(t, controller.Options{}, ns)
	after := recorded(t, s, before, "configmap/cfg:a", digestOf(t, s, before, "configmap/cfg"))
	if after.GetGeneration() != before.GetGeneration() || strings.Contains(after.GetAnnotations()[controller.DigestsAnnotation], "configmap/cfg=") {
		t.Errorf("upgrade: generation %d → %d, record %q", before.GetGeneration(), after.GetGeneration(), after.GetAnnotations()[controller.DigestsAnnotation])
	}
}

// Failover: the leader stops while a standby — its sources started before it leads (warm-up) —
// waits; changes made during the handover are rolled by the new leader, each workload exactly
// once per change: none lost, none twice.
func TestFailoverRollsEachChangeOnce(t *testing.T) {
	ns := env.Namespace(t)
	s := controller.Workloads[1]
	o := app.RunOptions{Options: app.Options{Namespace: testenv.Namespace, WatchNamespaces: []string{ns}}, LeaderElect: true,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
	replica := func() (stop func()) {
		mgr := env.NewManager(t, o)
		if err := controller.Setup(mgr, controller.Options{WatchNamespaces: o.WatchNamespaces}); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- app.Start(ctx, mgr) }()
		var once sync.Once
		stop = func() {
			once.Do(func() {
				cancel()
				if err := <-done; err != nil {
					t.Errorf("replica: %v", err)
				}
			})
		}
		t.Cleanup(stop)
		return stop
	}
	apps := make([]client.Object, 20)
	for i := range apps {
		source(t, ns, controller.ConfigMap, fmt.Sprintf("cfg-%d", i), map[string]string{"k": "0"})
		apps[i] = workload(t, s, ns, fmt.Sprintf("app-%d", i), true, forms["envfrom"](controller.ConfigMap, fmt.Sprintf("cfg-%d", i)))
	}
	stopLeader := replica()
	for i := range apps {
		apps[i] = baselined(t, s, apps[i])
	}
	replica() // the standby, warming up
	change := func(v string) {
		for i := range apps {
			setData(t, ns, controller.ConfigMap, fmt.Sprintf("cfg-%d", i), "k", v)
		}
	}
	change("1")
	for i := range apps {
		if _, n := rolled(t, s, apps[i]); n != 1 {
			t.Fatalf("%s: %d template changes for one change, want 1", apps[i].GetName(), n)
		}
	}
	stopLeader() // releases the Lease
	change("2")  // during the handover
	for _, a := range apps {
		if _, n := rolled(t, s, a); n != 2 {
			t.Errorf("%s: %d template changes for two changes across the failover, want 2", a.GetName(), n)
		}
	}
}

// recordOf is the digest DigestsAnnotation records for the entry key of obj.
func recordOf(t *testing.T, obj client.Object, key string) string {
	t.Helper()
	for _, part := range strings.Split(obj.GetAnnotations()[controller.DigestsAnnotation], ",") {
		if k, d, ok := strings.Cut(part, "="); ok && k == key {
			return d
		}
	}
	t.Fatalf("%s records no %s: %q", obj.GetName(), key, obj.GetAnnotations()[controller.DigestsAnnotation])
	return ""
}

// Every rollout is explained: one Normal event naming the source, its digests before and after
// and the keys whose values changed, were added or were removed (when the reloader saw the change),
// never a value, and one count in kpatterns_reloader_rollouts_total for its kind and namespace. A
// change made while no reloader ran rolls once, its event naming the source and digests alone.
func TestRolloutExplained(t *testing.T) {
	ns := env.Namespace(t)
	d := controller.Workloads[0]
	source(t, ns, controller.ConfigMap, "explained", map[string]string{"a": "first-value", "b": "first-value", "c": "first-value"})
	web := workload(t, d, ns, "web", true, forms["envfrom"](controller.ConfigMap, "explained"))
	t.Run("seen", func(t *testing.T) {
		start(t, defaults, ns)
		web = baselined(t, d, web)
		counted := testutil.ToFloat64(controller.Rollouts.WithLabelValues(d.Kind, ns))
		before := recordOf(t, web, "configmap/explained")
		err := retry.RetryOnConflict(retry.DefaultRetry, func() error { // one update: b changed, c removed, d added
			cm := &corev1.ConfigMap{}
			if err := env.Client.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: "explained"}, cm); err != nil {
				return err
			}
			cm.Data["b"], cm.Data["d"] = "second-value", "second-value"
			delete(cm.Data, "c")
			return env.Client.Update(context.Background(), cm)
		})
		if err != nil {
			t.Fatal(err)
		}
		var n int64
		if web, n = rolled(t, d, web); n != 1 {
			t.Fatalf("%d writes, want 1 rollout", n)
		}
		ev := env.WaitForEvent(t, ns, "web", corev1.EventTypeNormal, controller.ReasonRollingOut,
			fmt.Sprintf("rolling out for changed data of configmap/explained (%s → %s; keys b+c+d)", before, recordOf(t, web, "configmap/explained")))
		if strings.Contains(ev.Message, "value") {
			t.Errorf("the event carries a value: %q", ev.Message)
		}
		if got := testutil.ToFloat64(controller.Rollouts.WithLabelValues(d.Kind, ns)) - counted; got != 1 {
			t.Errorf("kpatterns_reloader_rollouts_total{kind=%q,namespace=%q} rose by %v, want 1", d.Kind, ns, got)
		}
	}) // the reloader stops here
	before := recordOf(t, web, "configmap/explained")
	setData(t, ns, controller.ConfigMap, "explained", "a", "second-value")
	start(t, defaults, ns)
	web, n := rolled(t, d, web)
	if n != 1 {
		t.Fatalf("%d writes for a change made while no reloader ran, want 1 rollout", n)
	}
	env.WaitForEvent(t, ns, "web", corev1.EventTypeNormal, controller.ReasonRollingOut,
		fmt.Sprintf("rolling out for changed data of configmap/explained (%s → %s)", before, recordOf(t, web, "configmap/explained")))
}

// With --with argo-rollouts a Rollout is reloaded through spec.restartAt, and its Pod template
// is left as it is (an edit would start a new revision, with its canary steps): recorded and
// explained as a Deployment is, one write per rollout, each restartAt later than the last.
func TestArgoRollout(t *testing.T) {
	ns := env.Namespace(t)
	o := defaults
	o.ArgoRollouts = true
	start(t, o)
	r := controller.RolloutKind
	source(t, ns, controller.ConfigMap, "canary-config", map[string]string{"k": "1"})
	created := workload(t, r, ns, "canary", true, forms["envfrom"](controller.ConfigMap, "canary-config"))
	canary := baselined(t, r, created).(*controller.Rollout)
	if at := canary.Spec.RestartAt; at != nil {
		t.Fatalf("spec.restartAt %v at first sight, want none: no rollout", at)
	}
	var last time.Time
	for i, value := range []string{"2", "3"} {
		before := recordOf(t, canary, "configmap/canary-config")
		setData(t, ns, controller.ConfigMap, "canary-config", "k", value)
		var got *controller.Rollout
		testenv.Eventually(t, fmt.Sprintf("canary restarted (%d)", i+1), func() error {
			got = get(t, r, ns, "canary").(*controller.Rollout)
			if got.Spec.RestartAt == nil || !got.Spec.RestartAt.After(last) {
				return fmt.Errorf("spec.restartAt %v, want one after %v", got.Spec.RestartAt, last)
			}
			return nil
		})
		if n := got.Generation - canary.Generation; n != 1 {
			t.Errorf("rollout %d: %d spec writes, want 1", i+1, n)
		}
		if d := cmp.Diff(created.(*controller.Rollout).Spec.Template, got.Spec.Template); d != "" {
			t.Errorf("rollout %d changed the Pod template (-before +after):\n%s", i+1, d)
		}
		env.WaitForEvent(t, ns, "canary", corev1.EventTypeNormal, controller.ReasonRollingOut,
			fmt.Sprintf("rolling out for changed data of configmap/canary-config (%s → %s; keys k)", before, recordOf(t, got, "configmap/canary-config")))
		canary, last = got, got.Spec.RestartAt.Time
	}
}

// A required source deleted rolls nothing (the new Pods could not start) and is reported with a
// Warning event; re-created with the data last seen it rolls nothing, with other data once.
func TestDeletedSource(t *testing.T) {
	ns := env.Namespace(t)
	mgr, c := start(t, defaults)
	ctx := context.Background()
	d := controller.Workloads[0]
	source(t, ns, controller.ConfigMap, "fragile", map[string]string{"k": "v"})
	web := baselined(t, d, workload(t, d, ns, "web", true, forms["envfrom"](controller.ConfigMap, "fragile")))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "fragile", Namespace: ns}}
	if err := env.Client.Delete(ctx, cm); err != nil {
		t.Fatal(err)
	}
	env.WaitForEvent(t, ns, "web", corev1.EventTypeWarning, controller.ReasonSourceMissing,
		"required configmap/fragile missing: nothing rolls until it exists (new Pods could not start)")
	if got := get(t, d, ns, "web"); got.GetResourceVersion() != web.GetResourceVersion() {
		t.Fatalf("written while its source was missing: resourceVersion %s -> %s", web.GetResourceVersion(), got.GetResourceVersion())
	}

	source(t, ns, controller.ConfigMap, "fragile", map[string]string{"k": "v"})
	testenv.Eventually(t, "the re-created ConfigMap cached", func() error {
		return c.Get(ctx, client.ObjectKey{Namespace: ns, Name: "fragile"}, &controller.Source[corev1.ConfigMap]{})
	})
	writes := testenv.CountWrites(mgr.GetClient())
	r := &controller.Reconciler{Workload: d, Cache: c, Client: writes, Recorder: events.NewFakeRecorder(10), Key: digestKey(t)}
	if _, err := r.Reconcile(testenv.Bounded(t), reconcile.Request{NamespacedName: client.ObjectKeyFromObject(web)}); err != nil {
		t.Fatal(err)
	}
	if n := writes.N(); n != 0 {
		t.Fatalf("re-created with the same data: %d writes, want 0", n)
	}
	if got := get(t, d, ns, "web"); got.GetResourceVersion() != web.GetResourceVersion() {
		t.Fatalf("re-created with the same data: written, resourceVersion %s -> %s", web.GetResourceVersion(), got.GetResourceVersion())
	}

	setData(t, ns, controller.ConfigMap, "fragile", "k", "other")
	if _, n := rolled(t, d, web); n != 1 {
		t.Errorf("re-created, then changed: %d writes, want 1 rollout", n)
	}
}

// Sources the Pod template does not name count when the workload's SourcesAnnotation names them:
// recorded, only the keys it names, and a change of them rolls once; an entry that names no
// source is reported with a Warning event and the others still count.
func TestSourcesTheTemplateDoesNotName(t *testing.T) {
	ns := env.Namespace(t)
	start(t, defaults)
	d := controller.Workloads[0]
	source(t, ns, controller.ConfigMap, "read-by-api", map[string]string{"level": "info", "other": "x"})
	web := workload(t, d, ns, "web", true, func(*corev1.PodSpec) {}) // no reference in its template
	annotate(t, web, controller.SourcesAnnotation, "configmap/read-by-api:level, bogus/entry")
	testenv.Eventually(t, "web's record of configmap/read-by-api:level", func() error {
		web = get(t, d, ns, "web")
		if r := web.GetAnnotations()[controller.DigestsAnnotation]; !strings.HasPrefix(r, "configmap/read-by-api:level=") || strings.Contains(r, ",") {
			return fmt.Errorf("record %q", r)
		}
		return nil
	})
	env.WaitForEvent(t, ns, "web", corev1.EventTypeWarning, controller.ReasonInvalidSources,
		controller.SourcesAnnotation+`: "bogus/entry": want configmap/<name> or secret/<name>, optionally :<key>+<key>`)
	setData(t, ns, controller.ConfigMap, "read-by-api", "other", "y") // a key it does not name
	setData(t, ns, controller.ConfigMap, "read-by-api", "level", "debug")
	if _, n := rolled(t, d, web); n != 1 {
		t.Errorf("%d writes after the named key changed (and one it does not name), want 1 rollout", n)
	}
}

// client-go transforms the objects that exist when an informer starts twice: the reflector's
// watch-list hands its transformed objects to the FIFO's Replace, which transforms them again.
// Project returns its own projection unchanged (a projected source holds no data, which is what
// it digests), so the cache holds what one projection of the live object is. If client-go stops
// transforming twice, the first check fails: this comment and Project's must say so then.
func TestTransformOfExistingObjects(t *testing.T) {
	ns := env.Namespace(t)
	for i := range 3 {
		source(t, ns, controller.ConfigMap, fmt.Sprintf("cm-%d", i), map[string]string{"k": fmt.Sprintf("v%d", i)})
	}
	var mu sync.Mutex
	calls := map[string]int{} // uid/resourceVersion → transforms
	transform := func(obj any) (any, error) {
		if m, ok := obj.(metav1.Object); ok {
			mu.Lock()
			calls[string(m.GetUID())+"/"+m.GetResourceVersion()]++
			mu.Unlock()
		}
		return controller.Project(obj)
	}
	cfg := rest.CopyConfig(env.Admin)
	cfg.ContentType = runtime.ContentTypeJSON // as app.OwnCache reads for a scheme of its own
	c, err := cache.New(cfg, cache.Options{Scheme: controller.CacheScheme(nil), DefaultNamespaces: map[string]cache.Config{ns: {}}, DefaultTransform: transform})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetInformer(t.Context(), &controller.Source[corev1.ConfigMap]{}); err != nil {
		t.Fatal(err)
	}
	go func() { _ = c.Start(t.Context()) }()
	if !c.WaitForCacheSync(testenv.Bounded(t)) {
		t.Fatal("cache did not sync")
	}
	mu.Lock()
	twice := 0
	for _, n := range calls {
		if n > 1 {
			twice++
		}
	}
	mu.Unlock()
	if twice == 0 {
		t.Errorf("no existing object was transformed twice (%v): client-go changed: Project's comment says it does", calls)
	}
	for i := range 3 {
		live, cached := &corev1.ConfigMap{}, &controller.Source[corev1.ConfigMap]{}
		key := client.ObjectKey{Namespace: ns, Name: fmt.Sprintf("cm-%d", i)}
		if err := errors.Join(env.Client.Get(context.Background(), key, live), c.Get(context.Background(), key, cached)); err != nil {
			t.Fatal(err)
		}
		once, err := controller.Cached(live)
		if err != nil {
			t.Fatal(err)
		}
		if got := once.(*controller.Source[corev1.ConfigMap]).Values; got == "" || got != cached.Values {
			t.Errorf("%s: the cache holds %q, not one projection of the live object %q", key.Name, cached.Values, got)
		}
	}
}

// With a NamespaceSelector the reloader caches and rolls only in the namespaces whose labels
// match, following their labels: a namespace that comes to match is baselined and rolled; one
// that stops matching is told so (a NotSelected event on it) and rolls nothing more.
func TestNamespaceSelector(t *testing.T) {
	label := "kpatterns.test/reload-" + utilrand.String(6) // no other test's namespace matches
	o := defaults
	o.NamespaceSelector = label + "=yes"
	o.CoalesceWindow = 0 // a second rollout of web in out is not held: were it made, the test would see it
	in, out := env.Namespace(t), env.Namespace(t)
	labelNamespace(t, in, label, "yes")
	start(t, o)
	d := controller.Workloads[0]
	for _, ns := range []string{in, out} {
		source(t, ns, controller.ConfigMap, "conf", map[string]string{"k": "v"})
	}
	webOut := workload(t, d, out, "web", true, forms["envfrom"](controller.ConfigMap, "conf"))
	webIn := baselined(t, d, workload(t, d, in, "web", true, forms["envfrom"](controller.ConfigMap, "conf")))
	if r := get(t, d, out, "web").GetAnnotations()[controller.DigestsAnnotation]; r != "" {
		t.Fatalf("a workload of a namespace not selected was recorded: %q", r)
	}

	labelNamespace(t, out, label, "yes")
	webOut = baselined(t, d, webOut)
	setData(t, out, controller.ConfigMap, "conf", "k", "v2")
	if webOut, n := rolled(t, d, webOut); n != 1 {
		t.Errorf("selected later, then changed: %d writes, want 1 rollout", n)
	} else {
		labelNamespace(t, out, label, "no")
		env.WaitForEvent(t, metav1.NamespaceDefault, out, corev1.EventTypeNormal, controller.ReasonNotSelected, "")
		setData(t, out, controller.ConfigMap, "conf", "k", "v3")
		setData(t, in, controller.ConfigMap, "conf", "k", "v2")
		if _, n := rolled(t, d, webIn); n != 1 {
			t.Errorf("selected throughout, changed: %d writes, want 1 rollout", n)
		}
		if got := get(t, d, out, "web"); got.GetResourceVersion() != webOut.GetResourceVersion() {
			t.Errorf("written after its namespace stopped matching: resourceVersion %s -> %s", webOut.GetResourceVersion(), got.GetResourceVersion())
		}
	}
}

// --namespace-selector without --with namespace-selector is refused before anything starts: the
// Namespaces it reads would be forbidden.
func TestNamespaceSelectorNeedsTheFeature(t *testing.T) {
	err := run(context.Background(), env.Admin, app.RunOptions{}, controller.Options{NamespaceSelector: "team=a"})
	if err == nil || !strings.Contains(err.Error(), "needs --with namespace-selector") {
		t.Errorf("run --namespace-selector without the feature: %v", err)
	}
}

// labelNamespace sets one label of a namespace.
func labelNamespace(t *testing.T, ns, key, value string) {
	t.Helper()
	patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%q}}}`, key, value)
	if err := env.Client.Patch(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
}
