// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpatterns/kpatterns/shared/app"
)

// What the chart is rendered with is checked by Helm itself in the e2e suite (TestChart); here,
// what `chart` refuses, and that it writes a whole chart.
func TestChartCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "demo")
	for _, c := range []struct {
		args []string
		want string // in the error
	}{
		{[]string{"--image", "x/y:1"}, "--dir is required"},
		{[]string{"--dir", dir}, "--image is required"},
		{[]string{"--dir", dir, "--image", "x/y:1", "--webhook-url", "https://127.0.0.1:9443"}, "--webhook-url"},
		{[]string{"--dir", dir, "--image", "x/y:1", "--replicas", "-1"}, "--replicas"},
	} {
		err := app.Execute(context.Background(), pattern, run, nil, append([]string{"chart"}, c.args...), &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("chart %v: %v, want an error naming %s", c.args, err, c.want)
		}
	}
	if err := app.Execute(context.Background(), pattern, run, nil, []string{"manifests", "--dir", dir}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("manifests accepted --dir, which only chart has")
	}
	if err := app.Execute(context.Background(), pattern, run, nil, []string{"chart", "--dir", dir, "--image", "x/y:1.2"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"Chart.yaml", "values.yaml", "values.schema.json", "templates/_helpers.tpl", "templates/deployment-demo.yaml"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the chart has no %s: %v", f, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "Chart.yaml")); !bytes.Contains(b, []byte(`appVersion: "1.2"`)) {
		t.Errorf("Chart.yaml does not carry the image's tag as appVersion:\n%s", b)
	}

	// Written again over its own chart: a template no longer rendered goes, a file of the user's stays.
	stale, mine := filepath.Join(dir, "templates", "stale.yaml"), filepath.Join(dir, "NOTES.md")
	for _, f := range []string{stale, mine} {
		if err := os.WriteFile(f, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := app.Execute(context.Background(), pattern, run, nil, []string{"chart", "--dir", dir, "--image", "x/y:1.3"}, &bytes.Buffer{}, &bytes.Buffer{}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(stale); err == nil {
		t.Error("a template the chart no longer renders was kept")
	}
	if _, err := os.Stat(mine); err != nil {
		t.Errorf("the user's file in the chart directory was removed: %v", err)
	}

	// Any other directory that is not empty is refused and left as it was.
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "main.go"), []byte("package main"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := app.Execute(context.Background(), pattern, run, nil, []string{"chart", "--dir", other, "--image", "x/y:1"}, &bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || !strings.Contains(err.Error(), "holds no chart this command wrote") {
		t.Errorf("chart into a directory of other files: %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(other, "main.go")); err != nil {
		t.Errorf("the directory's file is gone: %v", err)
	}
}
