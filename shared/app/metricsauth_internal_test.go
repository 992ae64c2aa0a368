// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"net/http/httptest"
	"slices"
	"testing"

	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
)

// Two callers that differ only in their extra attributes (a token scoped by them, say) get
// decisions of their own: the first one's answer is never reused for the second.
func TestDecisionsKeyedByTheWholeReview(t *testing.T) {
	cs := fake.NewClientset()
	cs.PrependReactor("create", "subjectaccessreviews", func(a k8stesting.Action) (bool, runtime.Object, error) {
		r := a.(k8stesting.CreateAction).GetObject().(*authzv1.SubjectAccessReview)
		r.Status.Allowed = slices.Contains(r.Spec.Extra["scope"], "metrics")
		return true, r, nil
	})
	a := &reviewer{access: cs.AuthorizationV1().SubjectAccessReviews(), decisions: cache.NewLRUExpireCache(16)}
	req := httptest.NewRequest("GET", "/metrics", nil)
	scoped := authnv1.UserInfo{Username: "scraper", Groups: []string{"g"}, Extra: map[string]authnv1.ExtraValue{"scope": {"metrics"}}}
	other := scoped
	other.Extra = map[string]authnv1.ExtraValue{"scope": {"none"}}
	for _, c := range []struct {
		user authnv1.UserInfo
		want bool
	}{{scoped, true}, {other, false}, {scoped, true}} {
		allowed, _, err := a.authorize(req, c.user)
		if err != nil || allowed != c.want {
			t.Errorf("authorize(extra %v) = %v, %v; want %v", c.user.Extra, allowed, err, c.want)
		}
	}
	// Groups "a,b" and "a","b" are two callers too.
	joined, split := authnv1.UserInfo{Username: "u", Groups: []string{"a,b"}}, authnv1.UserInfo{Username: "u", Groups: []string{"a", "b"}}
	_, _, _ = a.authorize(req, joined)
	_, _, _ = a.authorize(req, split)
	if n := len(a.decisions.Keys()); n != 4 {
		t.Errorf("%d decisions cached, want 4 (one per distinct review)", n)
	}
}
