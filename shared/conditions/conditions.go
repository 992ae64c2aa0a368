// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package conditions holds the condition type every kpatterns custom resource reports. API
// packages do not import it (they import only apimachinery); controllers do.
package conditions

// Ready is the condition type that sums up an object: True when everything it asks for is done.
const Ready = "Ready"
