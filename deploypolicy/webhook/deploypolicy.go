// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook enforces a namespace's Deployment policy at admission: a mutating handler
// defaults a team label, a validating handler caps replicas (on the Deployment and on its /scale
// subresource), keeps a team label once set, and protects annotated Deployments from deletion.
// The policy is read live from a ConfigMap in the request's namespace, so a policy change applies
// to the very next request. It owns nothing and runs no controller.
package webhook

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	admissionv1 "k8s.io/api/admission/v1"
	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kpatterns/kpatterns/shared/admit"
)

const (
	// Name is the pattern's name.
	Name = "deploypolicy"
	// TeamLabel is defaulted to Unassigned and, once set, may not change.
	TeamLabel  = "team"
	Unassigned = "unassigned"
	// PolicyConfigMap in a namespace holds its policy; MaxReplicasKey its replica ceiling.
	PolicyConfigMap    = "deployment-policy"
	MaxReplicasKey     = "maxReplicas"
	DefaultMaxReplicas = 10
	// ProtectAnnotation "true" on a Deployment denies its deletion.
	ProtectAnnotation = "patterns.kpatterns.dev/protect"
	// Paths of the handlers, as in the markers below.
	MutatePath   = "/mutate-apps-v1-deployment"
	ValidatePath = "/validate-apps-v1-deployment"
)

// +kubebuilder:webhook:path=/mutate-apps-v1-deployment,mutating=true,failurePolicy=fail,sideEffects=None,groups=apps,resources=deployments,verbs=create;update,versions=v1,name=mutate.deploypolicy.patterns.kpatterns.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-apps-v1-deployment,mutating=false,failurePolicy=fail,sideEffects=None,groups=apps,resources=deployments;deployments/scale,verbs=create;update;delete,versions=v1,name=validate.deploypolicy.patterns.kpatterns.dev,admissionReviewVersions=v1,timeoutSeconds=5

// The policy ConfigMap is read live, by name, and nothing else is read.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=get,resourceNames=deployment-policy

var (
	deploymentGVK = appsv1.SchemeGroupVersion.WithKind("Deployment")
	scaleGVK      = autoscalingv1.SchemeGroupVersion.WithKind("Scale")
)

// Setup registers both handlers on the manager's webhook server: the mutating one defaults
// team=unassigned on a Deployment without a team label (an existing label is never changed;
// Deployments created before the webhook gain it on their next UPDATE). The policy reader is the
// manager's API reader: live GETs, no informer.
func Setup(mgr ctrl.Manager) error {
	dec := admission.NewDecoder(mgr.GetScheme())
	admit.Register(mgr, MutatePath, NewDefaulter(dec))
	admit.Register(mgr, ValidatePath, &Validator{Decoder: dec, Policy: mgr.GetAPIReader()})
	return nil
}

// NewDefaulter returns the mutating handler.
func NewDefaulter(dec admission.Decoder) *admit.LabelDefaulter {
	return &admit.LabelDefaulter{Decoder: dec, Kind: deploymentGVK, Key: TeamLabel, Value: Unassigned,
		New: func() client.Object { return &appsv1.Deployment{} }}
}

// Validator enforces the namespace's policy on Deployments and their /scale subresource.
type Validator struct {
	Decoder admission.Decoder
	Policy  client.Reader // live reads of the policy ConfigMap
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	switch {
	case req.SubResource == "scale":
		scale := &autoscalingv1.Scale{}
		if resp, ok := admit.Decode(v.Decoder, req.Kind, scaleGVK, req.Object, scale); !ok {
			return resp
		}
		// An update through /scale carries the old Scale: as for the Deployment, only an increase
		// is held to the maximum.
		previous := int32(-1)
		if req.Operation == admissionv1.Update {
			old := &autoscalingv1.Scale{}
			if resp, ok := admit.Decode(v.Decoder, req.Kind, scaleGVK, req.OldObject, old); !ok {
				return resp
			}
			previous = old.Spec.Replicas
		}
		return v.replicas(ctx, req.Namespace, scale.Spec.Replicas, previous)
	case req.SubResource != "":
		return admission.Allowed("")
	case req.Operation == admissionv1.Delete:
		old := &appsv1.Deployment{}
		if resp, ok := admit.Decode(v.Decoder, req.Kind, deploymentGVK, req.OldObject, old); !ok {
			return resp
		}
		if old.Annotations[ProtectAnnotation] == "true" {
			return admission.Denied("remove the protection annotation before deleting: " + ProtectAnnotation + "=true")
		}
		return admission.Allowed("")
	}
	dep := &appsv1.Deployment{}
	if resp, ok := admit.Decode(v.Decoder, req.Kind, deploymentGVK, req.Object, dep); !ok {
		return resp
	}
	previous := int32(-1)
	if req.Operation == admissionv1.Update {
		old := &appsv1.Deployment{}
		if resp, ok := admit.Decode(v.Decoder, req.Kind, deploymentGVK, req.OldObject, old); !ok {
			return resp
		}
		// The defaulted team is a placeholder: it may become a real team, once.
		if team, was := old.Labels[TeamLabel]; was && team != Unassigned && dep.Labels[TeamLabel] != team {
			return admission.Denied(fmt.Sprintf("label %s=%s is set and may not be changed or removed", TeamLabel, team))
		}
		previous = replicasOf(old)
	}
	return v.replicas(ctx, req.Namespace, replicasOf(dep), previous)
}

// replicas allows n unless it exceeds the namespace's maximum. On an update (previous >= 0) only
// an increase is held to it — and reads the policy — so a Deployment above a lowered maximum can
// still be edited or scaled down, never up, and an update that raises nothing (the garbage
// collector's metadata changes, a finalizer removed, a label) passes even under a policy that
// cannot be read or parsed: a broken policy refuses only what it governs, new replicas, and
// never wedges a namespace's deletion. Replicas raised to exactly a maximum the ConfigMap sets
// are allowed with a warning.
func (v *Validator) replicas(ctx context.Context, namespace string, n, previous int32) admission.Response {
	if previous >= 0 && n <= previous {
		return admission.Allowed("")
	}
	maxReplicas, declared, err := v.maxReplicas(ctx, namespace)
	if err != nil {
		var denial admit.Denial
		if errors.As(err, &denial) {
			return admission.Denied(denial.Error())
		}
		return admission.Errored(http.StatusInternalServerError, fmt.Errorf("reading the namespace policy: %w", err))
	}
	if n > maxReplicas && (previous < 0 || n > previous) {
		return admission.Denied(fmt.Sprintf("namespace policy allows at most %d replicas (ConfigMap %s, key %s); asked for %d",
			maxReplicas, PolicyConfigMap, MaxReplicasKey, n))
	}
	if declared && n == maxReplicas && n > 0 {
		return admission.Allowed("").WithWarnings(CeilingWarning(n))
	}
	return admission.Allowed("")
}

// CeilingWarning is the warning for replicas that reach the namespace's maximum.
func CeilingWarning(n int32) string {
	return fmt.Sprintf("replicas %d reach the namespace ceiling (ConfigMap %s, key %s): more will be denied", n, PolicyConfigMap, MaxReplicasKey)
}

// maxReplicas reads the policy live: DefaultMaxReplicas without the ConfigMap or the key
// (declared false); a value that is not a non-negative integer is a policyError (a denial naming
// the ConfigMap), never a silent default.
func (v *Validator) maxReplicas(ctx context.Context, namespace string) (maxReplicas int32, declared bool, err error) {
	policy, err := admit.Policy(ctx, v.Policy, namespace, PolicyConfigMap)
	if err != nil {
		return 0, false, err
	}
	s, ok := policy[MaxReplicasKey]
	if !ok {
		return DefaultMaxReplicas, false, nil
	}
	n, err := strconv.ParseInt(s, 10, 32)
	if err != nil || n < 0 {
		return 0, true, admit.Denial(fmt.Sprintf("ConfigMap %s/%s: %s=%q is not a non-negative integer; fix the policy", namespace, PolicyConfigMap, MaxReplicasKey, s))
	}
	return int32(n), true, nil
}

func replicasOf(d *appsv1.Deployment) int32 {
	if d.Spec.Replicas == nil {
		return 1 // the API server's default
	}
	return *d.Spec.Replicas
}
