// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo shows the patterns on the running cluster, the local one or kind's (go tool task
// demo starts one):
// it installs each pattern with its generated manifests, runs it in the background as its
// ServiceAccount, and walks through what it does as a user would see it with kubectl.
package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	childsetv1alpha1 "github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	childset "github.com/kpatterns/kpatterns/childset/controller"
	conditionalv1alpha1 "github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	conditional "github.com/kpatterns/kpatterns/conditional/controller"
	"github.com/kpatterns/kpatterns/dbpolicy/thirdparty"
	dbpolicy "github.com/kpatterns/kpatterns/dbpolicy/webhook"
	deploypolicy "github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/e2e/workspace"
	finalizersv1alpha1 "github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	finalizers "github.com/kpatterns/kpatterns/finalizers/controller"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	lifespanv1alpha1 "github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	lifespan "github.com/kpatterns/kpatterns/lifespan/controller"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	podpolicy "github.com/kpatterns/kpatterns/podpolicy/webhook"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/conditions"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/postgres"
	"github.com/kpatterns/kpatterns/shared/rollout"
	"github.com/kpatterns/kpatterns/shared/shard"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	widgetv1alpha1 "github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	widget "github.com/kpatterns/kpatterns/widget/controller"
)

const (
	ns         = "default"
	policyNS   = "demo-policy"      // the operator's own namespace is never sent to its webhooks
	deployedNS = "kpatterns-system" // where the last part deploys a pattern as a Pod
)

// webhookPatterns serve admission webhooks.
var webhookPatterns = map[string]bool{"widget": true, "deploypolicy": true, "dbpolicy": true, "podpolicy": true}

// scene is one pattern's part of the demo (pattern "": one that shows several).
type scene struct {
	pattern string
	show    func() error
}

type demo struct {
	ctx         context.Context
	dir         string // the cluster's state directory
	kubeconfig  string
	cfg         *rest.Config
	c           client.Client
	kind        bool   // the cluster is kind's (kind:up), not the local one (cluster:up)
	webhookHost string // where kube-apiserver calls the webhooks the demo serves
}

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := filepath.Abs(".cluster")
	if err != nil {
		return err
	}
	d := &demo{ctx: context.Background(), dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	cfg, err := clientcmd.BuildConfigFromFlags("", d.kubeconfig)
	if err != nil {
		return fmt.Errorf("no cluster (%v): run go tool task cluster:up or kind:up", err)
	}
	s, err := app.NewScheme(widgetv1alpha1.AddToScheme, conditionalv1alpha1.AddToScheme, summaryv1alpha1.AddToScheme,
		childsetv1alpha1.AddToScheme, finalizersv1alpha1.AddToScheme, lifespanv1alpha1.AddToScheme)
	if err != nil {
		return err
	}
	d.cfg = cfg
	cfg.WarningHandlerWithContext = kubectlWarnings{} // admission warnings printed as kubectl prints them
	if d.c, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		return err
	}
	d.webhookHost = "127.0.0.1"
	if d.kind = onKind(dir); d.kind {
		if err := d.prepareKind(); err != nil {
			return err
		}
	}
	step("Apply every pattern's CRDs first: kube-apiserver's admission learns a new kind on its 30 s refresh, so one wait serves them all")
	_, crds, err := localcluster.PatternCRDs(filepath.Dir(d.dir))
	if err != nil {
		return err
	}
	if err := app.Install(d.ctx, cfg, crds, os.Stdout); err != nil {
		return err
	}
	step("Namespace " + ns + " is annotated so its Pods run on kwok's node (the PodNodeSelector and PodTolerationRestriction admission plugins): the demo's workloads need no kubelet")
	onKwok := localcluster.OnFakeNode(&corev1.Namespace{})
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": onKwok.Annotations}})
	if err != nil {
		return err
	}
	if err := d.c.Patch(d.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	for _, p := range []string{"multi", "sharding-a", "sharding-b", "sharding-c"} {
		d.stop(p) // a previous run's: the three patterns run on their own first, mirror alone
	}
	image := d.buildImage("childset") // for the last part, while the others run
	scenes := []scene{{"mirror", d.mirror}, {"widget", d.widget}, {"conditional", d.conditional}, {"reloader", d.reloader}, {"summary", d.summary},
		{"childset", d.childset}, {"finalizers", d.finalizers}, {"lifespan", d.lifespan}, {"deploypolicy", d.deploypolicy},
		{"dbpolicy", d.dbpolicy}, {"podpolicy", d.podpolicy}, {"multi", d.multi}, {"sharding", d.sharding},
		{"", func() error { return d.deployed("childset", image) }}}
	all, err := workspace.Patterns(filepath.Dir(d.dir))
	if err != nil {
		return err
	}
	for _, p := range all { // go.work's list: a new pattern needs its scene here
		if !slices.ContainsFunc(scenes, func(s scene) bool { return s.pattern == p }) {
			return fmt.Errorf("pattern %s has no scene in the demo", p)
		}
	}
	for _, s := range scenes {
		if err := s.show(); err != nil {
			return err
		}
	}
	fmt.Printf(`
The patterns keep running in the background (logs: %[1]s/logs/). Try them yourself:
  export KUBECONFIG=%[1]s/kubeconfig
  kubectl label configmap demo-settings %[2]s-                       # the mirror child is deleted
  kubectl scale deployment demo-shop --replicas=5                      # the Widget puts 2 back
  kubectl patch configprofile demo-profile --type=merge -p '{"spec":{"maintenance":true}}'
  kubectl get widgets,configprofiles,workloads,bundles,replicasets
  kubectl -n demo-policy scale deployment demo-api --replicas=9        # denied by the namespace policy
  kubectl -n demo-pods run shell --image=busybox --privileged        # denied by the namespace's labels
  kubectl -n demo-policy patch database demo-orders --type=merge -p '{"spec":{"version":"15.0"}}'   # denied: no downgrade
  kubectl -n %[3]s get pods -o wide; kubectl -n %[3]s logs deploy/childset   # with the real node
Stop everything with: go tool task %[4]s
`, d.dir, mirror.Label, deployedNS, map[bool]string{false: "cluster:down", true: "kind:down"}[d.kind])
	return nil
}

func (d *demo) mirror() error {
	if err := d.start("mirror"); err != nil {
		return err
	}
	step("Apply a ConfigMap labelled " + mirror.Label + "=true")
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-settings", Namespace: ns,
		Labels: map[string]string{mirror.Label: mirror.Source}},
		Data: map[string]string{"color": "blue", "size": "large", "debug": "false"}}
	if err := d.recreate(src, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-settings-mirror", Namespace: ns}}); err != nil {
		return err
	}
	show(src.Name, map[string]any{"labels": src.Labels, "data": src.Data})
	step("The mirror created demo-settings-mirror, owned by the source:")
	child := &corev1.ConfigMap{}
	if err := d.waitFor("demo-settings-mirror", child, func() bool { return maps.Equal(child.Data, src.Data) }); err != nil {
		return err
	}
	show(child.Name, map[string]any{"labels": child.Labels, "data": child.Data, "ownerReferences": owners(child)})

	step("Remove the key 'debug' from the source: the child's data is replaced as a whole")
	delete(src.Data, "debug")
	if err := d.c.Update(d.ctx, src); err != nil {
		return err
	}
	if err := d.waitFor("demo-settings-mirror", child, func() bool { return maps.Equal(child.Data, src.Data) }); err != nil {
		return err
	}
	show(child.Name, map[string]any{"data": child.Data})
	return nil
}

func (d *demo) widget() error {
	if err := d.start("widget"); err != nil {
		return err
	}
	step("Apply a Widget: image, 2 replicas, a config map")
	w := &widgetv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "demo-shop", Namespace: ns},
		Spec: widgetv1alpha1.WidgetSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](2), Config: map[string]string{"greeting": "hello"}}}
	if err := d.recreate(w, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: w.Name, Namespace: ns}}); err != nil {
		return err
	}
	step("Its stages ensure a ConfigMap, a Deployment (kwok runs its Pods) and a Service; status follows:")
	if err := d.waitFor(w.Name, w, func() bool { return ready(w.Status.Conditions) && w.Status.ReadyReplicas == 2 }); err != nil {
		return err
	}
	fmt.Printf("    NAME        READY   REPLICAS\n    %-11s %-7s %d\n", w.Name, "True", w.Status.ReadyReplicas)
	showConditions(w.Status.Conditions)

	step("Scale its Deployment behind its back: the drift is repaired")
	dep := &appsv1.Deployment{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: w.Name}, dep); err != nil {
			return err
		}
		dep.Spec.Replicas = ptr.To[int32](5)
		return d.c.Update(d.ctx, dep, client.FieldOwner("demo-user"))
	})
	if err != nil {
		return err
	}
	fmt.Println("    kubectl scale deployment demo-shop --replicas=5")
	if err := d.waitFor(w.Name, dep, func() bool { return *dep.Spec.Replicas == 2 }); err != nil {
		return err
	}
	fmt.Printf("    deployment/demo-shop replicas: %d\n", *dep.Spec.Replicas)
	return nil
}

func (d *demo) conditional() error {
	if err := d.start("conditional"); err != nil {
		return err
	}
	step("Apply a ConfigProfile for environment staging: the default case matches")
	p := &conditionalv1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "demo-profile", Namespace: ns},
		Spec: conditionalv1alpha1.ConfigProfileSpec{Image: "nginx:1.27", Environment: "staging"}}
	if err := d.recreate(p, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: ns}}); err != nil {
		return err
	}
	if err := d.profileReady(p, "default"); err != nil {
		return err
	}
	step("Switch to production: a different configuration, a new digest, a new ReplicaSet")
	if err := d.updateProfile(p, func(s *conditionalv1alpha1.ConfigProfileSpec) { s.Environment = "production" }); err != nil {
		return err
	}
	if err := d.profileReady(p, "production"); err != nil {
		return err
	}

	step("Suspend it: the suspended case matches first and waits; nothing is generated or rolled")
	if err := d.updateProfile(p, func(s *conditionalv1alpha1.ConfigProfileSpec) { s.Suspended = true }); err != nil {
		return err
	}
	err := d.waitFor(p.Name, p, func() bool {
		c := meta.FindStatusCondition(p.Status.Conditions, conditions.Ready)
		return p.Status.ObservedGeneration == p.Generation && c != nil && c.Reason == conditional.ReasonSuspended
	})
	if err != nil {
		return err
	}
	showConditions(p.Status.Conditions)

	step("Resume it, reading its configuration from ConfigMap demo-upstream (labelled " + conditional.Label + "=" + conditional.Input + "): the input case")
	in := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-upstream", Namespace: ns,
		Labels: map[string]string{conditional.Label: conditional.Input}}, Data: map[string]string{"mode": "upstream", "feature-x": "on"}}
	if err := d.recreate(in, in.DeepCopy()); err != nil {
		return err
	}
	if err := d.updateProfile(p, func(s *conditionalv1alpha1.ConfigProfileSpec) { s.Suspended, s.ConfigFrom = false, in.Name }); err != nil {
		return err
	}
	return d.profileReady(p, "input")
}

func (d *demo) updateProfile(p *conditionalv1alpha1.ConfigProfile, mutate func(*conditionalv1alpha1.ConfigProfileSpec)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(p), p); err != nil {
			return err
		}
		mutate(&p.Spec)
		return d.c.Update(d.ctx, p)
	})
}

func (d *demo) reloader() error {
	if err := d.start("reloader"); err != nil {
		return err
	}
	step("A Deployment labelled " + reloader.OptIn + "=true reads ConfigMap demo-web-config through envFrom")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-web-config", Namespace: ns}, Data: map[string]string{"level": "info"}}
	labels := map[string]string{"app": "demo-web"}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo-web", Namespace: ns, Labels: map[string]string{reloader.OptIn: "true"}},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{
				Name: "app", Image: "nginx:1.27", EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: cm.Name}}}}}}}}}}
	if err := d.recreate(cm, cm.DeepCopy()); err != nil {
		return err
	}
	if err := d.recreate(dep, dep.DeepCopy()); err != nil {
		return err
	}
	if err := d.waitFor(dep.Name, dep, func() bool { return dep.Annotations[reloader.DigestsAnnotation] != "" }); err != nil {
		return err
	}
	fmt.Printf("    %s: %s   (what it saw, on the Deployment's own metadata; the Pod template is untouched)\n", reloader.DigestsAnnotation, dep.Annotations[reloader.DigestsAnnotation])
	if err := d.replicaSets("demo-web", "", 1); err != nil {
		return err
	}
	step("Change the ConfigMap: the digest changes and the Deployment rolls out a new ReplicaSet")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(cm), cm); err != nil {
			return err
		}
		cm.Data["level"] = "debug"
		return d.c.Update(d.ctx, cm)
	})
	if err != nil {
		return err
	}
	if err := d.replicaSets("demo-web", "", 2); err != nil {
		return err
	}
	step("The reloader says on the Deployment what it rolled out for:")
	return d.events("demo-web", reloader.ReasonRollingOut)
}

// events prints the Events of a reason that regard the object named name, oldest first.
func (d *demo) events(name, reason string) error {
	list := &eventsv1.EventList{}
	if err := d.c.List(d.ctx, list, client.InNamespace(ns)); err != nil {
		return err
	}
	slices.SortFunc(list.Items, func(a, b eventsv1.Event) int { return a.EventTime.Compare(b.EventTime.Time) })
	fmt.Println("    TYPE     REASON       OBJECT                  MESSAGE")
	for _, e := range list.Items {
		if e.Regarding.Name == name && e.Reason == reason {
			fmt.Printf("    %-8s %-12s %-23s %s\n", e.Type, e.Reason, strings.ToLower(e.Regarding.Kind)+"/"+name, e.Note)
		}
	}
	return nil
}

func (d *demo) summary() error {
	if err := d.start("summary"); err != nil {
		return err
	}
	step("A Workload selecting app=demo-web summarizes the Deployment's Pods (it never writes them)")
	w := &summaryv1alpha1.Workload{ObjectMeta: metav1.ObjectMeta{Name: "demo-web", Namespace: ns},
		Spec: summaryv1alpha1.WorkloadSpec{Selector: map[string]string{"app": "demo-web"}}}
	if err := d.recreate(w, w.DeepCopy()); err != nil {
		return err
	}
	show := func(n int32) error {
		err := d.waitFor(w.Name, w, func() bool {
			return w.Status.Total == n && w.Status.Ready == n && ready(w.Status.Conditions) && w.Status.ObservedGeneration == w.Generation
		})
		if err != nil {
			return err
		}
		fmt.Printf("    NAME       READY   PODS-READY   TOTAL   RUNNING\n    %-10s %-7s %-12d %-7d %d\n",
			w.Name, "True", w.Status.Ready, w.Status.Total, w.Status.Phases.Running)
		return nil
	}
	if err := show(2); err != nil {
		return err
	}
	step("Scale the Deployment to 3: the summary follows")
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		dep := &appsv1.Deployment{}
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: "demo-web"}, dep); err != nil {
			return err
		}
		dep.Spec.Replicas = ptr.To[int32](3)
		return d.c.Update(d.ctx, dep)
	})
	if err != nil {
		return err
	}
	return show(3)
}

func (d *demo) childset() error {
	if err := d.start("childset"); err != nil {
		return err
	}
	step("Bundle demo-bundle has three entries: one ConfigMap each, named by a hash of (Bundle UID, key)")
	b := &childsetv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "demo-bundle", Namespace: ns},
		Spec: childsetv1alpha1.BundleSpec{Entries: map[string]string{"log.level": "info", "FEATURE_X": "on", "region": "eu-west"}}}
	if err := d.recreate(b, b.DeepCopy()); err != nil {
		return err
	}
	if err := d.bundleChildren(b, 3); err != nil {
		return err
	}
	step("Remove entry FEATURE_X: its ConfigMap is pruned (a delete guarded by owner, UID and resourceVersion)")
	fmt.Println(`    kubectl patch bundle demo-bundle --type=json -p '[{"op":"remove","path":"/spec/entries/FEATURE_X"}]'`)
	if err := d.c.Patch(d.ctx, b, client.RawPatch(types.JSONPatchType, []byte(`[{"op":"remove","path":"/spec/entries/FEATURE_X"}]`))); err != nil {
		return err
	}
	return d.bundleChildren(b, 2)
}

// bundleChildren waits until the Bundle is Ready with n children and prints them.
func (d *demo) bundleChildren(b *childsetv1alpha1.Bundle, n int32) error {
	err := d.waitFor(b.Name, b, func() bool {
		return ready(b.Status.Conditions) && b.Status.ObservedGeneration == b.Generation && b.Status.ReadyChildren == n
	})
	if err != nil {
		return err
	}
	list := &corev1.ConfigMapList{}
	if err := d.c.List(d.ctx, list, client.InNamespace(ns), client.MatchingLabels{childset.BundleUIDLabel: string(b.UID)}); err != nil {
		return err
	}
	fmt.Printf("    bundle/%s: desiredChildren=%d readyChildren=%d\n", b.Name, b.Status.DesiredChildren, b.Status.ReadyChildren)
	for _, cm := range list.Items {
		if cm.DeletionTimestamp == nil {
			fmt.Printf("    configmap/%-32s key=%-10s data=%v\n", cm.Name, cm.Annotations[childset.KeyAnnotation], cm.Data)
		}
	}
	return nil
}

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
	server := &finalizersv1alpha1.PostgresServer{ObjectMeta: metav1.ObjectMeta{Name: "demo"}, Spec: finalizersv1alpha1.PostgresServerSpec{ConnectionSecret: admin.Name}}
	db := &finalizersv1alpha1.PostgresDatabase{ObjectMeta: metav1.ObjectMeta{Name: "demo", Namespace: ns},
		Spec: finalizersv1alpha1.PostgresDatabaseSpec{ServerName: server.Name, Database: "demo_app", Role: "demo_app",
			ConnectionLimit: ptr.To[int32](5), PollInterval: &metav1.Duration{Duration: 10 * time.Second}}}
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
	step("Delete it: the finalizer holds the object until the database and the role are dropped")
	fmt.Println("    kubectl delete postgresdatabase demo")
	if err := d.c.Delete(d.ctx, db); err != nil {
		return err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		err := d.c.Get(d.ctx, client.ObjectKeyFromObject(db), db)
		if apierrors.IsNotFound(err) {
			break
		}
		if err != nil || time.Now().After(deadline) {
			return fmt.Errorf("demo not deleted: %v", err)
		}
	}
	fmt.Printf("    postgresdatabase.patterns.kpatterns.dev \"demo\" deleted (finalizer %s removed after the drop)\n", finalizers.Finalizer)
	return onServer()
}

// lifespan shows the lifetime hooks: a Heartbeat term per leader, a restart (SIGTERM, a new
// process) ending one term and starting the next, and Observed events not repeated across it.
func (d *demo) lifespan() error {
	hb := &lifespanv1alpha1.Heartbeat{}
	beating := func(since time.Time) func() bool { // a term of a process started after since
		return func() bool { t := hb.Current(); return t != nil && t.Acquired.After(since) && t.Beats > 1 }
	}
	since := time.Now()
	if err := d.start("lifespan"); err != nil {
		return err
	}
	if err := d.waitFor(lifespan.Name, hb, beating(since)); err != nil {
		return err
	}
	step("Label ConfigMap demo-observed patterns.kpatterns.dev/observe=true: the leader emits one Observed event for its version")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-observed", Namespace: ns, Labels: map[string]string{lifespan.ObserveLabel: "true"}},
		Data: map[string]string{"at": time.Now().UTC().Format(time.RFC3339)}}
	if err := d.recreate(cm, cm.DeepCopy()); err != nil {
		return err
	}
	ev := &eventsv1.Event{}
	if err := d.waitFor(lifespan.ObservedEventName(cm), ev, func() bool { return true }); err != nil {
		return err
	}
	fmt.Printf("    kubectl events: %s %s %q (by %s)\n", ev.Type, ev.Reason, ev.Note, ev.ReportingInstance)
	step("Restart lifespan (SIGTERM, then a new process): its leader exit hook ends the term, the new leader starts one")
	since = time.Now()
	if err := d.start("lifespan"); err != nil {
		return err
	}
	if err := d.waitFor(lifespan.Name, hb, beating(since)); err != nil {
		return err
	}
	fmt.Println("    kubectl get heartbeat lifespan -o jsonpath='{.status.terms}'   # the latest terms")
	ts := hb.Status.Terms
	for _, t := range ts[max(0, len(ts)-2):] {
		stopped := "-"
		if t.Stopped != nil {
			stopped = t.Stopped.Format("15:04:05.000")
		}
		fmt.Printf("    holder %s  acquired %s  last beat %s  beats %d  stopped %s\n", t.Holder,
			t.Acquired.Format("15:04:05.000"), t.LastBeat.Format("15:04:05.000"), t.Beats, stopped)
	}
	list := &eventsv1.EventList{}
	if err := d.c.List(d.ctx, list, client.InNamespace(ns), client.MatchingLabels{lifespan.EmittedByLabel: lifespan.Name}); err != nil {
		return err
	}
	observed := 0
	for _, e := range list.Items {
		if e.Reason == string(lifespan.Observed) && e.Regarding.UID == cm.UID {
			observed++
		}
	}
	fmt.Printf("    Observed events for demo-observed after the restart: %d (the new leader found its version already observed)\n", observed)
	return nil
}

func (d *demo) deploypolicy() error {
	if err := d.start("deploypolicy"); err != nil {
		return err
	}
	if err := d.c.Create(d.ctx, localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: policyNS}})); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	step("Namespace " + policyNS + " sets its policy in ConfigMap " + deploypolicy.PolicyConfigMap + ": at most 3 replicas (read live on every request)")
	policy := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deploypolicy.PolicyConfigMap, Namespace: policyNS},
		Data: map[string]string{deploypolicy.MaxReplicasKey: "3"}}
	if err := d.recreate(policy, policy.DeepCopy()); err != nil {
		return err
	}
	step("Create Deployment demo-api without a team label: the mutating webhook defaults it")
	sel := map[string]string{"app": "demo-api"}
	api := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "demo-api", Namespace: policyNS},
		Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: sel},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}}
	old := api.DeepCopy()
	if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(old), old); err == nil { // a previous run's, possibly protected
		delete(old.Annotations, deploypolicy.ProtectAnnotation)
		_ = d.c.Update(d.ctx, old)
	}
	if err := d.recreate(api, api.DeepCopy()); err != nil {
		return err
	}
	show(api.Name, map[string]any{"labels": api.Labels, "replicas": *api.Spec.Replicas})

	scale := func(n int32) error {
		return d.c.SubResource("scale").Update(d.ctx, api, client.WithSubResourceBody(&autoscalingv1.Scale{Spec: autoscalingv1.ScaleSpec{Replicas: n}}))
	}
	step("kubectl scale past the ceiling is denied (the request is an autoscaling/v1 Scale on the /scale subresource)")
	fmt.Println("    kubectl -n demo-policy scale deployment demo-api --replicas=5")
	if err := expectDenied(scale(5)); err != nil {
		return err
	}
	fmt.Println("    kubectl -n demo-policy scale deployment demo-api --replicas=3")
	if err := scale(3); err != nil {
		return err
	}
	fmt.Println("    deployment.apps/demo-api scaled")

	step("Change the team label: denied, a team label once set stays")
	err := d.updateDeployment(api, func(a *appsv1.Deployment) { a.Labels[deploypolicy.TeamLabel] = "payments" })
	if err := expectDenied(err); err != nil {
		return err
	}
	step("Protect it with " + deploypolicy.ProtectAnnotation + "=true: deletion is denied until the annotation is removed")
	if err := d.updateDeployment(api, func(a *appsv1.Deployment) {
		a.Annotations = map[string]string{deploypolicy.ProtectAnnotation: "true"}
	}); err != nil {
		return err
	}
	fmt.Println("    kubectl -n demo-policy delete deployment demo-api")
	if err := expectDenied(d.c.Delete(d.ctx, api)); err != nil {
		return err
	}

	step("The same rules as admission policies that kube-apiserver runs itself: install --admission=policy replaces the webhooks, and the webhook process is stopped")
	if err := d.install("deploypolicy", "--admission=policy"); err != nil {
		return err
	}
	d.stop("deploypolicy")
	fmt.Println("    kubectl -n demo-policy scale deployment demo-api --replicas=5")
	deadline := time.Now().Add(30 * time.Second) // kube-apiserver loads policies asynchronously
	err = scale(5)
	for ; err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy"); err = scale(5) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the policies were not in effect after 30 s: %v", err)
		}
		if err == nil { // admitted before the policies took effect: back under the ceiling
			if err := scale(3); err != nil {
				return err
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	if err := expectDenied(err); err != nil {
		return err
	}

	step("The Widget pattern has admission too (same process as its controller): " + policyNS + "'s " + widget.PolicyConfigMap + " allows only nginx images")
	wp := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: widget.PolicyConfigMap, Namespace: policyNS},
		Data: map[string]string{widget.AllowedImagesKey: "nginx:"}}
	if err := d.recreate(wp, wp.DeepCopy()); err != nil {
		return err
	}
	fmt.Println("    kubectl -n demo-policy create -f widget.yaml   # image: busybox:1.36")
	return expectDenied(d.c.Create(d.ctx, &widgetv1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "demo-outlaw", Namespace: policyNS},
		Spec: widgetv1alpha1.WidgetSpec{Image: "busybox:1.36"}}))
}

func (d *demo) dbpolicy() error {
	step("Install the Database CRD as its own operator would: dbpolicy validates Databases but never installs or owns their CRD")
	crd, err := thirdparty.DatabaseCRD()
	if err != nil {
		return err
	}
	if err := app.Install(d.ctx, d.cfg, []client.Object{crd}, os.Stdout); err != nil {
		return err
	}
	if err := d.start("dbpolicy"); err != nil {
		return err
	}
	orders := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{
		"engine": "postgres", "version": "16.2", "storageGiB": int64(20)}}}
	orders.SetGroupVersionKind(dbpolicy.DatabaseGVK)
	orders.SetNamespace(policyNS)
	orders.SetName("demo-orders")
	step("Create Database demo-orders (postgres 16.2, 20 GiB) in " + policyNS)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) { // until the new kind is served
		_ = d.c.Delete(d.ctx, orders.DeepCopy()) // a previous run's
		err := d.c.Create(d.ctx, orders.DeepCopy())
		if err == nil {
			break
		}
		if !meta.IsNoMatchError(err) && !apierrors.IsAlreadyExists(err) || time.Now().After(deadline) {
			return err
		}
	}
	fmt.Println("    database.database.example.com/demo-orders created")
	patch := func(p string) error {
		fmt.Printf("    kubectl -n %s patch database demo-orders --type=merge -p '%s'\n", policyNS, p)
		return d.c.Patch(d.ctx, orders.DeepCopy(), client.RawPatch(types.MergePatchType, []byte(p)))
	}
	step("Shrink its storage: denied, judged from the request's old and new objects alone (no cache, no reads, no RBAC)")
	if err := expectDenied(patch(`{"spec":{"storageGiB":10}}`)); err != nil {
		return err
	}
	step("Grow it, and try to switch engines")
	if err := patch(`{"spec":{"storageGiB":40}}`); err != nil {
		return err
	}
	fmt.Println("    database.database.example.com/demo-orders patched")
	return expectDenied(patch(`{"spec":{"engine":"mysql"}}`))
}

func (d *demo) podpolicy() error {
	if err := d.start("podpolicy"); err != nil {
		return err
	}
	const podsNS = "demo-pods"
	step("Namespace " + podsNS + " is labelled " + podpolicy.EnforceLabel + "=true (its Pod creations go to the webhook) and " +
		podpolicy.AllowPodsLabel + "=true; podpolicy reads it from its informer cache")
	nsObj := localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: podsNS}})
	if err := d.c.Create(d.ctx, nsObj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	labels := fmt.Sprintf(`{"metadata":{"labels":{%q:"true",%q:"true",%q:null,%q:null}}}`, // nothing else allowed
		podpolicy.EnforceLabel, podpolicy.AllowPodsLabel, podpolicy.AllowPrivilegedLabel, podpolicy.AllowHostNamespacesLabel)
	if err := d.c.Patch(d.ctx, nsObj, client.RawPatch(types.MergePatchType, []byte(labels))); err != nil {
		return err
	}
	deployment := func(name string, privileged bool) *appsv1.Deployment {
		sel := map[string]string{"app": name}
		c := corev1.Container{Name: "app", Image: "nginx:1.27"}
		if privileged {
			c.SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
		}
		return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: podsNS},
			Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](2), Selector: &metav1.LabelSelector{MatchLabels: sel},
				Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: sel}, Spec: corev1.PodSpec{Containers: []corev1.Container{c}}}}}
	}
	step("Deployment demo-app: the ReplicaSet controller's Pods are admitted")
	app := deployment("demo-app", false)
	if err := d.recreate(app, app.DeepCopy()); err != nil {
		return err
	}
	for deadline := time.Now().Add(2 * time.Minute); app.Status.AvailableReplicas < 2; time.Sleep(200 * time.Millisecond) {
		if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(app), app); err != nil || time.Now().After(deadline) {
			return fmt.Errorf("demo-app not available: %v", err)
		}
	}
	fmt.Printf("    deployment demo-app: %d/2 available\n", app.Status.AvailableReplicas)
	step("Deployment demo-root runs a privileged container: its Pods are denied, and the ReplicaSet's events say why")
	root := deployment("demo-root", true)
	if err := d.recreate(root, root.DeepCopy()); err != nil {
		return err
	}
	fmt.Printf("    kubectl -n %s get events --field-selector reason=FailedCreate\n", podsNS)
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list := &eventsv1.EventList{}
		if err := d.c.List(d.ctx, list, client.InNamespace(podsNS)); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Regarding.Kind == "ReplicaSet" && strings.HasPrefix(e.Regarding.Name, "demo-root-") && e.Reason == "FailedCreate" {
				fmt.Printf("    %-8s %-12s %s  %s\n", e.Type, e.Reason, "replicaset/"+e.Regarding.Name, e.Note)
				return nil
			}
		}
		if time.Now().After(deadline) {
			return errors.New("no FailedCreate event for demo-root's ReplicaSet")
		}
	}
}

// updateDeployment re-reads and retries on a conflict; any other error, a denial included, is
// returned as it is.
func (d *demo) updateDeployment(dep *appsv1.Deployment, mutate func(*appsv1.Deployment)) error {
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(dep), dep); err != nil {
			return err
		}
		mutate(dep)
		return d.c.Update(d.ctx, dep)
	})
}

// expectDenied prints an admission denial as kubectl would, and fails on anything else.
// kubectlWarnings prints the API server's warnings as kubectl does.
type kubectlWarnings struct{}

func (kubectlWarnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	fmt.Printf("    Warning: %s\n", text)
}

// expectDenied prints an admission denial as kubectl does: Forbidden from a webhook, Invalid from
// an admission policy (a demo run again may meet the policies of its previous run for a moment
// after they were pruned).
func expectDenied(err error) error {
	if !apierrors.IsForbidden(err) && !apierrors.IsInvalid(err) {
		return fmt.Errorf("expected a denial, got %v", err)
	}
	fmt.Printf("    Error from server (%s): %v\n", apierrors.ReasonForError(err), err)
	return nil
}

// replicaSets waits until the Deployment has rolled out n ReplicaSets carrying a digest (the
// first one, before the reloader stamped a digest, is left out), and prints them.
func (d *demo) replicaSets(name, annotation string, n int) error {
	dep := &appsv1.Deployment{}
	var stamped []appsv1.ReplicaSet
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		list := &appsv1.ReplicaSetList{}
		if err := d.c.List(d.ctx, list, client.InNamespace(ns), client.MatchingLabels{"app": name}); err != nil {
			return err
		}
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: name}, dep); err != nil {
			return err
		}
		stamped = slices.DeleteFunc(list.Items, func(rs appsv1.ReplicaSet) bool {
			return rs.Spec.Template.Annotations[annotation] == "" && annotation != ""
		})
		if len(stamped) == n && (annotation == "" || dep.Spec.Template.Annotations[annotation] != "") && rollout.Pending(dep, *dep.Spec.Replicas) == "" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s: %d ReplicaSets with a digest, want %d", name, len(stamped), n)
		}
	}
	fmt.Println("    REPLICASET                  DIGEST         READY")
	for _, rs := range stamped {
		fmt.Printf("    %-27s %-14.12s %d\n", rs.Name, cmp.Or(rs.Spec.Template.Annotations[digest.Annotation], "-"), rs.Status.ReadyReplicas)
	}
	return nil
}

func (d *demo) profileReady(p *conditionalv1alpha1.ConfigProfile, matched string) error {
	err := d.waitFor(p.Name, p, func() bool {
		return p.Status.MatchedCase == matched && p.Status.ObservedGeneration == p.Generation && ready(p.Status.Conditions)
	})
	if err != nil {
		return err
	}
	cm := &corev1.ConfigMap{}
	if err := d.c.Get(d.ctx, client.ObjectKeyFromObject(p), cm); err != nil {
		return err
	}
	show(p.Name, map[string]any{"matchedCase": matched, "configDigest": p.Status.ConfigDigest[:12], "generated config": cm.Data})
	rsets := &appsv1.ReplicaSetList{}
	if err := d.c.List(d.ctx, rsets, client.InNamespace(ns), client.MatchingLabels{"app.kubernetes.io/instance": p.Name}); err != nil {
		return err
	}
	fmt.Println("    REPLICASET                        DIGEST         READY")
	for _, rs := range rsets.Items {
		fmt.Printf("    %-33s %-14s %d\n", rs.Name, rs.Spec.Template.Annotations[digest.Annotation][:12], rs.Status.ReadyReplicas)
	}
	return nil
}

// start installs a pattern and (re)starts it in the background as its ServiceAccount.
func (d *demo) start(pattern string) error {
	step(fmt.Sprintf("Install %s (server-side apply of its generated manifests: what it needs and nothing more) and run it as its ServiceAccount", pattern))
	bin := filepath.Join(filepath.Dir(d.dir), "bin", pattern)
	var install, run []string
	if webhookPatterns[pattern] { // served here, called by the API server on 127.0.0.1
		w, err := localcluster.PrepareWebhook(bin, ns, filepath.Join(d.dir, pattern+"-certs"), d.webhookHost)
		if err != nil {
			return err
		}
		install, run = w.InstallArgs(), w.RunArgs()
		fmt.Printf("%s certs --dir %s --hosts %s   # a development CA and serving certificate\n", pattern, w.Dir, w.Host)
	}
	if err := d.install(pattern, install...); err != nil {
		return err
	}
	return d.run(pattern, pattern, run...)
}

// run (re)starts the process name (a pattern, or one replica of it) of pattern in the background,
// as the pattern's ServiceAccount, with args added to its run command.
func (d *demo) run(name, pattern string, args ...string) error {
	// A rerun replaces the previous process; cluster:down stops it with the cluster (its command
	// line names the cluster's kubeconfig).
	d.stop(name)
	log, err := os.OpenFile(filepath.Join(d.dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }() // the pattern process keeps its own handle
	p, err := localcluster.RunPattern(d.ctx, filepath.Join(filepath.Dir(d.dir), "bin", pattern), d.kubeconfig, ns, log, true, args...)
	if err != nil {
		return fmt.Errorf("%w; see %s", err, log.Name())
	}
	fmt.Printf("%s running (pid %d), ready on http://%s/readyz\n", name, p.Cmd.Process.Pid, p.ProbeAddr)
	return os.WriteFile(filepath.Join(d.dir, name+".pid"), []byte(strconv.Itoa(p.Cmd.Process.Pid)), 0o644)
}

// install runs the pattern's install with args, its output shown.
func (d *demo) install(pattern string, args ...string) error {
	cmd := exec.Command(filepath.Join(filepath.Dir(d.dir), "bin", pattern), append([]string{"install", "--kubeconfig", d.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KPATTERNS_NAMESPACE="+ns)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// pid is the pattern process the demo started, 0 if none.
func (d *demo) pid(pattern string) int {
	b, err := os.ReadFile(filepath.Join(d.dir, pattern+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// stop stops a pattern process the demo started, waiting up to 10 s for it to exit.
func (d *demo) stop(pattern string) {
	if pid := d.pid(pattern); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		_ = os.Remove(filepath.Join(d.dir, pattern+".pid"))
	}
}

// rss is a process's resident set size in MiB, from /proc (0 if unknown).
func rss(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kib) / 1024
		}
	}
	return 0
}

// multi replaces the mirror, reloader and summary processes by one process running all three.
func (d *demo) multi() error {
	step("multi: the mirror, reloader and summary controllers in one process (app.Compose), replacing the three")
	var three float64
	for _, p := range []string{"mirror", "reloader", "summary"} {
		mib := rss(d.pid(p))
		three += mib
		fmt.Printf("    %-8s pid %-7d RSS %5.1f MiB\n", p, d.pid(p), mib)
		d.stop(p)
	}
	if err := d.start("multi"); err != nil {
		return err
	}
	step("Change demo-settings: multi's mirror controller updates the child")
	src := &corev1.ConfigMap{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: "demo-settings"}, src); err != nil {
			return err
		}
		src.Data["color"] = "green"
		return d.c.Update(d.ctx, src)
	})
	if err != nil {
		return err
	}
	child := &corev1.ConfigMap{}
	if err := d.waitFor("demo-settings-mirror", child, func() bool { return child.Data["color"] == "green" }); err != nil {
		return err
	}
	show(child.Name, map[string]any{"data": child.Data})
	fmt.Printf("    RSS: multi %.1f MiB running all three; the three processes had %.1f MiB together\n", rss(d.pid("multi")), three)
	return nil
}

// recreate creates obj after deleting what a previous run left, waiting until child (which the
// garbage collector removes with it) is gone too.
func (d *demo) recreate(obj, child client.Object) error {
	_ = d.c.Delete(d.ctx, obj.DeepCopyObject().(client.Object))
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		err1 := d.c.Get(d.ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		err2 := d.c.Get(d.ctx, client.ObjectKeyFromObject(child), child)
		if apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s from a previous run was not removed", obj.GetName())
		}
	}
	return d.c.Create(d.ctx, obj)
}

// waitFor reads ns/name into obj until done() holds. Every 5 s of waiting it says so, with the
// first condition of obj that is not True (if it has conditions; "as before" when it has not
// changed): a wait is never silent.
func (d *demo) waitFor(name string, obj client.Object, done func() bool) error {
	began, said, last := time.Now(), time.Now(), ""
	for deadline := began.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		key := client.ObjectKey{Namespace: ns, Name: name}
		if obj.GetNamespace() != "" {
			key.Namespace = obj.GetNamespace()
		}
		err := d.c.Get(d.ctx, key, obj)
		if err == nil && done() {
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if time.Since(said) >= 5*time.Second {
			said = time.Now()
			why := pending(obj)
			if why != "" && why == last {
				why = ": as before"
			} else {
				last = why
			}
			fmt.Printf("    … still waiting for %s (%s)%s\n", name, time.Since(began).Round(time.Second), why)
		}
	}
	return fmt.Errorf("%T %s did not reach the expected state", obj, name)
}

// pending is ": Type=Status Reason: message" for obj's first condition that is not True, with
// what a message about a missing RESTMapping means; "" without one.
func pending(obj client.Object) string {
	o, ok := obj.(interface{ GetConditions() []metav1.Condition })
	if !ok {
		return ""
	}
	for _, c := range o.GetConditions() {
		if c.Status == metav1.ConditionTrue {
			continue
		}
		out := fmt.Sprintf(": %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		if strings.Contains(c.Message, "cannot find RESTMapping") {
			out += "\n      (kube-apiserver's admission learns a new CRD's kind on its 30 s refresh; until then it refuses " +
				"children owned by one with blockOwnerDeletion, and the pattern retries)"
		}
		return out
	}
	return ""
}

func ready(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, conditions.Ready)
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

func owners(obj client.Object) []string {
	var out []string
	for _, o := range obj.GetOwnerReferences() {
		out = append(out, fmt.Sprintf("%s/%s (controller=%v)", o.Kind, o.Name, o.Controller != nil && *o.Controller))
	}
	slices.Sort(out)
	return out
}

func showConditions(conds []metav1.Condition) {
	for _, c := range conds {
		fmt.Printf("    %-16s %-6s %s\n", c.Type, c.Status, c.Message)
	}
}

// show prints fields of an object as `kubectl get -o yaml` would, less the noise.
func show(name string, fields map[string]any) {
	fields["name"] = name
	b, _ := yaml.Marshal(fields)
	fmt.Print("    " + strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n    ") + "\n")
}

// hasRealNode says whether the demo's cluster runs the real node (cluster:up NODE=real, as root).
func (d *demo) hasRealNode() bool {
	_, err := os.Stat(filepath.Join(d.dir, "node", "index"))
	return err == nil || d.kind
}

// buildImage builds a pattern's image for this machine in the background, as `go tool task image`
// does (its output goes to the cluster's logs/), when the cluster has a real node to run it.
func (d *demo) buildImage(pattern string) <-chan error {
	done := make(chan error, 1)
	if !d.hasRealNode() {
		done <- nil
		return done
	}
	go func() {
		log, err := os.Create(filepath.Join(d.dir, "logs", "image-"+pattern+".log"))
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = log.Close() }()
		cmd := exec.CommandContext(d.ctx, "go", "run", "./e2e/cmd/image", "-platforms", "linux/"+runtime.GOARCH, "-tag", "dev", pattern)
		cmd.Dir, cmd.Stdout, cmd.Stderr = filepath.Dir(d.dir), log, log
		if err := cmd.Run(); err != nil {
			done <- fmt.Errorf("building %s's image: %w; see %s", pattern, err, log.Name())
			return
		}
		done <- nil
	}()
	return done
}

// deployed runs a pattern as users run an operator: a Pod from its image on the real node, in a
// namespace that enforces Pod Security "restricted", its log read through the API server; then it
// acts on the Bundle its process handled before.
func (d *demo) deployed(pattern string, image <-chan error) error {
	if !d.hasRealNode() {
		step("No real node in this cluster (go tool task cluster:up NODE=real, as root): the patterns ran as processes only")
		return nil
	}
	step(fmt.Sprintf("%s as users run an operator: a Pod from its image on a node that runs containers, with no placement flags", pattern))
	fmt.Printf("    go tool task image PATTERN=%s PLATFORMS=linux/%s   # built while the demo ran\n", pattern, runtime.GOARCH)
	if err := <-image; err != nil {
		return err
	}
	fmt.Printf("    go tool task image:load PATTERN=%s                # into the node's containerd: no registry\n", pattern)
	if err := d.loadImage(d.ctx, filepath.Join(filepath.Dir(d.dir), "dist", pattern+"-linux-"+runtime.GOARCH+".tar")); err != nil {
		return err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployedNS, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := d.c.Create(d.ctx, nsObj); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	d.stop(pattern) // its process: the Pod takes over
	args := []string{"install", "--kubeconfig", d.kubeconfig, "--image", "kpatterns/" + pattern + ":dev"}
	fmt.Printf("    KPATTERNS_NAMESPACE=%s %s install %s\n", deployedNS, pattern, strings.Join(args[3:], " "))
	cmd := exec.Command(filepath.Join(filepath.Dir(d.dir), "bin", pattern), args...)
	cmd.Env = append(os.Environ(), "KPATTERNS_NAMESPACE="+deployedNS)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: pattern, Namespace: deployedNS}}
	err := d.waitFor(pattern, dep, func() bool {
		return dep.Status.ReadyReplicas == 1 && dep.Status.UpdatedReplicas == 1 && dep.Status.Replicas == 1
	})
	if err != nil {
		return err
	}
	step("kubectl -n " + deployedNS + " get pods -o wide")
	pods := &corev1.PodList{}
	if err := d.c.List(d.ctx, pods, client.InNamespace(deployedNS), client.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil {
		return err
	}
	fmt.Printf("    %-32s %-7s %-9s %-12s %s\n", "NAME", "READY", "STATUS", "IP", "NODE")
	var pod corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			pod = p
			fmt.Printf("    %-32s %-7s %-9s %-12s %s\n", p.Name, "1/1", p.Status.Phase, p.Status.PodIP, p.Spec.NodeName)
		}
	}
	step("kubectl -n " + deployedNS + " logs " + pod.Name + " --tail=4   # read from the kubelet through the API server")
	cs, err := kubernetes.NewForConfig(d.cfg)
	if err != nil {
		return err
	}
	logs, err := cs.CoreV1().Pods(deployedNS).GetLogs(pod.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](4)}).DoRaw(d.ctx)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		fmt.Printf("    %.150s\n", line)
	}
	step("Add entry FEATURE_Y to demo-bundle: the Pod, with its ServiceAccount's in-cluster credentials, creates its ConfigMap")
	fmt.Println(`    kubectl patch bundle demo-bundle --type=merge -p '{"spec":{"entries":{"FEATURE_Y":"on"}}}'`)
	b := &childsetv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "demo-bundle", Namespace: ns}}
	if err := d.c.Patch(d.ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"entries":{"FEATURE_Y":"on"}}}`))); err != nil {
		return err
	}
	return d.bundleChildren(b, 3)
}

// sharding runs mirror's controller on three active replicas in place of multi's, each caching
// and mirroring only the sources whose range it holds; one replica stops and its share moves.
func (d *demo) sharding() error {
	step("sharding: mirror's controller on three active replicas at once (in place of multi's), each mirroring the sources of its hash ranges (--sharding=label: a source's range is the hash of its UID)")
	d.stop("multi")
	_ = d.c.DeleteAllOf(d.ctx, &corev1.Namespace{}, client.MatchingLabels{"demo": "sharding"}) // a previous run's
	var sources []*corev1.ConfigMap
	for range 6 {
		n := localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-shard-", Labels: map[string]string{"demo": "sharding"}}})
		if err := d.c.Create(d.ctx, n); err != nil {
			return err
		}
		for i := range 4 {
			src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("settings-%d", i), Namespace: n.Name,
				Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"namespace": n.Name}}
			if err := d.c.Create(d.ctx, src); err != nil {
				return err
			}
			sources = append(sources, src)
		}
	}
	fmt.Printf("    %d sources in 6 namespaces demo-shard-*\n", len(sources))
	if err := d.install("sharding"); err != nil {
		return err
	}
	members := []string{"a", "b", "c"}
	for _, m := range members {
		if err := d.run("sharding-"+m, "sharding", "--member", m, "--sharding", "label"); err != nil {
			return err
		}
	}
	if err := d.shares(sources, members...); err != nil {
		return err
	}
	step("Stop replica b (SIGTERM): it stops its work, deletes its Lease, and its ranges move to a and c at once; then change every source")
	d.stop("sharding-b")
	for _, src := range sources {
		patch := client.MergeFrom(src.DeepCopy()) // the data alone: the sharder labelled the source meanwhile
		src.Data["namespace"] += " (changed)"
		if err := d.c.Patch(d.ctx, src, patch); err != nil {
			return err
		}
	}
	if err := d.shares(sources, "a", "c"); err != nil {
		return err
	}
	step("Stop the replicas; multi takes mirroring back for what follows")
	d.stop("sharding-a")
	d.stop("sharding-c")
	return d.start("multi")
}

// shares waits for the sharding ring to settle on members and every source's data to be in its
// child, and prints each member's share side by side (a source's range: the hash of its UID).
func (d *demo) shares(sources []*corev1.ConfigMap, members ...string) error {
	var a shard.Assignment
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var leases coordinationv1.LeaseList
		if err := d.c.List(d.ctx, &leases, client.InNamespace(ns), client.MatchingLabels{shard.RingLabel: "sharding"}); err != nil {
			return err
		}
		var err error
		if a, err = shard.Settled(leases.Items, "sharding", members...); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the ring did not settle on %v: %w", members, err)
		}
	}
	for _, src := range sources {
		child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace}}
		if err := d.waitFor(src.Name+mirror.Suffix, child, func() bool { return child.Data["namespace"] == src.Data["namespace"] }); err != nil {
			return err
		}
	}
	fmt.Printf("    assignment %d (Lease sharding):\n    MEMBER  RANGES  SOURCES\n", a.Generation)
	for _, m := range members {
		var mine []string
		for _, src := range sources {
			if a.Ranges[m].Has(shard.RangeOf(string(src.UID))) {
				mine = append(mine, strings.TrimPrefix(src.Namespace, "demo-shard-")+"/"+src.Name)
			}
		}
		fmt.Printf("    %-7s %-7d %-2d %s\n", m, a.Ranges[m].Len(), len(mine), strings.Join(mine, " "))
	}
	fmt.Printf("    every one of the %d children holds its source's data\n", len(sources))
	return nil
}
