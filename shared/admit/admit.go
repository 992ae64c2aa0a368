// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package admit holds what every admission handler of kpatterns does the same way: check the
// request's kind and decode its object with a clear 400 on bad input, and read a namespace's
// policy ConfigMap live.
package admit

import (
	"context"
	"fmt"
	"net/http"
	"strings"

	"gomodules.xyz/jsonpatch/v2"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Decode checks that the request is about want and decodes raw (the request's object or old
// object) into obj. A wrong kind, a missing object or one that does not decode is an HTTP 400
// with a clear message — never a panic, never a guess; ok is false then and resp is the answer.
func Decode(dec admission.Decoder, kind metav1.GroupVersionKind, want schema.GroupVersionKind, raw runtime.RawExtension, obj runtime.Object) (resp admission.Response, ok bool) {
	return decode(kind, want, raw, func() error { return dec.DecodeRaw(raw, obj) })
}

// DecodeJSON is Decode for a kind without Go types here (another operator's resource): raw is
// decoded into into, a local struct holding only the fields the policy reads. Field names match
// case-sensitively, as in the API server; fields the struct does not name are ignored, so a newer
// version of the other operator's schema still decodes.
func DecodeJSON(kind metav1.GroupVersionKind, want schema.GroupVersionKind, raw runtime.RawExtension, into any) (resp admission.Response, ok bool) {
	return decode(kind, want, raw, func() error { return utiljson.Unmarshal(raw.Raw, into) })
}

func decode(kind metav1.GroupVersionKind, want schema.GroupVersionKind, raw runtime.RawExtension, into func() error) (admission.Response, bool) {
	if kind.Group != want.Group || kind.Version != want.Version || kind.Kind != want.Kind {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("expected %s, got %s/%s %s", want, kind.Group, kind.Version, kind.Kind)), false
	}
	if len(raw.Raw) == 0 {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("the request carries no %s", want.Kind)), false
	}
	if err := into(); err != nil {
		return admission.Errored(http.StatusBadRequest, fmt.Errorf("decoding the %s: %w", want.Kind, err)), false
	}
	return admission.Response{}, true
}

// Policy reads the ConfigMap name in namespace live (a GET, no cache: a policy change applies to
// the next request) and returns its data; nil without error if it does not exist.
func Policy(ctx context.Context, live client.Reader, namespace, name string) (map[string]string, error) {
	cm := &corev1.ConfigMap{}
	err := live.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, cm)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("reading ConfigMap %s/%s: %w", namespace, name, err)
	}
	if cm.Data == nil {
		return map[string]string{}, nil
	}
	return cm.Data, nil
}

// Denial is a policy that cannot be applied as written (a malformed value, say): the request is
// denied with its message, naming the policy, rather than admitted on a silent default.
type Denial string

func (d Denial) Error() string { return string(d) }

// Register serves handler at path on the manager's webhook server, with controller-runtime's
// panic recovery: a handler bug answers 500, never crashes the replica.
func Register(mgr manager.Manager, path string, handler admission.Handler) {
	mgr.GetWebhookServer().Register(path, &admission.Webhook{Handler: handler, RecoverPanic: ptr.To(true)})
}

// LabelDefaulter is a mutating handler that adds Key=Value to an object of kind Kind without a Key
// label; an existing label, whatever its value, is never changed.
type LabelDefaulter struct {
	Decoder    admission.Decoder
	Kind       schema.GroupVersionKind
	New        func() client.Object
	Key, Value string
}

// Handle implements admission.Handler.
func (d *LabelDefaulter) Handle(_ context.Context, req admission.Request) admission.Response {
	obj := d.New()
	if resp, ok := Decode(d.Decoder, req.Kind, d.Kind, req.Object, obj); !ok {
		return resp
	}
	if _, ok := obj.GetLabels()[d.Key]; ok {
		return admission.Allowed("")
	}
	// RFC 6901: "~" and "/" in a label key are escaped in a JSON pointer.
	op := jsonpatch.JsonPatchOperation{Operation: "add", Value: d.Value,
		Path: "/metadata/labels/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(d.Key)}
	if obj.GetLabels() == nil {
		op = jsonpatch.JsonPatchOperation{Operation: "add", Path: "/metadata/labels", Value: map[string]string{d.Key: d.Value}}
	}
	return admission.Patched("defaulted label "+d.Key+"="+d.Value, op)
}
