// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controlplane builds the Kubernetes control-plane binaries (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok) from the Go modules pinned in
// tools/controlplane, once per version, into a shared cache directory.
//
// Several processes (parallel `go test` packages, the e2e suite, `task cluster:up`) may ask for
// the binaries at the same time: one builds under an exclusive file lock while the others wait,
// and the finished directory appears atomically by rename, so nobody sees half a build.
package controlplane

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Binaries are the executables found in an assets directory.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// EnvtestBinaries are what integration tests need: the assets a kubebuilder user has from
// setup-envtest.
var EnvtestBinaries = []string{"etcd", "kube-apiserver"}

// packages maps a binary name to its main package in the build module.
var packages = map[string]string{
	"etcd":                    "go.etcd.io/etcd/server/v3",
	"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
	"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
	"kube-scheduler":          "k8s.io/kubernetes/cmd/kube-scheduler",
	"kwok":                    "sigs.k8s.io/kwok/cmd/kwok",
}

// buildModule is the module, relative to the repository root, that pins the versions.
const buildModule = "tools/controlplane"

// Ensure returns a directory holding the binaries named in need (every one of Binaries if none
// is named), building all of Binaries if this version is not cached yet. KUBEBUILDER_ASSETS, when
// it names a directory that holds every needed binary, is used as it is (for a pattern copied out
// of this repository: integration tests need only EnvtestBinaries).
func Ensure(ctx context.Context, need ...string) (string, error) {
	if len(need) == 0 {
		need = Binaries
	}
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" && holds(dir, need) {
		return dir, nil
	}
	mod, err := findBuildModule(need)
	if err != nil {
		return "", err
	}
	key, err := versionKey(mod)
	if err != nil {
		return "", err
	}
	cache, err := cacheRoot()
	if err != nil {
		return "", err
	}
	dir := filepath.Join(cache, key)
	if complete(dir) {
		return dir, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	unlock, err := lock(filepath.Join(cache, key+".lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if complete(dir) { // another process built it while we waited for the lock
		return dir, nil
	}
	tmp, err := os.MkdirTemp(cache, key+".building-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(tmp) }() // gone already after the rename below
	if err := os.Chmod(tmp, 0o755); err != nil {
		return "", err
	}
	if err := build(ctx, mod, tmp); err != nil {
		return "", err
	}
	_ = os.RemoveAll(dir) // a partial directory left by an older layout
	if err := os.Rename(tmp, dir); err != nil {
		return "", err
	}
	return dir, nil
}

func complete(dir string) bool { return holds(dir, Binaries) }

func holds(dir string, binaries []string) bool {
	for _, b := range binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// findBuildModule walks up from the working directory to the repository root.
func findBuildModule(need []string) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		mod := filepath.Join(dir, buildModule)
		if _, err := os.Stat(filepath.Join(mod, "go.mod")); err == nil {
			return mod, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("control-plane binaries: no " + buildModule +
				" above the working directory; set KUBEBUILDER_ASSETS to a directory with " +
				strings.Join(need, ", "))
		}
		dir = parent
	}
}

// versionKey names the cache directory after the pinned versions: a change to go.mod or go.sum
// yields a new directory, so stale binaries are never reused.
func versionKey(mod string) (string, error) {
	h := sha256.New()
	for _, f := range []string{"go.mod", "go.sum"} {
		b, err := os.ReadFile(filepath.Join(mod, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return "k8s-v1.37.2-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

func cacheRoot() (string, error) {
	if d := os.Getenv("KPATTERNS_CACHE"); d != "" {
		return filepath.Join(d, "controlplane"), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "kpatterns", "controlplane"), nil
}

func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, err
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		_ = f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); _ = f.Close() }, nil
}

// Progress is where a build reports what it is doing: one line per step (module download, each
// binary) and a line every HeartbeatEvery while a step runs, so a first run is never silent. Plain
// lines, readable in CI logs and on a terminal alike.
var (
	Progress       io.Writer = os.Stderr
	HeartbeatEvery           = 30 * time.Second
)

// build is a variable so tests can count builds without compiling Kubernetes.
var build = func(ctx context.Context, mod, out string) error {
	start := time.Now()
	_, _ = fmt.Fprintf(Progress, "controlplane: building %s once for this version (about 12 minutes on a cold 2-core machine)\n",
		strings.Join(Binaries, ", "))
	if err := step(ctx, start, "downloading modules", mod, "mod", "download"); err != nil {
		return err
	}
	// One binary at a time: packages they share are compiled by the first and reused from the
	// build cache by the rest, and every step can say which component it is on.
	for i, b := range Binaries {
		what := fmt.Sprintf("[%d/%d] %s", i+1, len(Binaries), b)
		if err := step(ctx, start, what, mod, "build", "-trimpath", "-o", filepath.Join(out, b), packages[b]); err != nil {
			return err
		}
	}
	return nil
}

// step runs one go command in mod, reporting its start, a heartbeat, and its end.
func step(ctx context.Context, start time.Time, what, mod string, args ...string) error {
	began := time.Now()
	_, _ = fmt.Fprintf(Progress, "controlplane: %s ...\n", what)
	done := make(chan struct{})
	defer close(done)
	go func() {
		tick := time.NewTicker(HeartbeatEvery)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
				_, _ = fmt.Fprintf(Progress, "controlplane: %s still running: %s so far, %s in all\n", what, since(began), since(start))
			}
		}
	}()
	if err := goCmd(ctx, mod, args...); err != nil {
		return err
	}
	_, _ = fmt.Fprintf(Progress, "controlplane: %s done in %s (%s in all)\n", what, since(began), since(start))
	return nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Second) }

func goCmd(ctx context.Context, dir string, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return nil
}
