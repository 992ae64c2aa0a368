// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sync/errgroup"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	childsetv1alpha1 "github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	conditionalv1alpha1 "github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	finalizersv1alpha1 "github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	lifespan "github.com/kpatterns/kpatterns/lifespan/controller"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	widgetv1alpha1 "github.com/kpatterns/kpatterns/widget/api/v1alpha1"
)

// benchCase is one controller pattern under `go tool task bench`: how to make its i-th object
// (with whatever it reads) and how to tell it has converged on n of them.
type benchCase struct {
	pattern   string
	create    func(ctx context.Context, c client.Client, ns string, i int) error
	converged func(ctx context.Context, c client.Client, ns string, n int) (bool, error)
	note      string
	// repairs is the write requests per object that a restart costs by design (0: none may).
	repairs int
	// grow is the growth's create, where it differs from create.
	grow func(ctx context.Context, c client.Client, ns string, i int) error
	// finalizes: its objects carry its finalizer, so they are deleted while it still runs (a
	// stopped pattern leaves them undeletable, and a later run of it finds them).
	finalizes bool
	// kind is the pattern's custom resource list, if any: when the restart writes, the first
	// object whose status changed is logged.
	kind schema.GroupVersionKind
	// args are the pattern's own flags of run in the bench.
	args []string
	// hooks is the write requests each start costs by design, whatever the objects (0: none).
	hooks int
	// members are the patterns composed into this one: their RBAC is its RBAC.
	members []string
	// external are the log messages of the pattern's writes to an external system: none may
	// follow a restart.
	external []string
	// alone: its growth is measured with kube-controller-manager stopped, which would make a
	// ReplicaSet per Deployment and an EndpointSlice per Service of its 10,000 objects' children.
	alone bool
}

var benchCases = []benchCase{
	{pattern: "mirror",
		create: func(ctx context.Context, c client.Client, ns string, i int) error {
			return c.Create(ctx, mirrorSource(ns, i))
		},
		converged: func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
			list := &corev1.ConfigMapList{}
			err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{mirror.Label: mirror.Child})
			return err == nil && len(list.Items) == n, err
		}},
	{pattern: "widget",
		create: func(ctx context.Context, c client.Client, ns string, i int) error {
			return c.Create(ctx, &widgetv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("w-%04d", i), Namespace: ns},
				Spec: widgetv1alpha1.WidgetSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](0), Config: map[string]string{"i": strconv.Itoa(i)}}})
		},
		converged: observed(widgetv1alpha1.GroupVersion.WithKind("WidgetList")),
		alone:     true},
	{pattern: "conditional",
		create: func(ctx context.Context, c client.Client, ns string, i int) error {
			return c.Create(ctx, &conditionalv1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p-%04d", i), Namespace: ns},
				Spec: conditionalv1alpha1.ConfigProfileSpec{Image: "nginx:1.27", Suspended: i%2 == 0, Settings: map[string]string{"i": strconv.Itoa(i)}}})
		},
		kind:      conditionalv1alpha1.GroupVersion.WithKind("ConfigProfileList"),
		converged: observed(conditionalv1alpha1.GroupVersion.WithKind("ConfigProfileList")),
		alone:     true,
		note:      "half suspended (no Deployment), half with the default case's Deployment"},
	{pattern: "reloader",
		create: func(ctx context.Context, c client.Client, ns string, i int) error {
			name := fmt.Sprintf("app-%04d", i)
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"k": name}}); err != nil {
				return err
			}
			return c.Create(ctx, deploymentUsingReplicas(ns, name, name, 0))
		},
		// Paused: kube-controller-manager makes no ReplicaSet for them, and 10,000 of those would
		// cost it minutes; the reloader caches and reads a paused Deployment as any other.
		grow: func(ctx context.Context, c client.Client, ns string, i int) error {
			name := fmt.Sprintf("app-%05d", i)
			if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns}, Data: map[string]string{"k": name}}); err != nil {
				return err
			}
			d := deploymentUsingReplicas(ns, name, name, 0)
			d.Spec.Paused = true
			return c.Create(ctx, d)
		},
		converged: func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
			list := &appsv1.DeploymentList{}
			err := c.List(ctx, list, client.InNamespace(ns))
			return err == nil && len(list.Items) == n && !slices.ContainsFunc(list.Items, func(d appsv1.Deployment) bool {
				return d.Annotations[reloader.DigestsAnnotation] == ""
			}), err
		}},
	{pattern: "summary",
		create: func(ctx context.Context, c client.Client, ns string, i int) error {
			return c.Create(ctx, &summaryv1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("wl-%04d", i), Namespace: ns},
				Spec: summaryv1alpha1.WorkloadSpec{Selector: map[string]string{"app": fmt.Sprintf("app-%d", i%10)}}})
		},
		kind:      summaryv1alpha1.GroupVersion.WithKind("WorkloadList"),
		converged: observed(summaryv1alpha1.GroupVersion.WithKind("WorkloadList")),
		note:      "Workloads over no Pods (Pods cost kube-controller-manager and kwok, not the pattern)"},
	{pattern: "childset",
		create: func(ctx context.Context, c client.Client, ns string, i int) error {
			return c.Create(ctx, &childsetv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("b-%04d", i), Namespace: ns},
				Spec: childsetv1alpha1.BundleSpec{Entries: map[string]string{"a": "1", "b": strconv.Itoa(i)}}})
		},
		converged: observed(childsetv1alpha1.GroupVersion.WithKind("BundleList"))},
	{pattern: "finalizers",
		create: func(ctx context.Context, c client.Client, ns string, i int) error {
			if i == 0 { // the server (objects created before it wait for it with backoff)
				if err := createPostgresServer(ctx, c, operatorNamespace, ns, "127.0.0.1"); err != nil {
					return err
				}
			}
			return c.Create(ctx, &finalizersv1alpha1.PostgresDatabase{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r-%04d", i), Namespace: ns},
				Spec: finalizersv1alpha1.PostgresDatabaseSpec{ServerName: ns, Database: fmt.Sprintf("bench_%04d", i), Role: fmt.Sprintf("bench_%04d", i)}})
		},
		kind:      finalizersv1alpha1.GroupVersion.WithKind("PostgresDatabaseList"),
		converged: ready(finalizersv1alpha1.GroupVersion.WithKind("PostgresDatabaseList")),
		finalizes: true,
		external:  []string{`"external apply"`, `"external delete"`, `"swept: `},
		note:      "a database and a role per object in a local PostgreSQL; a restart observes each (1 query) and writes nothing"},
	{pattern: "lifespan",
		create: func(ctx context.Context, c client.Client, ns string, i int) error {
			return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("obs-%04d", i), Namespace: ns,
				Labels: map[string]string{lifespan.ObserveLabel: "true"}}, Data: map[string]string{"i": strconv.Itoa(i)}})
		},
		converged: func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
			list := &eventsv1.EventList{} // its Observed Events are in the ConfigMaps' namespace
			err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{lifespan.EmittedByLabel: lifespan.Name})
			return err == nil && len(list.Items) == n, err
		},
		args:  []string{"--heartbeat-interval=1h"},
		hooks: 3, // the Started and Acquired Events, and the first beat's term in the Heartbeat
		note:  "by design each start writes a Started and an Acquired Event and its term in the Heartbeat (3 writes; its beats every `--heartbeat-interval`, 1 h here); none per ConfigMap"},
}

// multi's case is added here, as it is made of the others' (a literal could not read benchCases).
func init() {
	members := []string{"mirror", "reloader", "summary"}
	benchCases = append(benchCases,
		benchCase{pattern: "multi", members: members,
			create: func(ctx context.Context, c client.Client, ns string, i int) error {
				for _, m := range composed(members...) {
					if err := m.create(ctx, c, ns, i); err != nil {
						return err
					}
				}
				return nil
			},
			converged: func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
				for _, m := range composed(members...) {
					if ok, err := m.converged(ctx, c, ns, n); !ok || err != nil {
						return false, err
					}
				}
				return true, nil
			},
			note: "mirror's, the reloader's and summary's objects of that number each, in one namespace, one process"})
}

// run runs the case's pattern over ns with its own flags and extra ones (runPattern).
func (bc benchCase) run(ctx context.Context, t *testing.T, cfg *envconf.Config, ns string, extra ...string) (stop func()) {
	t.Helper()
	return runPattern(ctx, t, cfg, bc.pattern, slices.Concat([]string{"--watch-namespaces", ns}, bc.args, extra)...)
}

// composed is the bench cases of the named patterns.
func composed(patterns ...string) []benchCase {
	var out []benchCase
	for _, bc := range benchCases {
		if slices.Contains(patterns, bc.pattern) {
			out = append(out, bc)
		}
	}
	return out
}

// mirrorSource is mirror's i-th bench source in ns.
func mirrorSource(ns string, i int) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("src-%04d", i), Namespace: ns,
		Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"k": strconv.Itoa(i)}}
}

// populate creates the case's n objects in ns (16 at a time) and waits, at most limit, for the
// running pattern to converge on them.
func (bc benchCase) populate(ctx context.Context, t *testing.T, c client.Client, ns string, n int, limit time.Duration) {
	t.Helper()
	if err := bc.fill(ctx, c, ns, 0, n, limit); err != nil {
		t.Fatal(err)
	}
}

// fill is populate for any goroutine (an error where populate fails the test), from the from-th
// object: ns holds the first from already.
func (bc benchCase) fill(ctx context.Context, c client.Client, ns string, from, n int, limit time.Duration) error {
	var g errgroup.Group
	g.SetLimit(16)
	for i := from; i < n; i++ {
		g.Go(func() error { return bc.create(ctx, c, ns, i) })
	}
	if err := g.Wait(); err != nil {
		return fmt.Errorf("%s: %w", bc.pattern, err)
	}
	return pollUntil(fmt.Sprintf("%s converged over %d", bc.pattern, n), limit, func(ctx context.Context) (bool, error) {
		return bc.converged(ctx, c, ns, n)
	})
}

func deploymentUsingReplicas(ns, name, cm string, replicas int32) *appsv1.Deployment {
	d := deploymentUsing(ns, name, cm, true)
	d.Spec.Replicas = &replicas
	return d
}

// statusesOf is the status of each object of a custom resource list kind (none without a kind).
func statusesOf(ctx context.Context, t *testing.T, c client.Client, kind schema.GroupVersionKind, ns string) map[string]any {
	t.Helper()
	out := map[string]any{}
	if kind.Kind == "" {
		return out
	}
	l := &unstructured.UnstructuredList{}
	l.SetGroupVersionKind(kind)
	if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	for _, o := range l.Items {
		out[o.GetName()] = o.Object["status"]
	}
	return out
}

// firstChange describes the first object whose status differs, "" if none.
func firstChange(before, after map[string]any) string {
	for _, name := range slices.Sorted(maps.Keys(after)) {
		if d := cmp.Diff(before[name], after[name]); d != "" {
			return name + " (-before +after):\n" + d
		}
	}
	return ""
}

// ready is observed with every object's Ready condition True too.
func ready(list schema.GroupVersionKind) func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
	return observedWith(list, true)
}

// observed is converged for a custom resource: n objects, each with status.observedGeneration
// equal to its generation.
func observed(list schema.GroupVersionKind) func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
	return observedWith(list, false)
}

func observedWith(list schema.GroupVersionKind, wantReady bool) func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
	return func(ctx context.Context, c client.Client, ns string, n int) (bool, error) {
		l := &unstructured.UnstructuredList{}
		l.SetGroupVersionKind(list)
		if err := c.List(ctx, l, client.InNamespace(ns)); err != nil {
			return false, err
		}
		if len(l.Items) != n {
			return false, nil
		}
		for _, o := range l.Items {
			g, _, _ := unstructured.NestedInt64(o.Object, "status", "observedGeneration")
			if g != o.GetGeneration() {
				return false, nil
			}
			conds, _, _ := unstructured.NestedSlice(o.Object, "status", "conditions")
			if wantReady && !slices.ContainsFunc(conds, func(c any) bool {
				m, _ := c.(map[string]any)
				return m["type"] == "Ready" && m["status"] == "True"
			}) {
				return false, nil
			}
		}
		return true, nil
	}
}
