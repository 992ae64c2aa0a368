// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controlplane builds the Kubernetes control-plane binaries (etcd, kube-apiserver,
// kube-controller-manager, kube-scheduler, kwok) from the Go modules pinned in
// tools/controlplane, once per version, into a shared cache directory. Other sets of binaries
// (the e2e suite's real node) are built and cached the same way through EnsureSet.
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

// KubernetesVersion is the control plane's version, pinned in tools/controlplane.
const KubernetesVersion = "1.37.2"

// Binaries are the control plane's executables.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// EnvtestBinaries are what integration tests need: the assets a kubebuilder user has from
// setup-envtest.
var EnvtestBinaries = []string{"etcd", "kube-apiserver"}

// A Set is binaries built from build modules of this repository that are kept out of go.work,
// cached once per version: a change to a module's go.mod or go.sum names a new cache directory,
// so stale binaries are never reused.
type Set struct {
	Name     string   // the cache directory's prefix: what the modules pin, for a reader of the cache
	Modules  []string // the build modules, relative to the repository root
	Binaries []string // what a complete directory holds
	Sources  []string // Go files of the build modules its binaries are built from, if any
	// Build builds Binaries into b.Out, one b.Go step at a time.
	Build func(ctx context.Context, b *Builder) error
	// Download, if set, is tried before Build: it fetches the same versions' released binaries
	// into b.Out. Where it fails or leaves a binary out, one line says why and Build runs.
	Download func(ctx context.Context, b *Builder) error
}

// ControlPlane is etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok, built from
// tools/controlplane one binary at a time: packages they share are compiled by the first and
// reused from the build cache by the rest, and every step can say which component it is on.
var ControlPlane = Set{
	Name: "k8s-v" + KubernetesVersion, Modules: []string{"tools/controlplane"}, Binaries: Binaries,
	Build: func(ctx context.Context, b *Builder) error {
		packages := map[string]string{
			"etcd":                    "go.etcd.io/etcd/server/v3",
			"kube-apiserver":          "k8s.io/kubernetes/cmd/kube-apiserver",
			"kube-controller-manager": "k8s.io/kubernetes/cmd/kube-controller-manager",
			"kube-scheduler":          "k8s.io/kubernetes/cmd/kube-scheduler",
			"kwok":                    "sigs.k8s.io/kwok/cmd/kwok",
		}
		if err := b.Go(ctx, "downloading modules", "tools/controlplane", nil, "mod", "download"); err != nil {
			return err
		}
		for i, name := range Binaries {
			what := fmt.Sprintf("[%d/%d] %s", i+1, len(Binaries), name)
			if err := b.Go(ctx, what, "tools/controlplane", nil, "build", "-trimpath", "-o", b.Path(name), packages[name]); err != nil {
				return err
			}
		}
		return nil
	},
}

// Kwok is kwok alone, from the same module: what a kind cluster needs beside its own control plane
// (a fake node), without compiling Kubernetes' components first.
var Kwok = Set{
	Name: "kwok", Modules: []string{"tools/controlplane"}, Binaries: []string{"kwok"},
	Build: func(ctx context.Context, b *Builder) error {
		return b.Go(ctx, "kwok", "tools/controlplane", nil, "build", "-trimpath", "-o", b.Path("kwok"), "sigs.k8s.io/kwok/cmd/kwok")
	},
}

// Cached returns s's cache directory and true if it is complete, building nothing.
func Cached(s Set) (string, bool) {
	_, dir, err := setDir(s)
	return dir, err == nil && holds(dir, s.Binaries)
}

// setDir returns the repository root s builds in and the cache directory of s's version.
func setDir(s Set) (root, dir string, err error) {
	if root, err = findRoot(s); err != nil {
		return "", "", err
	}
	key, err := versionKey(root, s)
	if err != nil {
		return "", "", err
	}
	cache, err := cacheRoot()
	if err != nil {
		return "", "", err
	}
	return root, filepath.Join(cache, key), nil
}

// Ensure returns a directory holding the binaries named in need (every one of Binaries if none
// is named), building the ControlPlane set if this version is not cached yet. KUBEBUILDER_ASSETS,
// when it names a directory that holds every needed binary, is used as it is (for a pattern copied
// out of this repository: integration tests need only EnvtestBinaries).
func Ensure(ctx context.Context, need ...string) (string, error) {
	return EnsureOf(ctx, ControlPlane, need...)
}

// EnsureOf is Ensure with s, a variant of ControlPlane (one that downloads), in its place.
func EnsureOf(ctx context.Context, s Set, need ...string) (string, error) {
	if len(need) == 0 {
		need = s.Binaries
	}
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" && holds(dir, need) {
		return dir, nil
	}
	return EnsureSet(ctx, s)
}

// EnsureSet returns the cache directory of s's version, building s into it first if it is not
// complete. Several processes may ask at once: one builds under an exclusive file lock while the
// others wait, and the directory appears whole by rename.
func EnsureSet(ctx context.Context, s Set) (string, error) {
	root, dir, err := setDir(s)
	if err != nil {
		return "", err
	}
	cache, key := filepath.Dir(dir), filepath.Base(dir)
	if holds(dir, s.Binaries) {
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
	if holds(dir, s.Binaries) { // another process built it while we waited for the lock
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
	names := strings.Join(s.Binaries, ", ")
	b := &Builder{Root: root, Out: tmp, start: time.Now()}
	if s.Download != nil {
		err := s.Download(ctx, b)
		if err == nil && !holds(tmp, s.Binaries) {
			err = errors.New("not every binary was downloaded")
		}
		if err == nil {
			_, _ = fmt.Fprintf(Progress, "controlplane: %s downloaded in %s\n", names, since(b.start))
			return dir, publish(tmp, dir)
		}
		_, _ = fmt.Fprintf(Progress, "controlplane: %s not downloaded (%v); building from Go modules instead\n", names, err)
		if err := emptyDir(tmp); err != nil {
			return "", err
		}
	}
	_, _ = fmt.Fprintf(Progress, "controlplane: building %s once for this version\n", names)
	if err := s.Build(ctx, b); err != nil {
		return "", err
	}
	if !holds(tmp, s.Binaries) {
		return "", fmt.Errorf("building %s: not every binary was built", names)
	}
	return dir, publish(tmp, dir)
}

// publish makes the complete directory tmp the cache directory dir.
func publish(tmp, dir string) error {
	_ = os.RemoveAll(dir) // a partial directory left by an older layout
	return os.Rename(tmp, dir)
}

// emptyDir removes what dir holds, keeping dir.
func emptyDir(dir string) error {
	entries, err := os.ReadDir(dir)
	for _, e := range entries {
		if err == nil {
			err = os.RemoveAll(filepath.Join(dir, e.Name()))
		}
	}
	return err
}

func holds(dir string, binaries []string) bool {
	for _, b := range binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// findRoot walks up from the working directory to the repository root: the directory that holds
// s's first build module.
func findRoot(s Set) (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, s.Modules[0], "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("building " + strings.Join(s.Binaries, ", ") + ": no " + s.Modules[0] +
				" above the working directory; set KUBEBUILDER_ASSETS to a directory with the binaries")
		}
		dir = parent
	}
}

// versionKey names the cache directory after the pinned versions: the set's name and a hash of
// its modules' go.mod and go.sum.
func versionKey(root string, s Set) (string, error) {
	h := sha256.New()
	var files []string
	for _, m := range s.Modules {
		files = append(files, filepath.Join(m, "go.mod"), filepath.Join(m, "go.sum"))
	}
	for _, f := range append(files, s.Sources...) {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return "", err
		}
		h.Write(b)
	}
	return s.Name + "-" + hex.EncodeToString(h.Sum(nil))[:12], nil
}

func cacheRoot() (string, error) { return CacheDir("controlplane") }

// CacheDir is the directory sub of the project's cache: $KPATTERNS_CACHE, else kpatterns/ in the
// user's cache directory (~/.cache/kpatterns).
func CacheDir(sub string) (string, error) {
	if d := os.Getenv("KPATTERNS_CACHE"); d != "" {
		return filepath.Join(d, sub), nil
	}
	d, err := os.UserCacheDir()
	if err != nil {
		return "", err
	}
	return filepath.Join(d, "kpatterns", sub), nil
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

// A Builder runs the go commands of one Set's build.
type Builder struct {
	Root  string // the repository root
	Out   string // where the binaries go
	start time.Time
}

// Path is where the binary name goes.
func (b *Builder) Path(name string) string { return filepath.Join(b.Out, name) }

// Go runs one go command in the build module (relative to Root) with GOWORK=off,
// -mod=readonly and CGO_ENABLED=0 unless env says otherwise, reporting its start, a heartbeat,
// and its end.
func (b *Builder) Go(ctx context.Context, what, module string, env []string, args ...string) error {
	start := b.start
	if start.IsZero() {
		start = time.Now()
	}
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
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = filepath.Join(b.Root, module)
	cmd.Env = append(append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0"), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	_, _ = fmt.Fprintf(Progress, "controlplane: %s done in %s (%s in all)\n", what, since(began), since(start))
	return nil
}

func since(t time.Time) time.Duration { return time.Since(t).Round(time.Second) }

// EnsurePackage installs a Debian package with apt-get, as root, when what it provides (a file,
// or a command on PATH) is missing.
func EnsurePackage(pkg, provides string) error {
	present := func() bool {
		if filepath.IsAbs(provides) {
			_, err := os.Stat(provides)
			return err == nil
		}
		_, err := exec.LookPath(provides)
		return err == nil
	}
	if present() {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is missing: install the Debian package %s (apt-get install %s, as root)", provides, pkg, pkg)
	}
	_, _ = fmt.Fprintf(Progress, "installing %s with apt-get (for %s)\n", pkg, provides)
	cmd := exec.Command("sh", "-c", "apt-get update -q && apt-get install -y -q "+pkg)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %s (for %s): %w: %s", pkg, provides, err, out)
	}
	return nil
}
