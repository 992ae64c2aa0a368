// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package dockerd gives kind and `docker build` a Docker engine: the user's where `docker info`
// already works (touched in no way), else Debian's docker.io, installed with apt-get when missing
// (root) and started for this project alone:
//
//   - its data in DataRoot (images stay between runs: the cache of built node images), its socket,
//     pid file and exec root in RunDir; DOCKER_HOST=unix://RunDir/docker.sock reaches it;
//   - no iptables or ip6tables rules, no IP forwarding, no masquerading and no default bridge:
//     the host's rules, routes and sysctls stay as they were, and a container reaches nothing but
//     its own networks (a published port is served by docker-proxy on the host);
//   - where this machine's capability bounding set lacks capabilities that a privileged container
//     asks for, containers run through capruntime (e2e/cmd/capruntime), which drops those before
//     calling runc.
//
// Down removes its containers and networks, stops it, and removes any link, mount and file of
// RunDir that it left, so the host is as it was before Up.
package dockerd

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// The engine's directories, and the address of its socket.
const (
	DataRoot = "/var/lib/kpatterns-docker"
	RunDir   = "/run/kpatterns-docker"
	Host     = "unix://" + RunDir + "/docker.sock"
)

// Works reports whether the docker CLI reaches an engine with env (nil: this process's).
func Works(ctx context.Context, env []string) bool {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}")
	cmd.Env = env
	return cmd.Run() == nil
}

// Up returns the DOCKER_HOST to use: "" where the user's engine already works, else this
// project's engine, started (and installed) first if it is not running. root is the repository
// root (capruntime is built from it).
func Up(ctx context.Context, root string) (string, error) {
	if os.Getenv("DOCKER_HOST") != Host && Works(ctx, nil) {
		return "", nil
	}
	if Works(ctx, append(os.Environ(), "DOCKER_HOST="+Host)) {
		return Host, nil
	}
	if _, err := exec.LookPath("docker"); err != nil {
		if err := controlplane.EnsurePackage("docker.io", "docker"); err != nil {
			return "", err
		}
	}
	if err := controlplane.EnsurePackage("docker.io", "dockerd"); err != nil {
		return "", err
	}
	if os.Geteuid() != 0 {
		return "", errors.New("no Docker engine answers `docker info`, and starting one needs root")
	}
	args := []string{"--data-root", DataRoot, "--exec-root", filepath.Join(RunDir, "exec"),
		"--pidfile", filepath.Join(RunDir, "dockerd.pid"), "-H", Host,
		"--iptables=false", "--ip6tables=false", "--ip-forward=false", "--ip-masq=false", "--bridge=none"}
	missing, err := MissingCaps()
	if err != nil {
		return "", err
	}
	if len(missing) > 0 {
		runtime, err := buildCapruntime(ctx, root)
		if err != nil {
			return "", err
		}
		args = append(args, "--add-runtime", "kpatterns="+runtime, "--default-runtime", "kpatterns")
	}
	if err := os.MkdirAll(RunDir, 0o700); err != nil {
		return "", err
	}
	links, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return "", fmt.Errorf("ip link: %w", err)
	}
	if err := os.WriteFile(filepath.Join(RunDir, "links-before"), links, 0o600); err != nil {
		return "", err
	}
	log, err := os.Create(filepath.Join(RunDir, "dockerd.log"))
	if err != nil {
		return "", err
	}
	defer func() { _ = log.Close() }() // the child holds its own descriptor
	cmd := exec.Command("dockerd", args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	deadline := time.Now().Add(time.Minute)
	for !Works(ctx, append(os.Environ(), "DOCKER_HOST="+Host)) {
		select {
		case err := <-exited:
			b, _ := os.ReadFile(log.Name())
			return "", fmt.Errorf("dockerd exited (%v):\n%s", err, Tail(string(b), 20))
		case <-time.After(500 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("dockerd did not answer within a minute; its log: %s", log.Name())
		}
	}
	return Host, nil
}

// Down stops this project's engine, if it runs, after removing its containers and networks, and
// removes the links and mounts it left and RunDir. Its images stay in DataRoot.
func Down(ctx context.Context) error {
	pid, running := enginePID()
	if running {
		env := append(os.Environ(), "DOCKER_HOST="+Host)
		if ids, err := Docker(ctx, env, "ps", "-aq"); err == nil && ids != "" {
			if _, err := Docker(ctx, env, append([]string{"rm", "-f"}, strings.Fields(ids)...)...); err != nil {
				return err
			}
		}
		if _, err := Docker(ctx, env, "network", "prune", "-f"); err != nil {
			return err
		}
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for deadline := time.Now().Add(time.Minute); syscall.Kill(pid, 0) == nil; time.Sleep(200 * time.Millisecond) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	}
	if err := removeNewLinks(); err != nil {
		return err
	}
	if err := unmountUnder(DataRoot, RunDir); err != nil {
		return err
	}
	return os.RemoveAll(RunDir)
}

func enginePID() (int, bool) {
	b, err := os.ReadFile(filepath.Join(RunDir, "dockerd.pid"))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && syscall.Kill(pid, 0) == nil
}

// Docker runs the docker CLI with env and returns its trimmed output, or an error with its stderr.
func Docker(ctx context.Context, env []string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	cmd.Env = env
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		return "", fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr))
	}
	return strings.TrimSpace(string(out)), nil
}

// removeNewLinks deletes the bridges and veths that were not there before Up (a network the
// engine kept configured when it stopped).
func removeNewLinks() error {
	before, err := os.ReadFile(filepath.Join(RunDir, "links-before"))
	if err != nil {
		return nil // never started by Up
	}
	now, err := exec.Command("ip", "-o", "link", "show").Output()
	if err != nil {
		return err
	}
	had := linkNames(string(before))
	for name := range linkNames(string(now)) {
		engines := strings.HasPrefix(name, "br-") || strings.HasPrefix(name, "veth") || name == "docker0"
		if had[name] || !engines {
			continue
		}
		if out, err := exec.Command("ip", "link", "delete", name).CombinedOutput(); err != nil {
			return fmt.Errorf("ip link delete %s: %w: %s", name, err, out)
		}
	}
	return nil
}

// linkNames parses `ip -o link show`: "2: eth0: <…>", "5: veth1@if4: <…>".
func linkNames(out string) map[string]bool {
	names := map[string]bool{}
	for _, line := range strings.Split(out, "\n") {
		if f := strings.SplitN(line, ": ", 3); len(f) == 3 {
			name, _, _ := strings.Cut(f[1], "@")
			names[name] = true
		}
	}
	return names
}

// unmountUnder lazily unmounts every mount below the directories, deepest first.
func unmountUnder(dirs ...string) error {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		f := strings.Fields(lines[i])
		if len(f) < 2 {
			continue
		}
		for _, d := range dirs {
			if f[1] == d || strings.HasPrefix(f[1], d+"/") {
				if err := syscall.Unmount(f[1], syscall.MNT_DETACH); err != nil && !errors.Is(err, syscall.EINVAL) {
					return fmt.Errorf("unmount %s: %w", f[1], err)
				}
			}
		}
	}
	return nil
}

// buildCapruntime builds e2e/cmd/capruntime into the project's cache.
func buildCapruntime(ctx context.Context, root string) (string, error) {
	dir, err := controlplane.CacheDir("bin")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "capruntime")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./e2e/cmd/capruntime")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building capruntime: %w: %s", err, b)
	}
	return out, nil
}

// Tail is the last n lines of s, for an error message.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
