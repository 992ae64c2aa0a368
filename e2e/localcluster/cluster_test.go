// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A component that cannot start fails Start with its log's errors, stops what did start, and
// does not panic.
func TestStartFailureIsReportedAndCleanedUp(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "pki"), 0o700); err != nil {
		t.Fatal(err)
	}
	// Start keeps the certificates of an earlier start in the same directory: a broken serving
	// key stops kube-apiserver.
	if _, err := writePKI(filepath.Join(dir, "pki")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "pki", "apiserver.key"), []byte("not PEM"), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := Start(context.Background(), dir, Options{})
	if err == nil {
		_ = c.Stop()
		t.Fatal("Start succeeded with a broken serving certificate")
	}
	if !strings.Contains(err.Error(), "kube-apiserver.log") {
		t.Errorf("the error does not point at the component's log: %v", err)
	}
	out, _ := os.ReadDir("/proc")
	for _, e := range out {
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && strings.Contains(string(cmdline), dir+"/") {
			t.Errorf("process %s still running: %q", e.Name(), strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
}
