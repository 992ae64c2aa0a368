// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package assets

import (
	"bytes"
	"context"
	"crypto/sha256"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// The download path with the real client (setup-envtest, built from its module) against a local
// index server whose archive holds the binaries built on this machine: a complete download is
// used as it is; a cut one, or an index nobody serves, falls back to the build with one line.
func TestResolve(t *testing.T) {
	ctx := context.Background()
	built, err := controlplane.EnsureSet(ctx, controlplane.ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := ServeIndex(built)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = srv.Close() }()
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv(IndexEnv, srv.URL)

	t.Run("downloaded", func(t *testing.T) {
		var log bytes.Buffer
		binDir := t.TempDir()
		dir, err := downloadThenBuild(ctx, &log, binDir)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.HasPrefix(dir, binDir) {
			t.Fatalf("gave %s, want a directory in the download directory %s (log: %s)", dir, binDir, log.String())
		}
		for _, b := range controlplane.EnvtestBinaries {
			if sum(t, filepath.Join(dir, b)) != sum(t, filepath.Join(built, b)) {
				t.Errorf("downloaded %s differs from the one archived", b)
			}
		}
		if !strings.Contains(log.String(), "from setup-envtest") {
			t.Errorf("log %q does not say the binaries were downloaded", log.String())
		}
		// KUBEBUILDER_ASSETS set by the user comes first, without a download.
		t.Setenv("KUBEBUILDER_ASSETS", built)
		if got, err := Resolve(ctx, &log); err != nil || got != built {
			t.Errorf("with KUBEBUILDER_ASSETS=%s Resolve gave %s, %v", built, got, err)
		}
	})

	t.Run("cut short", func(t *testing.T) {
		srv.Truncate.Store(true)
		defer srv.Truncate.Store(false)
		checkFallback(t, ctx, built, "checksum mismatch")
	})

	t.Run("unreachable", func(t *testing.T) {
		down, err := ServeIndex(built)
		if err != nil {
			t.Fatal(err)
		}
		_ = down.Close()
		t.Setenv(IndexEnv, down.URL)
		checkFallback(t, ctx, built, "unable to perform request to get index")
	})
}

// checkFallback downloads with the download failing for why: one line says so and that it
// builds instead, and the build's directory is returned.
func checkFallback(t *testing.T, ctx context.Context, built, why string) {
	t.Helper()
	var log bytes.Buffer
	binDir := t.TempDir()
	dir, err := downloadThenBuild(ctx, &log, binDir)
	if err != nil {
		t.Fatal(err)
	}
	if dir != built {
		t.Errorf("fell back to %s, want the build %s", dir, built)
	}
	lines := strings.Split(strings.TrimSpace(log.String()), "\n")
	if len(lines) != 1 || !strings.Contains(lines[0], why) || !strings.Contains(lines[0], "built from Go modules instead") {
		t.Errorf("want one line saying %q and that it builds instead, got:\n%s", why, log.String())
	}
	if entries, _ := filepath.Glob(filepath.Join(binDir, "k8s", "*")); len(entries) > 0 {
		for _, e := range entries {
			if holds(e) {
				t.Errorf("a failed download left %s with binaries in it", e)
			}
		}
	}
}

func sum(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}
