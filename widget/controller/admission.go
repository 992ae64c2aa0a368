// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
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
	// Paths of the handlers, as in the markers below.
	MutatePath   = "/mutate-patterns-kpatterns-dev-v1alpha1-widget"
	ValidatePath = "/validate-patterns-kpatterns-dev-v1alpha1-widget"
)

// +kubebuilder:webhook:path=/mutate-patterns-kpatterns-dev-v1alpha1-widget,mutating=true,failurePolicy=fail,sideEffects=None,groups=patterns.kpatterns.dev,resources=widgets,verbs=create;update,versions=v1alpha1,name=mutate.widget.patterns.kpatterns.dev,admissionReviewVersions=v1,timeoutSeconds=5
// +kubebuilder:webhook:path=/validate-patterns-kpatterns-dev-v1alpha1-widget,mutating=false,failurePolicy=fail,sideEffects=None,groups=patterns.kpatterns.dev,resources=widgets,verbs=create;update,versions=v1alpha1,name=validate.widget.patterns.kpatterns.dev,admissionReviewVersions=v1,timeoutSeconds=5
// The live GET of widget-policy needs no rule of its own: the controller's get on ConfigMaps
// (widget.go) covers it. A resourceNames rule here was redundant — the least-privilege run
// (`go tool task chaos`) found no test that failed without it.

var widgetGVK = v1alpha1.GroupVersion.WithKind("Widget")

// SetupWebhooks registers the Widget's admission handlers on the manager's webhook server: the
// mutating one labels a Widget without a team label team=unassigned; the policy is read live
// through the API reader.
func SetupWebhooks(mgr ctrl.Manager) error {
	dec := admission.NewDecoder(mgr.GetScheme())
	admit.Register(mgr, MutatePath, &admit.LabelDefaulter{Decoder: dec, Kind: widgetGVK, Key: TeamLabel, Value: Unassigned,
		New: func() client.Object { return &v1alpha1.Widget{} }})
	admit.Register(mgr, ValidatePath, &Validator{Decoder: dec, Policy: mgr.GetAPIReader()})
	return nil
}

// Validator holds a Widget to its namespace's policy, read live.
type Validator struct {
	Decoder admission.Decoder
	Policy  client.Reader
}

// Handle implements admission.Handler.
func (v *Validator) Handle(ctx context.Context, req admission.Request) admission.Response {
	if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
		return admission.Allowed("")
	}
	w := &v1alpha1.Widget{}
	if resp, ok := admit.Decode(v.Decoder, req.Kind, widgetGVK, req.Object, w); !ok {
		return resp
	}
	var old *v1alpha1.Widget
	if req.Operation == admissionv1.Update {
		old = &v1alpha1.Widget{}
		if resp, ok := admit.Decode(v.Decoder, req.Kind, widgetGVK, req.OldObject, old); !ok {
			return resp
		}
	}
	policy, err := admit.Policy(ctx, v.Policy, req.Namespace, PolicyConfigMap)
	if err != nil {
		return admission.Errored(http.StatusInternalServerError, err)
	}
	if err := Admit(w, old, policy); err != nil {
		var denial admit.Denial
		if errors.As(err, &denial) {
			return admission.Denied(err.Error())
		}
		return admission.Errored(http.StatusInternalServerError, err)
	}
	return admission.Allowed("")
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
