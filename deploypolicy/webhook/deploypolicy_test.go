// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Unit tests of the decode paths; the rules themselves are tested through a real API server in
// ../deploypolicy_test.go. The policy reader here is controller-runtime's fake client.

var (
	deploymentKind = metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}
	scaleKind      = metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
)

func handlers(policy ...string) (admission.Handler, *Validator) {
	dec := admission.NewDecoder(clientgoscheme.Scheme)
	c := fake.NewClientBuilder()
	if len(policy) > 0 {
		c = c.WithObjects(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: PolicyConfigMap, Namespace: "ns"},
			Data: map[string]string{MaxReplicasKey: policy[0]}})
	}
	return NewDefaulter(dec), &Validator{Decoder: dec, Policy: c.Build()}
}

func request(op admissionv1.Operation, kind metav1.GroupVersionKind, sub string, obj, old []byte) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{
		Operation: op, Kind: kind, SubResource: sub, Namespace: "ns", Name: "d",
		Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old}}}
}

const validDeployment = `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"d","namespace":"ns"},"spec":{"replicas":2}}`

func TestBadInputIsAClearBadRequest(t *testing.T) {
	d, v := handlers()
	for _, tc := range []struct {
		name string
		h    admission.Handler
		req  admission.Request
		says string
	}{
		{"wrong kind", d, request(admissionv1.Create, metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}, "", []byte(`{}`), nil), "expected apps/v1, Kind=Deployment, got /v1 Pod"},
		{"no object", v, request(admissionv1.Create, deploymentKind, "", nil, nil), "the request carries no Deployment"},
		{"truncated", v, request(admissionv1.Create, deploymentKind, "", []byte(validDeployment[:40]), nil), "decoding the Deployment"},
		{"not json", d, request(admissionv1.Update, deploymentKind, "", []byte("\x00\xff"), nil), "decoding the Deployment"},
		{"replicas of the wrong type", v, request(admissionv1.Create, deploymentKind, "", []byte(`{"apiVersion":"apps/v1","kind":"Deployment","spec":{"replicas":"two"}}`), nil), "decoding the Deployment"},
		{"a Deployment as a Scale", v, request(admissionv1.Update, deploymentKind, "scale", []byte(validDeployment), nil), "expected autoscaling/v1, Kind=Scale"},
		{"delete without the old object", v, request(admissionv1.Delete, deploymentKind, "", nil, nil), "the request carries no Deployment"},
	} {
		resp := tc.h.Handle(context.Background(), tc.req)
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || !strings.Contains(resp.Result.Message, tc.says) {
			t.Errorf("%s: allowed=%v result=%+v, want 400 saying %q", tc.name, resp.Allowed, resp.Result, tc.says)
		}
	}
}

func TestDefaulterPatchesOnlyAMissingLabel(t *testing.T) {
	d, _ := handlers()
	resp := d.Handle(context.Background(), request(admissionv1.Create, deploymentKind, "", []byte(validDeployment), nil))
	if !resp.Allowed || len(resp.Patches) != 1 || resp.Patches[0].Path != "/metadata/labels" {
		t.Errorf("no labels: %+v", resp)
	}
	withLabels := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"a":"b"}}}`
	resp = d.Handle(context.Background(), request(admissionv1.Create, deploymentKind, "", []byte(withLabels), nil))
	if !resp.Allowed || len(resp.Patches) != 1 || resp.Patches[0].Path != "/metadata/labels/team" {
		t.Errorf("other labels: %+v", resp)
	}
	withTeam := `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"labels":{"team":"x"}}}`
	if resp = d.Handle(context.Background(), request(admissionv1.Create, deploymentKind, "", []byte(withTeam), nil)); !resp.Allowed || len(resp.Patches) != 0 {
		t.Errorf("team set: %+v", resp)
	}
}

// fuzzResponse checks what every answer must be: allowed, or a denial or error with a message.
func fuzzResponse(t *testing.T, resp admission.Response) {
	if !resp.Allowed && (resp.Result == nil || resp.Result.Message == "") {
		t.Fatalf("a refusal without a message: %+v", resp)
	}
}

// FuzzValidator feeds arbitrary objects, old objects and kinds to the validating handler: it
// must never panic and must always answer.
func FuzzValidator(f *testing.F) {
	f.Add([]byte(validDeployment), []byte(validDeployment), uint8(1), false)
	f.Add([]byte(`{"apiVersion":"autoscaling/v1","kind":"Scale","spec":{"replicas":50}}`), []byte(nil), uint8(1), true)
	f.Add([]byte(`{"metadata":{"annotations":{"patterns.kpatterns.dev/protect":"true"}}}`), []byte(`{}`), uint8(2), false)
	f.Add([]byte(`{"spec":{"replicas":-1}}`), []byte(`{"metadata":{"labels":{"team":"a"}}}`), uint8(1), false)
	f.Add([]byte(`[`), []byte(`null`), uint8(0), false)
	_, v := handlers("5")
	ops := []admissionv1.Operation{admissionv1.Create, admissionv1.Update, admissionv1.Delete, admissionv1.Connect}
	f.Fuzz(func(t *testing.T, obj, old []byte, op uint8, scale bool) {
		kind, sub := deploymentKind, ""
		if scale {
			kind, sub = scaleKind, "scale"
		}
		fuzzResponse(t, v.Handle(context.Background(), request(ops[int(op)%len(ops)], kind, sub, obj, old)))
	})
}

// FuzzDefaulter feeds arbitrary objects to the mutating handler.
func FuzzDefaulter(f *testing.F) {
	f.Add([]byte(validDeployment))
	f.Add([]byte(`{"metadata":{"labels":null}}`))
	f.Add([]byte(`{"metadata":{"labels":{"team":""}}}`))
	f.Add([]byte(`{"metadata":[]}`))
	d, _ := handlers()
	f.Fuzz(func(t *testing.T, obj []byte) {
		fuzzResponse(t, d.Handle(context.Background(), request(admissionv1.Create, deploymentKind, "", obj, nil)))
	})
}
