// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kpatterns/kpatterns/shared/admit"
	"github.com/kpatterns/kpatterns/widget/api/v1alpha1"
)

// Widget admission, served by the same process as the controller (every replica serves; only the
// leader reconciles). A Widget the policy denies is never stored, so it never reaches the
// controller.
const (
	// TeamLabel is defaulted to Unassigned on a Widget without one.
	TeamLabel  = "team"
	Unassigned = "unassigned"
	// PolicyConfigMap in a namespace holds its Widget policy: AllowedImagesKey, a comma-separated
	// list of image prefixes (absent: any image), and MaxReplicasKey (absent: no ceiling).
	PolicyConfigMap  = "widget-policy"
	AllowedImagesKey = "allowedImagePrefixes"
	MaxReplicasKey   = "maxReplicas"
)

// +kubebuilder:webhook:path=/mutate-patterns-kpatterns-dev-v1alpha1-widget,mutating=true,failurePolicy=fail,sideEffects=None,groups=patterns.kpatterns.dev,resources=widgets,verbs=create;update,versions=v1alpha1,name=mutate.widget.patterns.kpatterns.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-patterns-kpatterns-dev-v1alpha1-widget,mutating=false,failurePolicy=fail,sideEffects=None,groups=patterns.kpatterns.dev,resources=widgets,verbs=create;update,versions=v1alpha1,name=validate.widget.patterns.kpatterns.dev,admissionReviewVersions=v1,timeoutSeconds=5
// The live GET of widget-policy needs no rule of its own: the controller's get on ConfigMaps
// (widget.go) covers it (docs/least-privilege.md shows which test needs each rule).

// SetupWebhooks registers the Widget's typed admission handlers on the manager's webhook server,
// at the paths controller-runtime derives from the type — those of the markers above.
func SetupWebhooks(mgr ctrl.Manager) error {
	return ctrl.NewWebhookManagedBy(mgr, &v1alpha1.Widget{}).
		WithDefaulter(&Defaulter{}).
		WithValidator(&Validator{Policy: mgr.GetAPIReader()}).
		RecoverPanic(true). // a handler bug answers 500, never crashes the replica
		Complete()
}

// Defaulter labels a Widget without a team label team=unassigned; an existing label, whatever its
// value, is never changed.
type Defaulter struct{}

// Default implements admission.Defaulter.
func (*Defaulter) Default(_ context.Context, w *v1alpha1.Widget) error {
	if _, ok := w.Labels[TeamLabel]; !ok {
		if w.Labels == nil {
			w.Labels = map[string]string{}
		}
		w.Labels[TeamLabel] = Unassigned
	}
	return nil
}

// Validator holds a Widget to its namespace's policy, read live through Policy (the API reader).
type Validator struct {
	Policy client.Reader
}

// ValidateCreate implements admission.Validator.
func (v *Validator) ValidateCreate(ctx context.Context, w *v1alpha1.Widget) (admission.Warnings, error) {
	return Warnings(w, nil), v.validate(ctx, w, nil)
}

// ValidateUpdate implements admission.Validator.
func (v *Validator) ValidateUpdate(ctx context.Context, old, w *v1alpha1.Widget) (admission.Warnings, error) {
	return Warnings(w, old), v.validate(ctx, w, old)
}

// Warnings are what a Widget is admitted with but should not be: a new image that is not pinned
// (no tag, or the tag latest, and no digest), so its Pods may run different code from one
// restart to the next.
func Warnings(w, old *v1alpha1.Widget) admission.Warnings {
	image := w.Spec.Image
	if old != nil && old.Spec.Image == image || strings.Contains(image, "@") {
		return nil
	}
	if name := image[strings.LastIndex(image, "/")+1:]; strings.Contains(name, ":") && !strings.HasSuffix(image, ":latest") {
		return nil
	}
	return admission.Warnings{fmt.Sprintf("image %q is not pinned: name a tag other than latest, or a digest", image)}
}

// ValidateDelete implements admission.Validator: a deletion is never held to the policy.
func (*Validator) ValidateDelete(context.Context, *v1alpha1.Widget) (admission.Warnings, error) {
	return nil, nil
}

// validate denies with the policy's reason (admit.Denial); a policy that cannot be read answers
// 500, so the API server's failure policy decides, and the message says why.
func (v *Validator) validate(ctx context.Context, w, old *v1alpha1.Widget) error {
	policy, err := admit.Policy(ctx, v.Policy, w.Namespace, PolicyConfigMap)
	if err != nil {
		return apierrors.NewInternalError(err)
	}
	if err := Admit(w, old, policy); err != nil {
		var denial admit.Denial
		if errors.As(err, &denial) {
			return err
		}
		return apierrors.NewInternalError(err)
	}
	return nil
}

// Admit checks a Widget (and, on an update, the Widget it replaces) against a policy's data (nil:
// no policy): an admit.Denial says why not. On an update only what changed is held to the policy
// — a new image, more replicas — so tightening a policy never locks a Widget's other edits out.
func Admit(w, old *v1alpha1.Widget, policy map[string]string) error {
	if prefixes, ok := policy[AllowedImagesKey]; ok && (old == nil || old.Spec.Image != w.Spec.Image) {
		allowed := false
		var list []string
		for _, p := range strings.Split(prefixes, ",") {
			if p = strings.TrimSpace(p); p != "" {
				list = append(list, p)
				allowed = allowed || strings.HasPrefix(w.Spec.Image, p)
			}
		}
		if !allowed {
			return admit.Denial(fmt.Sprintf("image %q is not allowed by ConfigMap %s: it must start with one of %s",
				w.Spec.Image, PolicyConfigMap, strings.Join(list, ", ")))
		}
	}
	if s, ok := policy[MaxReplicasKey]; ok {
		n, err := strconv.ParseInt(s, 10, 32)
		if err != nil || n < 0 {
			return admit.Denial(fmt.Sprintf("ConfigMap %s: %s=%q is not a non-negative integer; fix the policy", PolicyConfigMap, MaxReplicasKey, s))
		}
		replicas := ptr.Deref(w.Spec.Replicas, 1)
		if int64(replicas) > n && (old == nil || replicas > ptr.Deref(old.Spec.Replicas, 1)) {
			return admit.Denial(fmt.Sprintf("ConfigMap %s allows at most %d replicas; asked for %d", PolicyConfigMap, n, replicas))
		}
	}
	return nil
}
