// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package assets finds the binaries integration tests run (etcd and kube-apiserver: what
// KUBEBUILDER_ASSETS holds for a kubebuilder project) the way kubebuilder's Makefile does, and
// builds them from Go modules only where that finds nothing:
//
//  1. KUBEBUILDER_ASSETS, when the user set it to a directory that holds them;
//  2. setup-envtest (a tool of ./tools, from its Go module) downloading the control plane's
//     version from its release index — KPATTERNS_ENVTEST_INDEX names another index (a mirror, or
//     the local server the tests serve), "none" skips the download;
//  3. the build of shared/controlplane, cached once per version.
//
// A download that fails or is incomplete falls back to the build with one line saying why.
package assets

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// IndexEnv names the setup-envtest index to download from; empty means setup-envtest's own
// default (the controller-tools releases), "none" means build without trying.
const IndexEnv = "KPATTERNS_ENVTEST_INDEX"

// DownloadTimeout bounds one setup-envtest run: the index and an archive of about 60 MB.
var DownloadTimeout = 10 * time.Minute

// Resolve returns a directory holding etcd and kube-apiserver of the control plane's version,
// trying KUBEBUILDER_ASSETS, then a download, then the build (see the package comment). What it
// chose, and why a download was not used, it says on log.
func Resolve(ctx context.Context, log io.Writer) (string, error) {
	if dir := os.Getenv("KUBEBUILDER_ASSETS"); dir != "" {
		if holds(dir) {
			return dir, nil
		}
		_, _ = fmt.Fprintf(log, "envtest: KUBEBUILDER_ASSETS=%s holds no etcd and kube-apiserver; not using it\n", dir)
	}
	binDir, err := controlplane.CacheDir("envtest")
	if err != nil {
		return "", err
	}
	return downloadThenBuild(ctx, log, binDir)
}

// downloadThenBuild downloads into binDir unless IndexEnv says none, and builds where that fails.
func downloadThenBuild(ctx context.Context, log io.Writer, binDir string) (string, error) {
	if index := os.Getenv(IndexEnv); index != "none" {
		dir, err := Download(ctx, index, binDir)
		if err == nil {
			_, _ = fmt.Fprintf(log, "envtest: etcd and kube-apiserver %s from setup-envtest in %s\n", controlplane.KubernetesVersion, dir)
			return dir, nil
		}
		_, _ = fmt.Fprintf(log, "envtest: not downloaded (%v); using etcd and kube-apiserver built from Go modules instead\n", err)
	}
	return controlplane.EnsureSet(ctx, controlplane.ControlPlane)
}

// Download runs setup-envtest as a kubebuilder project does (`setup-envtest use VERSION --bin-dir
// DIR -p path`), against index ("" for setup-envtest's default), and returns the directory it
// names once it holds etcd and kube-apiserver. setup-envtest checks each archive's SHA-512 against
// the index.
func Download(ctx context.Context, index, binDir string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, DownloadTimeout)
	defer cancel()
	args := []string{"tool", "setup-envtest", "use", controlplane.KubernetesVersion, "--bin-dir", binDir, "-p", "path"}
	if index != "" {
		args = append(args, "--index", index)
	}
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = repositoryRoot()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("setup-envtest: %v: %s", err, lastLine(stderr.String()))
	}
	dir := strings.TrimSpace(string(out))
	if !holds(dir) {
		return "", fmt.Errorf("setup-envtest named %q, which holds no etcd and kube-apiserver", dir)
	}
	return dir, nil
}

// EnvtestInto downloads etcd and kube-apiserver as Resolve does (from IndexEnv's index, into the
// cache setup-envtest keeps for integration tests) and copies them into dir. It does not build.
func EnvtestInto(ctx context.Context, dir string) error {
	index := os.Getenv(IndexEnv)
	if index == "none" {
		return errors.New(IndexEnv + "=none")
	}
	binDir, err := controlplane.CacheDir("envtest")
	if err != nil {
		return err
	}
	src, err := Download(ctx, index, binDir)
	if err != nil {
		return err
	}
	for _, b := range controlplane.EnvtestBinaries {
		data, err := os.ReadFile(filepath.Join(src, b))
		if err == nil {
			err = os.WriteFile(filepath.Join(dir, b), data, 0o755)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func holds(dir string) bool {
	for _, b := range controlplane.EnvtestBinaries {
		if fi, err := os.Stat(filepath.Join(dir, b)); err != nil || !fi.Mode().IsRegular() || fi.Mode()&0o111 == 0 {
			return false
		}
	}
	return true
}

// repositoryRoot is where `go tool setup-envtest` finds ./tools through go.work: the working
// directory's nearest parent holding go.work (the working directory itself if none does).
func repositoryRoot() string {
	wd, _ := os.Getwd()
	for dir := wd; ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, "go.work")); err == nil {
			return dir
		}
		if filepath.Dir(dir) == dir {
			return wd
		}
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}
