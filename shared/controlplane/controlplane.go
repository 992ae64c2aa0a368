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
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
)

// Binaries are the executables found in an assets directory.
var Binaries = []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok"}

// Stages are the kwok Stage files copied from the kwok module into the assets directory's
// stages/ folder: relative to the module's kustomize/stage directory.
var Stages = []string{
	"node/fast/node-initialize.yaml",
	"node/heartbeat-with-lease/node-heartbeat-with-lease.yaml",
	"pod/fast/pod-ready.yaml",
	"pod/fast/pod-complete.yaml",
	"pod/fast/pod-delete.yaml",
}

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

// Ensure returns a directory holding every binary in Binaries and the kwok stages, building them
// if this version is not cached yet. KUBEBUILDER_ASSETS, when it names a directory that holds all
// binaries, is used as it is (for a pattern copied out of this repository).
func Ensure(ctx context.Context) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" && complete(dir) {
		return dir, nil
	}
	mod, err := findBuildModule()
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
	defer os.RemoveAll(tmp)
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

func complete(dir string) bool {
	for _, b := range Binaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// findBuildModule walks up from the working directory to the repository root.
func findBuildModule() (string, error) {
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
				strings.Join(Binaries, ", "))
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
		f.Close()
		return nil, err
	}
	return func() { _ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN); f.Close() }, nil
}

// build is a variable so tests can count builds without compiling Kubernetes.
var build = func(ctx context.Context, mod, out string) error {
	fmt.Fprintf(os.Stderr, "controlplane: building %s into %s (once per version; a cold build takes minutes)\n",
		strings.Join(Binaries, ", "), out)
	args := []string{"build", "-trimpath", "-o", out + string(filepath.Separator)}
	for _, b := range Binaries {
		args = append(args, packages[b])
	}
	if err := goCmd(ctx, mod, nil, args...); err != nil {
		return err
	}
	// go build names a binary after its package path's last element, less a major version suffix.
	for _, b := range Binaries {
		name := filepath.Base(strings.TrimSuffix(packages[b], "/v3"))
		if name != b {
			if err := os.Rename(filepath.Join(out, name), filepath.Join(out, b)); err != nil {
				return err
			}
		}
	}
	var kwokDir bytes.Buffer
	if err := goCmd(ctx, mod, &kwokDir, "list", "-m", "-f", "{{.Dir}}", "sigs.k8s.io/kwok"); err != nil {
		return err
	}
	stageDir := filepath.Join(strings.TrimSpace(kwokDir.String()), "kustomize", "stage")
	if err := os.MkdirAll(filepath.Join(out, "stages"), 0o755); err != nil {
		return err
	}
	for _, s := range Stages {
		b, err := os.ReadFile(filepath.Join(stageDir, s))
		if err != nil {
			return fmt.Errorf("kwok stage: %w", err)
		}
		if err := os.WriteFile(filepath.Join(out, "stages", filepath.Base(s)), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

func goCmd(ctx context.Context, dir string, stdout *bytes.Buffer, args ...string) error {
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=readonly", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if stdout != nil {
		cmd.Stdout = stdout
	}
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return nil
}

// StageFiles returns the paths of the kwok stage files in an assets directory.
func StageFiles(dir string) []string {
	files := make([]string, 0, len(Stages))
	for _, s := range Stages {
		files = append(files, filepath.Join(dir, "stages", filepath.Base(s)))
	}
	return files
}
