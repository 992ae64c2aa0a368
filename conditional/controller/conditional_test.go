// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"testing"

	"github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
)

func TestMatchFirstCaseWins(t *testing.T) {
	for _, tc := range []struct {
		spec v1alpha1.ConfigProfileSpec
		want string // "" = no case matches
	}{
		{v1alpha1.ConfigProfileSpec{}, "default"},
		{v1alpha1.ConfigProfileSpec{Environment: "staging"}, "default"},
		{v1alpha1.ConfigProfileSpec{Environment: "development"}, "default"},
		{v1alpha1.ConfigProfileSpec{Environment: "production"}, "production"},
		{v1alpha1.ConfigProfileSpec{Environment: "production", ConfigFrom: "in"}, "input"},
		{v1alpha1.ConfigProfileSpec{Environment: "production", Maintenance: true, ConfigFrom: "in"}, "maintenance"},
		{v1alpha1.ConfigProfileSpec{Maintenance: true, Suspended: true}, "suspended"},
		{v1alpha1.ConfigProfileSpec{Environment: "qa"}, ""},
		{v1alpha1.ConfigProfileSpec{Environment: "qa", Suspended: true}, "suspended"},
	} {
		c, ok := Match(&v1alpha1.ConfigProfile{Spec: tc.spec})
		if ok != (tc.want != "") || c.Name != tc.want {
			t.Errorf("Match(%+v) = %q, %v; want %q", tc.spec, c.Name, ok, tc.want)
		}
	}
}

func TestIndexProfileByInput(t *testing.T) {
	if got := IndexProfileByInput(&v1alpha1.ConfigProfile{}); got != nil {
		t.Errorf("no input: %v", got)
	}
	if got := IndexProfileByInput(&v1alpha1.ConfigProfile{Spec: v1alpha1.ConfigProfileSpec{ConfigFrom: "in"}}); len(got) != 1 || got[0] != "in" {
		t.Errorf("input: %v", got)
	}
}
