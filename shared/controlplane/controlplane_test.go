// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controlplane

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func fakeBinaries(t *testing.T, dir string) {
	t.Helper()
	for _, b := range Binaries {
		if err := os.WriteFile(filepath.Join(dir, b), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
}

// Several callers at once with an empty cache: one builds, the others wait and reuse its result.
func TestEnsureBuildsOnceUnderConcurrency(t *testing.T) {
	t.Setenv("KPATTERNS_CACHE", t.TempDir())
	t.Setenv("KUBEBUILDER_ASSETS", "")
	var builds atomic.Int32
	orig := ControlPlane.Build
	t.Cleanup(func() { ControlPlane.Build = orig })
	ControlPlane.Build = func(_ context.Context, b *Builder) error {
		builds.Add(1)
		time.Sleep(200 * time.Millisecond) // hold the lock while the others arrive
		fakeBinaries(t, b.Out)
		return nil
	}
	var wg sync.WaitGroup
	dirs := make([]string, 8)
	for i := range dirs {
		wg.Go(func() {
			d, err := Ensure(context.Background())
			if err != nil {
				t.Error(err)
			}
			dirs[i] = d
		})
	}
	wg.Wait()
	if n := builds.Load(); n != 1 {
		t.Fatalf("%d builds, want 1", n)
	}
	for _, d := range dirs {
		if d != dirs[0] || !holds(d, Binaries) {
			t.Fatalf("callers got %v, want one complete directory", dirs)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(dirs[0]))
	for _, e := range entries {
		if e.IsDir() && e.Name() != filepath.Base(dirs[0]) {
			t.Errorf("left behind: %s", e.Name())
		}
	}
}

// A failed build leaves no directory that a later caller would take for complete.
func TestEnsureFailedBuildLeavesNothing(t *testing.T) {
	t.Setenv("KPATTERNS_CACHE", t.TempDir())
	t.Setenv("KUBEBUILDER_ASSETS", "")
	orig := ControlPlane.Build
	t.Cleanup(func() { ControlPlane.Build = orig })
	ControlPlane.Build = func(_ context.Context, b *Builder) error {
		_ = os.WriteFile(b.Path("etcd"), nil, 0o755) // half a build
		return os.ErrDeadlineExceeded
	}
	if _, err := Ensure(context.Background()); err == nil {
		t.Fatal("Ensure succeeded after a failed build")
	}
	ControlPlane.Build = func(_ context.Context, b *Builder) error { fakeBinaries(t, b.Out); return nil }
	if d, err := Ensure(context.Background()); err != nil || !holds(d, Binaries) {
		t.Fatalf("Ensure after a failed build: %s, %v", d, err)
	}
}

func TestKubebuilderAssetsWinsOnlyWhenComplete(t *testing.T) {
	t.Setenv("KPATTERNS_CACHE", t.TempDir())
	assets := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", assets)
	orig := ControlPlane.Build
	t.Cleanup(func() { ControlPlane.Build = orig })
	ControlPlane.Build = func(_ context.Context, b *Builder) error { fakeBinaries(t, b.Out); return nil }
	if d, _ := Ensure(context.Background()); d == assets {
		t.Fatal("an empty KUBEBUILDER_ASSETS was used")
	}
	fakeBinaries(t, assets)
	if d, _ := Ensure(context.Background()); d != assets {
		t.Fatalf("Ensure = %s, want KUBEBUILDER_ASSETS %s", d, assets)
	}
}

// Integration tests need only etcd and kube-apiserver: a KUBEBUILDER_ASSETS from setup-envtest.
func TestKubebuilderAssetsWithEnvtestBinariesOnly(t *testing.T) {
	t.Setenv("KPATTERNS_CACHE", t.TempDir())
	assets := t.TempDir()
	t.Setenv("KUBEBUILDER_ASSETS", assets)
	for _, b := range EnvtestBinaries {
		if err := os.WriteFile(filepath.Join(assets, b), nil, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	orig := ControlPlane.Build
	t.Cleanup(func() { ControlPlane.Build = orig })
	ControlPlane.Build = func(context.Context, *Builder) error { t.Error("built although the assets suffice"); return nil }
	if d, err := Ensure(context.Background(), EnvtestBinaries...); err != nil || d != assets {
		t.Fatalf("Ensure(envtest binaries) = %s, %v; want %s", d, err, assets)
	}
	ControlPlane.Build = func(_ context.Context, b *Builder) error { fakeBinaries(t, b.Out); return nil }
	if d, err := Ensure(context.Background()); err != nil || d == assets {
		t.Fatalf("Ensure(all) = %s, %v; want the cache, not assets without kube-controller-manager", d, err)
	}
}

// A build step says what it runs and when it is done, so a first run is never silent.
func TestStepReportsProgress(t *testing.T) {
	var out bytes.Buffer
	orig := Progress
	t.Cleanup(func() { Progress = orig })
	Progress = &out
	b := &Builder{Root: t.TempDir()}
	if err := b.Go(context.Background(), "[1/5] etcd", ".", nil, "env", "GOVERSION"); err != nil {
		t.Fatal(err)
	}
	if got := out.String(); !strings.Contains(got, "controlplane: [1/5] etcd ...\n") || !strings.Contains(got, "controlplane: [1/5] etcd done in ") {
		t.Errorf("progress = %q", got)
	}
	if err := b.Go(context.Background(), "bad", ".", nil, "no-such-command"); err == nil || !strings.Contains(err.Error(), "go no-such-command") {
		t.Errorf("a failed step: %v", err)
	}
}

// KubernetesVersion names what tools/controlplane builds (and what setup-envtest is asked for).
func TestKubernetesVersionIsPinned(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "tools", "controlplane", "go.mod"))
	if err != nil {
		t.Skip("not in this repository:", err) // a copy of this package in a starter
	}
	if want := "\tk8s.io/kubernetes v" + KubernetesVersion + "\n"; !strings.Contains(string(b), want) {
		t.Errorf("tools/controlplane/go.mod does not require %q", strings.TrimSpace(want))
	}
}

// A set that can be downloaded is downloaded and not built; a download that fails, or leaves a
// binary out, is said in one line and the set is built instead, with nothing of the download
// left beside what the build made.
func TestDownloadThenBuild(t *testing.T) {
	t.Setenv("KUBEBUILDER_ASSETS", "")
	var out bytes.Buffer
	orig := Progress
	t.Cleanup(func() { Progress = orig })
	Progress = &out
	built := func(_ context.Context, b *Builder) error { fakeBinaries(t, b.Out); return nil }
	for _, tc := range []struct {
		name     string
		download func(context.Context, *Builder) error
		want     string // the line
		building bool
	}{
		{"downloaded", func(_ context.Context, b *Builder) error { fakeBinaries(t, b.Out); return nil }, "downloaded in", false},
		{"failed", func(_ context.Context, b *Builder) error {
			_ = os.WriteFile(b.Path("leftover"), nil, 0o644)
			return os.ErrDeadlineExceeded
		}, "not downloaded (i/o timeout); building from Go modules instead", true},
		{"partial", func(_ context.Context, b *Builder) error {
			return os.WriteFile(b.Path("etcd"), nil, 0o755)
		}, "not downloaded (not every binary was downloaded); building", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KPATTERNS_CACHE", t.TempDir())
			out.Reset()
			var builds int
			s := ControlPlane
			s.Download = tc.download
			s.Build = func(ctx context.Context, b *Builder) error { builds++; return built(ctx, b) }
			dir, err := EnsureSet(context.Background(), s)
			if err != nil || !holds(dir, Binaries) {
				t.Fatalf("EnsureSet: %s, %v", dir, err)
			}
			if (builds == 1) != tc.building {
				t.Errorf("%d builds, want building %v", builds, tc.building)
			}
			if !strings.Contains(out.String(), tc.want) {
				t.Errorf("progress %q does not say %q", out.String(), tc.want)
			}
			if _, err := os.Stat(filepath.Join(dir, "leftover")); err == nil {
				t.Error("the failed download's file was left in the built directory")
			}
		})
	}
}
