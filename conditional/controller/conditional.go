// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller reconciles a ConfigProfile in two stages: Config picks the first matching
// case and ensures the generated ConfigMap; Workload, which needs Config's digest, stamps it on an
// owned Deployment's Pod template, so a new configuration rolls the Pods and an unchanged one
// writes nothing. A case may wait (suspended) or read an input ConfigMap named in the spec; a
// profile that no case matches is a terminal error, reported in its status.
package controller

import (
	"context"
	"fmt"
	"maps"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/digest"
	"github.com/kpatterns/kpatterns/shared/index"
	"github.com/kpatterns/kpatterns/shared/rollout"
	"github.com/kpatterns/kpatterns/shared/stages"
	"github.com/kpatterns/kpatterns/shared/status"
)

const (
	// Name is the pattern's name.
	Name = "conditional"
	// Label marks the ConfigMaps this pattern caches: its generated children (value Child) and the
	// inputs a user names in spec.configFrom (value Input). No other ConfigMap is cached.
	Label = "patterns.kpatterns.dev/conditional"
	Child = "child"
	Input = "input"
	// ProfileByInputIndex indexes ConfigProfiles by spec.configFrom, for ConfigMap → profiles.
	ProfileByInputIndex = "conditional.profileByInput"
	// SuspendedRecheck is how often a suspended profile is looked at again (a spec change
	// reconciles it at once anyway).
	SuspendedRecheck = time.Hour
)

// Reasons of the Config stage's condition (and of Ready, which takes the first stage not ready).
const (
	ReasonSuspended      = "Suspended"
	ReasonInputMissing   = "InputMissing"
	ReasonNoMatchingCase = "NoMatchingCase"
)

// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=configprofiles,verbs=list;watch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=configprofiles/status,verbs=patch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=configprofiles/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// State is what the stages of one ConfigProfile reconcile share.
type State struct {
	*stages.Scope[*v1alpha1.ConfigProfile]
	// Digest of the generated configuration: set by Config, stamped by Workload.
	Digest string
}

// Case is one branch of the Config stage: the first whose When holds is taken. Config generates
// its configuration, or returns the Result that ends the stage instead (waiting, failed).
type Case struct {
	Name   string
	When   func(*v1alpha1.ConfigProfile) bool
	Config func(ctx context.Context, s *State) (map[string]string, *stages.Result)
}

// Cases in order. The environment cases accept only the environments they name: a profile no case
// matches is a terminal error, never a guess.
var Cases = []Case{
	{Name: "suspended", When: func(p *v1alpha1.ConfigProfile) bool { return p.Spec.Suspended }, Config: suspended},
	{Name: "maintenance", When: func(p *v1alpha1.ConfigProfile) bool { return p.Spec.Maintenance },
		Config: values(map[string]string{"mode": "maintenance", "read-only": "true", "log-level": "info"})},
	{Name: "input", When: func(p *v1alpha1.ConfigProfile) bool { return p.Spec.ConfigFrom != "" }, Config: readInput},
	{Name: "production", When: func(p *v1alpha1.ConfigProfile) bool { return p.Spec.Environment == "production" },
		Config: values(map[string]string{"mode": "production", "log-level": "warn", "cache": "enabled"})},
	{Name: "default", When: func(p *v1alpha1.ConfigProfile) bool {
		return p.Spec.Environment == "" || p.Spec.Environment == "development" || p.Spec.Environment == "staging"
	}, Config: values(map[string]string{"mode": "development", "log-level": "debug"})},
}

func values(config map[string]string) func(context.Context, *State) (map[string]string, *stages.Result) {
	return func(context.Context, *State) (map[string]string, *stages.Result) { return config, nil }
}

func suspended(context.Context, *State) (map[string]string, *stages.Result) {
	r := stages.Waiting(ReasonSuspended, "the profile is suspended: nothing is generated or rolled out", SuspendedRecheck)
	return nil, &r
}

// readInput reads spec.configFrom from the cache; its label change or creation reconciles the
// profile again through MapConfigMapToProfiles.
func readInput(ctx context.Context, s *State) (map[string]string, *stages.Result) {
	p := s.Object
	cm := &corev1.ConfigMap{}
	err := s.Reader().Get(ctx, client.ObjectKey{Namespace: p.Namespace, Name: p.Spec.ConfigFrom}, cm)
	if apierrors.IsNotFound(err) || (err == nil && cm.Labels[Label] != Input) {
		r := stages.Waiting(ReasonInputMissing, fmt.Sprintf("waiting for ConfigMap %s labelled %s=%s", p.Spec.ConfigFrom, Label, Input), 0)
		return nil, &r
	}
	if err != nil {
		r := stages.Failed(err)
		return nil, &r
	}
	return cm.Data, nil
}

// Match returns the first case whose When holds, and false if none does.
func Match(p *v1alpha1.ConfigProfile) (Case, bool) {
	for _, c := range Cases {
		if c.When(p) {
			return c, true
		}
	}
	return Case{}, false
}

// Stages of a ConfigProfile, in order.
var Stages = []stages.Stage[*State]{
	{Name: "Config", Run: configStage},
	{Name: "Workload", Needs: []string{"Config"}, Run: workloadStage},
}

// Reconciler reconciles ConfigProfiles through Stages.
type Reconciler struct{ stages.Clients }

// NewReconciler returns the ConfigProfile reconciler, or an error if Stages is malformed.
func NewReconciler(mgr ctrl.Manager) (*Reconciler, error) {
	if err := stages.Validate(Stages); err != nil {
		return nil, err
	}
	return &Reconciler{stages.NewClients(mgr, Name)}, nil
}

// Reconcile fetches the ConfigProfile, leaves a deleted one to garbage collection (its children carry its
// controller reference) and runs Stages. The status is patched once, deferred, only if it
// changed, whatever path the reconcile returns by.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (_ ctrl.Result, retErr error) {
	p := &v1alpha1.ConfigProfile{}
	if err := r.Client.Get(ctx, req.NamespacedName, p); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !p.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, nil
	}
	patcher := status.NewPatcher(r.Client, p)
	defer patcher.PatchOnReturn(ctx, p, &retErr)
	return stages.Run(ctx, patcher, &State{Scope: stages.NewScope(&r.Clients, p)}, Stages)
}

// CacheOptions caches only this pattern's ConfigMaps (children and labelled inputs) and its own
// Deployments.
func CacheOptions(o *cache.Options) {
	stages.CacheChildren(o, Name, &appsv1.Deployment{})
	req, err := labels.NewRequirement(Label, selection.In, []string{Child, Input})
	if err != nil {
		panic(err) // constant input
	}
	app.CacheByObject(o, &corev1.ConfigMap{}, cache.ByObject{Label: labels.NewSelector().Add(*req)})
}

// IndexProfileByInput is the index function of ProfileByInputIndex.
func IndexProfileByInput(obj client.Object) []string {
	if in := obj.(*v1alpha1.ConfigProfile).Spec.ConfigFrom; in != "" {
		return []string{in}
	}
	return nil
}

// MapConfigMapToProfiles maps a cached ConfigMap to the profiles that read it, through the index.
func MapConfigMapToProfiles(c client.Reader) handler.MapFunc {
	return index.MapByName(c, func() client.ObjectList { return &v1alpha1.ConfigProfileList{} }, ProfileByInputIndex)
}

// SetupIndexes registers the field index the input ConfigMap watch maps through on indexer, the
// cache it reads (the manager's: mgr.GetFieldIndexer()).
func SetupIndexes(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &v1alpha1.ConfigProfile{}, ProfileByInputIndex, IndexProfileByInput)
}

// Setup registers the index and the controller: spec changes, owned children, and changes to an
// input ConfigMap reconcile the profile.
func Setup(mgr ctrl.Manager) error {
	if err := SetupIndexes(context.Background(), mgr.GetFieldIndexer()); err != nil {
		return err
	}
	r, err := NewReconciler(mgr)
	if err != nil {
		return err
	}
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ConfigProfile{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Watches(&corev1.ConfigMap{}, handler.EnqueueRequestsFromMapFunc(MapConfigMapToProfiles(mgr.GetClient()))).
		Complete(r)
}

func configStage(ctx context.Context, s *State) stages.Result {
	p := s.Object
	c, ok := Match(p)
	if !ok {
		p.Status.MatchedCase = ""
		return stages.Terminal(ReasonNoMatchingCase, fmt.Errorf("no case matches environment %q: use production, staging, development or leave it empty", p.Spec.Environment))
	}
	p.Status.MatchedCase = c.Name
	generated, stop := c.Config(ctx, s)
	if stop != nil {
		return *stop
	}
	config := maps.Clone(generated)
	if config == nil {
		config = map[string]string{}
	}
	maps.Copy(config, p.Spec.Settings) // settings win over the case's values
	ac := corev1ac.ConfigMap(p.Name, p.Namespace).WithLabels(map[string]string{Label: Child}).WithData(config)
	if err := s.Ensure(ctx, ac, &corev1.ConfigMap{}); err != nil {
		return stages.Failed(err)
	}
	s.Digest = digest.Map(config)
	return stages.Done(fmt.Sprintf("case %s: %d keys", c.Name, len(config)))
}

// PodLabels select a ConfigProfile's Pods.
func PodLabels(p *v1alpha1.ConfigProfile) map[string]string {
	return map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/instance": p.Name}
}

func workloadStage(ctx context.Context, s *State) stages.Result {
	p := s.Object
	podLabels := PodLabels(p)
	ac := appsv1ac.Deployment(p.Name, p.Namespace).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(1).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(podLabels)).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(podLabels).
			WithAnnotations(map[string]string{digest.Annotation: s.Digest}).
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
				WithName("app").
				WithImage(p.Spec.Image).
				WithEnvFrom(corev1ac.EnvFromSource().WithConfigMapRef(corev1ac.ConfigMapEnvSource().WithName(p.Name)))))))
	d := &appsv1.Deployment{}
	if err := s.Ensure(ctx, ac, d); err != nil {
		return stages.Failed(err)
	}
	p.Status.ConfigDigest = s.Digest
	if why := rollout.Pending(d, 1); why != "" {
		return stages.Waiting("Progressing", why, 0)
	}
	return stages.Done("configuration " + s.Digest[:12] + " rolled out")
}
