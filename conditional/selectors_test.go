// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	"github.com/kpatterns/kpatterns/conditional/config"
	"github.com/kpatterns/kpatterns/conditional/controller"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// A ConfigProfile's Pods, one in the operator's own namespace too, are none of the operator's.
func TestChildrenMatchNoOperatorSelector(t *testing.T) {
	testenv.NoOperatorSelectorMatches(t, config.Pattern, controller.PodLabels(&v1alpha1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "p"}}))
}
