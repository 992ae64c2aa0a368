// Package controller reconciles a ConfigProfile in two stages: Config picks the first matching
// case and ensures the generated ConfigMap; Workload, which needs Config's digest, stamps it on an
// owned Deployment's Pod template, so a new configuration rolls the Pods and an unchanged one
// writes nothing.
package controller

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"maps"
	"slices"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	appsv1ac "k8s.io/client-go/applyconfigurations/apps/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	"github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	"github.com/kpatterns/kpatterns/shared/stages"
)

// Name is the pattern's name.
const Name = "conditional"

// DigestAnnotation on the Pod template carries the configuration's digest.
const DigestAnnotation = "patterns.kpatterns.dev/config-digest"

// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=configprofiles,verbs=get;list;watch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=configprofiles/status,verbs=get;patch
// +kubebuilder:rbac:groups=patterns.kpatterns.dev,resources=configprofiles/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=get;list;watch;create;patch
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch

// Case is one branch of the Config stage: the first whose When holds wins.
type Case struct {
	Name   string
	When   func(*v1alpha1.ConfigProfile) bool
	Config map[string]string
}

// Cases in order: maintenance mode, then production, then the default.
var Cases = []Case{
	{Name: "maintenance", When: func(p *v1alpha1.ConfigProfile) bool { return p.Spec.Maintenance },
		Config: map[string]string{"mode": "maintenance", "read-only": "true", "log-level": "info"}},
	{Name: "production", When: func(p *v1alpha1.ConfigProfile) bool { return p.Spec.Environment == "production" },
		Config: map[string]string{"mode": "production", "log-level": "warn", "cache": "enabled"}},
	{Name: "default", When: func(*v1alpha1.ConfigProfile) bool { return true },
		Config: map[string]string{"mode": "development", "log-level": "debug"}},
}

// Match returns the first matching case and the configuration it generates: the case's values
// with the profile's settings over them.
func Match(p *v1alpha1.ConfigProfile) (string, map[string]string) {
	for _, c := range Cases {
		if c.When(p) {
			config := maps.Clone(c.Config)
			maps.Copy(config, p.Spec.Settings)
			return c.Name, config
		}
	}
	panic("conditional: the last case must always match")
}

// Digest is a sha256 over the configuration's keys in order, each key and value length-prefixed,
// so that no two different configurations encode alike.
func Digest(config map[string]string) string {
	h := sha256.New()
	var n [8]byte
	for _, k := range slices.Sorted(maps.Keys(config)) {
		for _, s := range []string{k, config[k]} {
			binary.BigEndian.PutUint64(n[:], uint64(len(s)))
			h.Write(n[:])
			h.Write([]byte(s))
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Stages of a ConfigProfile, in order.
var Stages = []stages.Stage[*v1alpha1.ConfigProfile]{
	{Name: "Config", Run: configStage},
	{Name: "Workload", Needs: []string{"Config"}, Run: workloadStage},
}

// CacheOptions keeps only this pattern's own children in the child informers.
func CacheOptions(o *cache.Options) {
	stages.CacheChildren(o, Name, &corev1.ConfigMap{}, &appsv1.Deployment{})
}

// NewReconciler returns the stages reconciler of ConfigProfiles.
func NewReconciler(mgr ctrl.Manager) *stages.Reconciler[*v1alpha1.ConfigProfile] {
	return stages.NewReconciler(mgr, Name, func() *v1alpha1.ConfigProfile { return &v1alpha1.ConfigProfile{} }, Stages)
}

// Setup registers the controller.
func Setup(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).
		For(&v1alpha1.ConfigProfile{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Owns(&corev1.ConfigMap{}).
		Owns(&appsv1.Deployment{}).
		Complete(NewReconciler(mgr))
}

func configStage(ctx context.Context, s *stages.State[*v1alpha1.ConfigProfile]) stages.Result {
	p := s.Object
	matched, config := Match(p)
	if err := s.Ensure(ctx, corev1ac.ConfigMap(p.Name, p.Namespace).WithData(config), &corev1.ConfigMap{}); err != nil {
		return stages.Failed(err)
	}
	p.Status.MatchedCase = matched
	return stages.Done(Digest(config), fmt.Sprintf("case %s: %d keys", matched, len(config)))
}

func workloadStage(ctx context.Context, s *stages.State[*v1alpha1.ConfigProfile]) stages.Result {
	p := s.Object
	digest := s.Output("Config").(string)
	podLabels := map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/instance": p.Name}
	ac := appsv1ac.Deployment(p.Name, p.Namespace).WithSpec(appsv1ac.DeploymentSpec().
		WithReplicas(1).
		WithSelector(metav1ac.LabelSelector().WithMatchLabels(podLabels)).
		WithTemplate(corev1ac.PodTemplateSpec().
			WithLabels(podLabels).
			WithAnnotations(map[string]string{DigestAnnotation: digest}).
			WithSpec(corev1ac.PodSpec().WithContainers(corev1ac.Container().
				WithName("app").
				WithImage(p.Spec.Image).
				WithEnvFrom(corev1ac.EnvFromSource().WithConfigMapRef(corev1ac.ConfigMapEnvSource().WithName(p.Name)))))))
	d := &appsv1.Deployment{}
	if err := s.Ensure(ctx, ac, d); err != nil {
		return stages.Failed(err)
	}
	p.Status.ConfigDigest = digest
	if why := stages.RolloutPending(d, 1); why != "" {
		return stages.Waiting("Progressing", why, 0)
	}
	return stages.Done(nil, "configuration "+digest[:12]+" rolled out")
}
