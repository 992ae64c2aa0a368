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
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Unit tests of the decode path and the rules; the cache, the live fallback and the collapse of
// concurrent misses are tested through a real API server in ../podpolicy_test.go. Here both
// readers are controller-runtime's fake client.

var podKind = metav1.GroupVersionKind{Version: "v1", Kind: "Pod"}

func validator(labels map[string]string) *Validator {
	c := fake.NewClientBuilder().WithObjects(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: labels}}).Build()
	return &Validator{Decoder: admission.NewDecoder(clientgoscheme.Scheme), Cache: c, Live: c}
}

func request(kind metav1.GroupVersionKind, obj string) admission.Request {
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: admissionv1.Create, Kind: kind,
		Namespace: "ns", Object: runtime.RawExtension{Raw: []byte(obj)}}}
}

const validPod = `{"apiVersion":"v1","kind":"Pod","metadata":{"name":"p"},"spec":{"containers":[{"name":"app","image":"nginx"}]}}`

func TestBadInputIsAClearBadRequest(t *testing.T) {
	v := validator(map[string]string{AllowPodsLabel: "true"})
	for _, tc := range []struct {
		name, obj, says string
		kind            metav1.GroupVersionKind
	}{
		{"wrong kind", validPod, "expected /v1, Kind=Pod, got apps/v1 Deployment", metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}},
		{"no object", "", "the request carries no Pod", podKind},
		{"truncated", validPod[:30], "decoding the Pod", podKind},
		{"a field of the wrong type", `{"apiVersion":"v1","kind":"Pod","spec":{"hostNetwork":"yes"}}`, "decoding the Pod", podKind},
	} {
		resp := v.Handle(context.Background(), request(tc.kind, tc.obj))
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || !strings.Contains(resp.Result.Message, tc.says) {
			t.Errorf("%s: allowed=%v result=%+v, want 400 saying %q", tc.name, resp.Allowed, resp.Result, tc.says)
		}
	}
}

func TestViolations(t *testing.T) {
	ns := func(labels ...string) *corev1.Namespace {
		n := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{}}}
		for _, l := range labels {
			n.Labels[l] = "true"
		}
		return n
	}
	priv := &corev1.SecurityContext{Privileged: ptr.To(true)}
	pod := corev1.Pod{Spec: corev1.PodSpec{HostIPC: true,
		InitContainers: []corev1.Container{{Name: "init", SecurityContext: priv}},
		Containers:     []corev1.Container{{Name: "app", SecurityContext: priv}, {Name: "side", SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(false)}}}}}
	for _, tc := range []struct {
		name string
		ns   *corev1.Namespace
		want []string
	}{
		{"pods not allowed: one reason, the first that matters", ns(AllowPrivilegedLabel), []string{"namespace ns does not allow Pods (label patterns.kpatterns.dev/allow-pods=true)"}},
		{"every violation named", ns(AllowPodsLabel), []string{
			"container init is privileged; namespace ns does not allow it (label patterns.kpatterns.dev/allow-privileged=true)",
			"container app is privileged; namespace ns does not allow it (label patterns.kpatterns.dev/allow-privileged=true)",
			"hostIPC: namespace ns does not allow host namespaces (label patterns.kpatterns.dev/allow-host-namespaces=true)"}},
		{"privileged allowed", ns(AllowPodsLabel, AllowPrivilegedLabel), []string{
			"hostIPC: namespace ns does not allow host namespaces (label patterns.kpatterns.dev/allow-host-namespaces=true)"}},
		{"all allowed", ns(AllowPodsLabel, AllowPrivilegedLabel, AllowHostNamespacesLabel), nil},
		{"a label must say true", &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", Labels: map[string]string{AllowPodsLabel: "yes"}}},
			[]string{"namespace ns does not allow Pods (label patterns.kpatterns.dev/allow-pods=true)"}},
	} {
		got := violations(tc.ns, &pod)
		if strings.Join(got, "\n") != strings.Join(tc.want, "\n") {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
}

func TestStripNamespaceKeepsWhatThePolicyReads(t *testing.T) {
	in := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"a": "b"},
		Annotations: map[string]string{"big": strings.Repeat("x", 1000)}, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m"}}},
		Spec: corev1.NamespaceSpec{Finalizers: []corev1.FinalizerName{"kubernetes"}}}
	out, err := StripNamespace(in)
	if err != nil {
		t.Fatal(err)
	}
	want := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{"a": "b"}}}
	if got := out.(*corev1.Namespace); got.String() != want.String() {
		t.Errorf("stripped = %v, want %v", got, want)
	}
	if tomb, _ := StripNamespace("tombstone"); tomb != "tombstone" {
		t.Errorf("a non-Namespace is returned as it is, got %v", tomb)
	}
}

// FuzzValidator feeds arbitrary Pods to the handler: it must never panic and must always
// answer, a refusal always with a message.
func FuzzValidator(f *testing.F) {
	f.Add([]byte(validPod))
	f.Add([]byte(`{"spec":{"hostPID":true,"containers":[{"name":"a","securityContext":{"privileged":true}}]}}`))
	f.Add([]byte(`{"spec":{"containers":[{"securityContext":null}],"initContainers":null}}`))
	f.Add([]byte(`null`))
	v := validator(map[string]string{AllowPodsLabel: "true"})
	f.Fuzz(func(t *testing.T, obj []byte) {
		resp := v.Handle(context.Background(), request(podKind, string(obj)))
		if !resp.Allowed && (resp.Result == nil || resp.Result.Message == "") {
			t.Fatalf("a refusal without a message: %+v", resp)
		}
	})
}
