// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestCheck(t *testing.T) {
	m := func(s string) string { return module + s }
	imports := map[string][]string{
		m("shared/stages"):             {m("shared/conditions"), m("shared/status"), "fmt"},
		m("shared/status"):             {m("shared/app")}, // a primitive pulls the runtime in
		m("widget/controller"):         {m("shared/stages"), m("widget/api/v1")},
		m("widget"):                    {m("shared/testenv")},      // test support outside a test
		m("mirror/controller"):         {m("reloader/controller")}, // another pattern
		m("multi"):                     {m("reloader/controller"), m("summary/api/v1")},
		m("sharding/controller"):       {m("reloader/config")}, // not one of its members
		m("shared/frobnicate"):         nil,
		m("shared/testenv/internal/x"): {m("shared/app")},
	}
	want := []string{
		"mirror/controller imports reloader/controller: a pattern imports no other pattern (but the compositions' members)",
		"sharding/controller imports reloader/config: a pattern imports no other pattern (but the compositions' members)",
		"shared/status imports shared/app: shared/status imports no other package of shared/",
		"widget imports shared/testenv: test support, for tests only",
	}
	got := check(imports, []string{"widget", "mirror", "multi", "reloader", "summary", "sharding"})
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("problems (-want +got):\n%s", d)
	}
}
