// Package controller rolls opted-in Deployments when a ConfigMap they reference changes: it
// stamps a digest of the referenced ConfigMaps on the Pod template. It owns nothing: it watches
// ConfigMaps it does not own and finds the Deployments that reference one through a field index.
package controller

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/index"
)

const (
	// Name is the pattern's name; its field manager is kpatterns-reloader.
	Name = "reloader"
	// OptIn labels the Deployments the reloader manages (value "true"); only those are cached.
	OptIn = "patterns.kpatterns.dev/reloader"
	// ConfigMapsAnnotation on the Deployment's own metadata records a short digest of each
	// referenced ConfigMap ("name=digest,..."), so a rollout can name the ConfigMaps that changed.
	// The Pod template carries the combined digest under digest.Annotation.
	ConfigMapsAnnotation = "patterns.kpatterns.dev/configmap-digests"
	// DeploymentByConfigMapIndex indexes Deployments by the ConfigMaps they reference ("<name>"
	// within the Deployment's namespace: controller-runtime scopes field indexes by namespace).
	DeploymentByConfigMapIndex = "reloader.deploymentByConfigMap"
	// ReasonRollingOut is the reason of the Normal event on a Deployment the reloader rolls.
	ReasonRollingOut = "RollingOut"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Ref is one ConfigMap a Pod template references.
type Ref struct {
	Name     string
	Optional bool // every reference to it is optional
}

// Refs returns the ConfigMaps a Pod template references, sorted by name: volumes, projected
// volume sources, and envFrom and env valueFrom of containers and init containers. A ConfigMap
// is optional only if every reference to it is.
func Refs(spec *corev1.PodSpec) []Ref {
	required := map[string]bool{}
	add := func(name string, optional *bool) {
		if name == "" {
			return
		}
		required[name] = required[name] || optional == nil || !*optional
	}
	for _, v := range spec.Volumes {
		if v.ConfigMap != nil {
			add(v.ConfigMap.Name, v.ConfigMap.Optional)
		}
		if v.Projected != nil {
			for _, s := range v.Projected.Sources {
				if s.ConfigMap != nil {
					add(s.ConfigMap.Name, s.ConfigMap.Optional)
				}
			}
		}
	}
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		for _, e := range c.EnvFrom {
			if e.ConfigMapRef != nil {
				add(e.ConfigMapRef.Name, e.ConfigMapRef.Optional)
			}
		}
		for _, e := range c.Env {
			if e.ValueFrom != nil && e.ValueFrom.ConfigMapKeyRef != nil {
				add(e.ValueFrom.ConfigMapKeyRef.Name, e.ValueFrom.ConfigMapKeyRef.Optional)
			}
		}
	}
	refs := make([]Ref, 0, len(required))
	for _, name := range slices.Sorted(maps.Keys(required)) {
		refs = append(refs, Ref{Name: name, Optional: !required[name]})
	}
	return refs
}

// Digests returns a digest of each referenced ConfigMap, in the order of refs: its name, data and
// binaryData, every field tagged and length-prefixed so different contents never encode alike. A
// missing ConfigMap (get returns nil) is an explicit "absent" entry (Reconcile writes one only for
// optional references). A label change is no change.
func Digests(refs []Ref, get func(name string) *corev1.ConfigMap) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		d := digest.New().Field('n', []byte(r.Name))
		if cm := get(r.Name); cm == nil {
			d.Field('a', nil)
		} else {
			d.Strings(cm.Data).Bytes(cm.BinaryData)
		}
		out[i] = d.String()
	}
	return out
}

// Digest is the Pod template's digest of the referenced ConfigMaps: Combined(Digests(refs, get)).
func Digest(refs []Ref, get func(name string) *corev1.ConfigMap) string {
	return Combined(Digests(refs, get))
}

// Combined is the Pod template's digest: a digest of the per-ConfigMap digests, in name order.
func Combined(digests []string) string {
	d := digest.New()
	for _, s := range digests {
		d.Field('d', []byte(s))
	}
	return d.String()
}

// shortDigests is the value of ConfigMapsAnnotation.
func shortDigests(refs []Ref, digests []string) string {
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = r.Name + "=" + digests[i][:12]
	}
	return strings.Join(parts, ",")
}

// changed names the ConfigMaps whose short digest differs between two ConfigMapsAnnotation
// values (added, changed or no longer referenced), sorted.
func changed(before, after string) []string {
	parse := func(v string) map[string]string {
		m := map[string]string{}
		for _, part := range strings.Split(v, ",") {
			if name, d, ok := strings.Cut(part, "="); ok {
				m[name] = d
			}
		}
		return m
	}
	b, a := parse(before), parse(after)
	var names []string
	for name := range maps.Keys(b) {
		if a[name] != b[name] {
			names = append(names, name)
		}
	}
	for name := range maps.Keys(a) {
		if _, ok := b[name]; !ok {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names
}

// CacheOptions caches only opted-in Deployments; ConfigMaps are cached (without managedFields,
// as every object here) because any of them may be referenced.
func CacheOptions(o *cache.Options) {
	app.CacheByObject(o, &appsv1.Deployment{}, cache.ByObject{Label: labels.SelectorFromSet(labels.Set{OptIn: "true"})})
	// Every ConfigMap, unscoped: any of them may be referenced. Declared so that a composition
	// (app.Compose) never narrows it to another pattern's selection.
	app.CacheByObject(o, &corev1.ConfigMap{}, cache.ByObject{})
}

// IndexDeploymentByConfigMap is the field index function of DeploymentByConfigMapIndex.
func IndexDeploymentByConfigMap(obj client.Object) []string {
	refs := Refs(&obj.(*appsv1.Deployment).Spec.Template.Spec)
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Name
	}
	return names
}

// Reconciler keeps one Deployment's digest annotation current.
type Reconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
}

// Setup registers the index and the controller: a Deployment event reconciles that Deployment; a
// ConfigMap event reconciles exactly the Deployments whose index entry names it. The queue is
// keyed by Deployment, so changes to several of its ConfigMaps in a burst coalesce.
func Setup(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &appsv1.Deployment{}, DeploymentByConfigMapIndex, IndexDeploymentByConfigMap); err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&appsv1.Deployment{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(MapConfigMapToDeployments(mgr.GetClient()))).
		Complete(&Reconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder(Name)})
}

// MapConfigMapToDeployments maps a ConfigMap to the cached Deployments that reference it, through
// the index.
func MapConfigMapToDeployments(c client.Reader) handler.MapFunc {
	return index.MapByName(c, func() client.ObjectList { return &appsv1.DeploymentList{} }, DeploymentByConfigMapIndex)
}

// Reconcile applies the digest of the Deployment's ConfigMaps to its Pod template, and removes it
// when no reference remains. An unchanged digest writes nothing.
func (r *Reconciler) Reconcile(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
	d := &appsv1.Deployment{}
	if err := r.Client.Get(ctx, req.NamespacedName, d); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	if d.DeletionTimestamp != nil {
		return reconcile.Result{}, nil
	}
	refs := Refs(&d.Spec.Template.Spec)
	var getErr error
	var missing []string
	digests := Digests(refs, func(name string) *corev1.ConfigMap {
		cm := &corev1.ConfigMap{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: d.Namespace, Name: name}, cm)
		if err != nil {
			if !apierrors.IsNotFound(err) {
				getErr = err
			} else if slices.Contains(refs, Ref{Name: name, Optional: false}) {
				missing = append(missing, name) // a required reference
			}
			return nil // absent: an optional reference digests as "absent"
		}
		return cm
	})
	if getErr != nil {
		return reconcile.Result{}, getErr
	}
	if len(missing) > 0 {
		// A required ConfigMap is missing (deleted, or not created yet): new Pods could not start,
		// so nothing is rolled. Its creation reconciles again; re-created with the same data it
		// yields the same digest, and no rollout at all.
		logf.FromContext(ctx).Info("waiting for required ConfigMaps", "missing", missing)
		return reconcile.Result{}, nil
	}
	want := Combined(digests)
	current, annotated := d.Spec.Template.Annotations[digest.Annotation]
	ac := appsv1ac.Deployment(d.Name, d.Namespace)
	switch {
	case len(refs) == 0 && !annotated, len(refs) > 0 && current == want:
		return reconcile.Result{}, nil
	case len(refs) > 0:
		ac.WithAnnotations(map[string]string{ConfigMapsAnnotation: shortDigests(refs, digests)}).
			WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().
				WithAnnotations(map[string]string{digest.Annotation: want})))
	}
	// Server-side apply owns just these two annotations; applying without them (no references
	// left) removes them.
	if err := r.Client.Apply(ctx, ac, client.FieldOwner(app.FieldManager(Name)), client.ForceOwnership); err != nil {
		return reconcile.Result{}, err
	}
	note := "the Pod template's digest was out of date" // edited by hand, say
	names := changed(d.Annotations[ConfigMapsAnnotation], ac.Annotations[ConfigMapsAnnotation])
	switch {
	case !annotated:
		note = fmt.Sprintf("first digest of ConfigMap(s): %s", strings.Join(names, ", "))
	case len(names) > 0:
		note = fmt.Sprintf("rolling out for changed ConfigMap(s): %s", strings.Join(names, ", "))
	}
	r.Recorder.Eventf(d, nil, corev1.EventTypeNormal, ReasonRollingOut, "Rollout", "%s", note)
	return reconcile.Result{}, nil
}
