// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/kpatterns/kpatterns/e2e/assets"
	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// The local cluster's download path with the real clients (setup-envtest, and FetchReleases)
// against servers on 127.0.0.1 that serve setup-envtest's index and, at dl.k8s.io's and GitHub's
// paths, the release files made from the binaries built here: with an empty cache both sets are
// downloaded — never built — byte for byte as served. A corrupt file, a missing one, or a mirror
// nobody serves is an error, which EnsureSet turns into a build (TestDownloadThenBuild).
func TestReleasesDownload(t *testing.T) {
	ctx := context.Background()
	builtCP, err := controlplane.EnsureSet(ctx, ControlPlane)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := controlplane.Cached(NodeSet); !ok && os.Geteuid() != 0 {
		t.Skip("the node's binaries are not built, and building them needs root (libseccomp-dev)")
	}
	builtNode, err := controlplane.EnsureSet(ctx, NodeSet)
	if err != nil {
		t.Fatal(err)
	}
	all, err := Releases(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	rel, err := assets.ServeReleases([]string{builtCP, builtNode}, all...)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = rel.Close() }()
	idx, err := assets.ServeIndex(builtCP)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = idx.Close() }()
	t.Setenv("KPATTERNS_CACHE", t.TempDir())
	t.Setenv("KUBEBUILDER_ASSETS", "")
	t.Setenv(assets.ReleasesEnv, rel.URL)
	t.Setenv(assets.IndexEnv, idx.URL)
	var progress bytes.Buffer
	orig := controlplane.Progress
	t.Cleanup(func() { controlplane.Progress = orig })
	controlplane.Progress = &progress

	for _, c := range []struct {
		set   controlplane.Set
		built string
	}{{ControlPlane, builtCP}, {NodeSet, builtNode}, {Kwok, builtCP}} {
		s := c.set
		s.Build = func(context.Context, *controlplane.Builder) error { return errors.New("built, not downloaded") }
		dir, err := controlplane.EnsureSet(ctx, s)
		if err != nil {
			t.Fatalf("%s: %v (progress: %s)", s.Name, err, progress.String())
		}
		for _, b := range s.Binaries {
			if !sameFile(t, filepath.Join(dir, b), filepath.Join(c.built, b)) {
				t.Errorf("%s: downloaded %s differs from the one served", s.Name, b)
			}
		}
	}
	if n := strings.Count(progress.String(), "downloaded in"); n != 3 {
		t.Errorf("progress says %d sets were downloaded, want 3:\n%s", n, progress.String())
	}

	rel.Corrupt.Store(true)
	if err := assets.FetchReleases(ctx, t.TempDir(), all...); err == nil || !strings.Contains(err.Error(), "checksum mismatch") {
		t.Errorf("a corrupt file: %v, want a checksum mismatch", err)
	}
	rel.Corrupt.Store(false)
	gone := all[len(all)-1]
	gone.URL += ".gone"
	if err := assets.FetchReleases(ctx, t.TempDir(), gone); err == nil || !strings.Contains(err.Error(), "404 Not Found") {
		t.Errorf("a missing file: %v, want 404", err)
	}
	_ = rel.Close()
	if err := assets.FetchReleases(ctx, t.TempDir(), all...); err == nil || !strings.Contains(err.Error(), "connection refused") {
		t.Errorf("a mirror nobody serves: %v, want connection refused", err)
	}
}

func sameFile(t *testing.T, a, b string) bool {
	t.Helper()
	x, err := os.ReadFile(a)
	if err != nil {
		t.Fatal(err)
	}
	y, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	return bytes.Equal(x, y)
}
