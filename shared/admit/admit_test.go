// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package admit

import (
	"context"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// A label key with "/" is escaped in the JSON pointer (RFC 6901), so the patch adds that key.
func TestLabelDefaulterEscapesTheKey(t *testing.T) {
	d := &LabelDefaulter{Decoder: admission.NewDecoder(clientgoscheme.Scheme), Kind: corev1.SchemeGroupVersion.WithKind("ConfigMap"),
		New: func() client.Object { return &corev1.ConfigMap{} }, Key: "example.com/owner", Value: "none"}
	req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create,
		Kind:   metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Object: runtime.RawExtension{Raw: []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"labels":{"a":"b"}}}`)}}}
	resp := d.Handle(context.Background(), req)
	if !resp.Allowed || len(resp.Patches) != 1 || resp.Patches[0].Path != "/metadata/labels/example.com~1owner" || resp.Patches[0].Value != "none" {
		t.Errorf("response = %+v", resp)
	}
}
