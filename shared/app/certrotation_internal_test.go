// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// cert-controller's cache lists and watches the operator namespace's Secrets through the scoped
// config: those requests name the pattern's Secret; a Get, another namespace's list and a list
// that already has a field selector go out as they were.
func TestScopeSecretListsNamesTheSecret(t *testing.T) {
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.URL.Path+"?"+r.URL.Query().Get("fieldSelector"))
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		_, _ = w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":404,"reason":"NotFound"}`))
	}))
	defer srv.Close()
	cs, err := kubernetes.NewForConfig(scopeSecretLists(&rest.Config{Host: srv.URL}, types.NamespacedName{Namespace: "ops", Name: "gadget-webhook-server-cert"}))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	_, _ = cs.CoreV1().Secrets("ops").List(ctx, metav1.ListOptions{})
	_, _ = cs.CoreV1().Secrets("ops").Watch(ctx, metav1.ListOptions{})
	_, _ = cs.CoreV1().Secrets("ops").Get(ctx, "other", metav1.GetOptions{})
	_, _ = cs.CoreV1().Secrets("default").List(ctx, metav1.ListOptions{})
	_, _ = cs.CoreV1().Secrets("ops").List(ctx, metav1.ListOptions{FieldSelector: "type=kubernetes.io/tls"})
	_, _ = cs.CoreV1().ConfigMaps("ops").List(ctx, metav1.ListOptions{})
	want := []string{
		"/api/v1/namespaces/ops/secrets?metadata.name=gadget-webhook-server-cert",
		"/api/v1/namespaces/ops/secrets?metadata.name=gadget-webhook-server-cert",
		"/api/v1/namespaces/ops/secrets/other?",
		"/api/v1/namespaces/default/secrets?",
		"/api/v1/namespaces/ops/secrets?type=kubernetes.io/tls",
		"/api/v1/namespaces/ops/configmaps?",
	}
	mu.Lock()
	defer mu.Unlock()
	if d := cmp.Diff(want, seen); d != "" {
		t.Errorf("requests (-want +got):\n%s", d)
	}
}
