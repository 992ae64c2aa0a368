// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/kpatterns/kpatterns/shared/testenv"
	"github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	"github.com/kpatterns/kpatterns/widget/config"
	"github.com/kpatterns/kpatterns/widget/controller"
)

// A Widget's Pods, a Widget in the operator's own namespace too, are none of the operator's.
func TestChildrenMatchNoOperatorSelector(t *testing.T) {
	testenv.NoOperatorSelectorMatches(t, config.Pattern, controller.PodLabels(&v1alpha1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "w"}}))
}
