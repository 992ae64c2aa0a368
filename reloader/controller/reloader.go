// Package controller rolls opted-in Deployments when a ConfigMap they reference changes: it
// stamps a digest of the referenced ConfigMaps on the Pod template. It owns nothing: it watches
// ConfigMaps it does not own and finds the Deployments that reference one through a field index.
package controller

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/app"
)

const (
	// Name is the pattern's name; its field manager is kpatterns-reloader.
	Name = "reloader"
	// OptIn labels the Deployments the reloader manages (value "true"); only those are cached.
	OptIn = "patterns.kpatterns.dev/reloader"
	// DigestAnnotation on the Pod template carries the digest of the referenced ConfigMaps.
	DigestAnnotation = "patterns.kpatterns.dev/config-digest"
	// RefIndex indexes Deployments by the ConfigMaps they reference ("<name>" within the
	// Deployment's namespace: controller-runtime scopes field indexes by namespace).
	RefIndex = "reloader.configMapRefs"
)

// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;patch

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

// Digest is a sha256 over the referenced ConfigMaps in name order. Every field is tagged and
// length-prefixed, so different contents never encode alike; a missing ConfigMap (nil) is an
// explicit "absent" entry (Reconcile writes one only for optional references). Only name, data
// and binaryData count: a label change is no change.
func Digest(refs []Ref, get func(name string) *corev1.ConfigMap) string {
	h := sha256.New()
	for _, r := range refs {
		field(h, 'n', []byte(r.Name))
		cm := get(r.Name)
		if cm == nil {
			field(h, 'a', nil)
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(cm.Data)) {
			field(h, 'k', []byte(k))
			field(h, 'v', []byte(cm.Data[k]))
		}
		for _, k := range slices.Sorted(maps.Keys(cm.BinaryData)) {
			field(h, 'K', []byte(k))
			field(h, 'b', cm.BinaryData[k])
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

func field(h hash.Hash, tag byte, b []byte) {
	var n [9]byte
	n[0] = tag
	binary.BigEndian.PutUint64(n[1:], uint64(len(b)))
	h.Write(n[:])
	h.Write(b)
}

// CacheOptions caches only opted-in Deployments; ConfigMaps are cached (without managedFields,
// as every object here) because any of them may be referenced.
func CacheOptions(o *cache.Options) {
	app.CacheByObject(o, &appsv1.Deployment{}, cache.ByObject{Label: labels.SelectorFromSet(labels.Set{OptIn: "true"})})
}

// IndexRefs is the field index function of RefIndex.
func IndexRefs(obj client.Object) []string {
	refs := Refs(&obj.(*appsv1.Deployment).Spec.Template.Spec)
	names := make([]string, len(refs))
	for i, r := range refs {
		names[i] = r.Name
	}
	return names
}

// Reconciler keeps one Deployment's digest annotation current.
type Reconciler struct {
	Client client.Client
}

// Setup registers the index and the controller: a Deployment event reconciles that Deployment; a
// ConfigMap event reconciles exactly the Deployments whose index entry names it. The queue is
// keyed by Deployment, so changes to several of its ConfigMaps in a burst coalesce.
func Setup(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &appsv1.Deployment{}, RefIndex, IndexRefs); err != nil {
		return err
	}
	r := &Reconciler{Client: mgr.GetClient()}
	return ctrl.NewControllerManagedBy(mgr).
		Named(Name).
		For(&appsv1.Deployment{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(r.Referencing)).
		Complete(r)
}

// Referencing maps a ConfigMap to the cached Deployments that reference it, through the index.
func (r *Reconciler) Referencing(ctx context.Context, cm client.Object) []reconcile.Request {
	list := &appsv1.DeploymentList{}
	if err := r.Client.List(ctx, list, client.InNamespace(cm.GetNamespace()), client.MatchingFields{RefIndex: cm.GetName()}); err != nil {
		logf.FromContext(ctx).Error(err, "listing Deployments that reference a ConfigMap", "configMap", cm.GetName())
		return nil
	}
	reqs := make([]reconcile.Request, len(list.Items))
	for i := range list.Items {
		reqs[i] = reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])}
	}
	return reqs
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
	digest := Digest(refs, func(name string) *corev1.ConfigMap {
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
	current, annotated := d.Spec.Template.Annotations[DigestAnnotation]
	ac := appsv1ac.Deployment(d.Name, d.Namespace)
	switch {
	case len(refs) == 0 && !annotated, len(refs) > 0 && current == digest:
		return reconcile.Result{}, nil
	case len(refs) > 0:
		ac.WithSpec(appsv1ac.DeploymentSpec().WithTemplate(corev1ac.PodTemplateSpec().
			WithAnnotations(map[string]string{DigestAnnotation: digest})))
	}
	// Server-side apply owns just this annotation; applying without it (no references left)
	// removes it.
	return reconcile.Result{}, r.Client.Apply(ctx, ac, client.FieldOwner(app.FieldManager(Name)), client.ForceOwnership)
}
