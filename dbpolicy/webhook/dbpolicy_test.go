// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package webhook

import (
	"context"
	"net/http"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"
)

// Unit tests of the decode path and the rules' edge cases; the rules are tested through a real
// API server in ../dbpolicy_test.go.

var databaseKind = metav1.GroupVersionKind{Group: "database.example.com", Version: "v1", Kind: "Database"}

func request(op admissionv1.Operation, kind metav1.GroupVersionKind, obj, old string) admission.Request {
	raw := func(s string) runtime.RawExtension {
		if s == "" {
			return runtime.RawExtension{}
		}
		return runtime.RawExtension{Raw: []byte(s)}
	}
	return admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Kind: kind, Namespace: "ns", Name: "db",
		Object: raw(obj), OldObject: raw(old)}}
}

const valid = `{"apiVersion":"database.example.com/v1","kind":"Database","spec":{"engine":"postgres","version":"16.2","storageGiB":20}}`

func TestBadInputIsAClearBadRequest(t *testing.T) {
	for _, tc := range []struct {
		name string
		req  admission.Request
		says string
	}{
		{"wrong kind", request(admissionv1.Create, metav1.GroupVersionKind{Group: "apps", Version: "v1", Kind: "Deployment"}, valid, ""), "expected database.example.com/v1, Kind=Database, got apps/v1 Deployment"},
		{"another version", request(admissionv1.Create, metav1.GroupVersionKind{Group: "database.example.com", Version: "v2", Kind: "Database"}, valid, ""), "got database.example.com/v2 Database"},
		{"no object", request(admissionv1.Create, databaseKind, "", ""), "the request carries no Database"},
		{"truncated", request(admissionv1.Create, databaseKind, valid[:50], ""), "decoding the Database"},
		{"storage of the wrong type", request(admissionv1.Create, databaseKind, `{"spec":{"storageGiB":"20Gi"}}`, ""), "decoding the Database"},
		{"update without the old object", request(admissionv1.Update, databaseKind, valid, ""), "the request carries no Database"},
	} {
		resp := Validator{}.Handle(context.Background(), tc.req)
		if resp.Allowed || resp.Result == nil || resp.Result.Code != http.StatusBadRequest || !strings.Contains(resp.Result.Message, tc.says) {
			t.Errorf("%s: allowed=%v result=%+v, want 400 saying %q", tc.name, resp.Allowed, resp.Result, tc.says)
		}
	}
}

func TestRules(t *testing.T) {
	spec := func(s string) string { return `{"spec":` + s + `}` }
	for _, tc := range []struct {
		name     string
		op       admissionv1.Operation
		obj, old string
		says     string // "" = allowed
	}{
		{"complete", admissionv1.Create, valid, "", ""},
		{"JSON field names are case-sensitive", admissionv1.Create, spec(`{"Engine":"postgres","version":"16.2","storageGiB":20}`), "", "spec.engine: Required value"},
		{"negative storage", admissionv1.Create, spec(`{"engine":"postgres","version":"16.2","storageGiB":-1}`), "", "must be positive"},
		{"major only is not a version", admissionv1.Create, spec(`{"engine":"mysql","version":"8","storageGiB":1}`), "", "must be a version like"},
		{"a leading v is a version", admissionv1.Create, spec(`{"engine":"mysql","version":"v8.0.36","storageGiB":1}`), "", ""},
		{"grow", admissionv1.Update, spec(`{"engine":"postgres","version":"16.2","storageGiB":21}`), valid, ""},
		{"upgrade from a patch-less version", admissionv1.Update, spec(`{"engine":"postgres","version":"16.2.1","storageGiB":20}`), valid, ""},
		{"versions compare numerically", admissionv1.Update, spec(`{"engine":"postgres","version":"16.10","storageGiB":20}`), spec(`{"engine":"postgres","version":"16.9","storageGiB":20}`), ""},
		{"and not as text", admissionv1.Update, spec(`{"engine":"postgres","version":"16.9","storageGiB":20}`), spec(`{"engine":"postgres","version":"16.10","storageGiB":20}`), "cannot be downgraded from 16.10 to 16.9"},
		{"shrink", admissionv1.Update, spec(`{"engine":"postgres","version":"16.2","storageGiB":19}`), valid, "cannot shrink from 20 to 19 GiB"},
		{"all three at once", admissionv1.Update, spec(`{"engine":"mysql","version":"9.1","storageGiB":1}`), valid, "cannot shrink from 20 to 1 GiB"},
		{"old object created before the policy", admissionv1.Update, valid, spec(`{}`), ""},
		{"old object with an unparsable version", admissionv1.Update, valid, spec(`{"engine":"postgres","version":"latest","storageGiB":20}`), ""},
	} {
		resp := Validator{}.Handle(context.Background(), request(tc.op, databaseKind, tc.obj, tc.old))
		switch {
		case tc.says == "" && !resp.Allowed:
			t.Errorf("%s: denied: %v", tc.name, resp.Result.Message)
		case tc.says != "" && resp.Allowed:
			t.Errorf("%s: allowed, want a denial saying %q", tc.name, tc.says)
		case tc.says != "" && !strings.Contains(resp.Result.Message, tc.says):
			t.Errorf("%s: denial %q does not say %q", tc.name, resp.Result.Message, tc.says)
		}
	}
}

// FuzzValidator feeds arbitrary objects and old objects to the handler: it must never panic and
// must always answer, a refusal always with a message.
func FuzzValidator(f *testing.F) {
	f.Add([]byte(valid), []byte(valid), true)
	f.Add([]byte(`{"spec":{"storageGiB":9223372036854775807,"version":"99999999999999999999.1"}}`), []byte(valid), true)
	f.Add([]byte(`{"spec":null}`), []byte(`[`), true)
	f.Add([]byte(`{"spec":{"engine":1}}`), []byte(nil), false)
	f.Fuzz(func(t *testing.T, obj, old []byte, update bool) {
		op := admissionv1.Create
		if update {
			op = admissionv1.Update
		}
		req := admission.Request{AdmissionRequest: admissionv1.AdmissionRequest{Operation: op, Kind: databaseKind,
			Object: runtime.RawExtension{Raw: obj}, OldObject: runtime.RawExtension{Raw: old}}}
		resp := Validator{}.Handle(context.Background(), req)
		if !resp.Allowed && (resp.Result == nil || resp.Result.Message == "") {
			t.Fatalf("a refusal without a message: %+v", resp)
		}
	})
}
