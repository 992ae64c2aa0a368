// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/e2e/kindnode"
	"github.com/kpatterns/kpatterns/e2e/registry"
)

// registryPort is where registry-up serves: $REGISTRY_PORT, else 5001 (kind's guide's port).
func registryPort() (int, error) {
	s := os.Getenv("REGISTRY_PORT")
	if s == "" {
		return 5001, nil
	}
	p, err := strconv.Atoi(s)
	if err != nil || p < 1 || p > 65535 {
		return 0, fmt.Errorf("REGISTRY_PORT=%q: want a port number", s)
	}
	return p, nil
}

func registryPID(dir string) string { return filepath.Join(dir, "registry.pid") }

// registryUp starts the registry in the background (registry-serve, its blobs in dir/registry,
// its log dir/registry.log) on 127.0.0.1 and, where the kind cluster runs, on kind's network
// gateway, whose nodes it then points at it.
func registryUp(ctx context.Context, dir string) error {
	port, err := registryPort()
	if err != nil {
		return err
	}
	if b, err := os.ReadFile(registryPID(dir)); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil && syscall.Kill(pid, 0) == nil {
			return fmt.Errorf("the registry runs already (pid %d): go tool task registry:down first", pid)
		}
	}
	addrs := []string{fmt.Sprintf("127.0.0.1:%d", port)}
	// kind's nodes, where an engine runs already (the user's, or the project's): none is started.
	env := os.Environ()
	if os.Getenv("DOCKER_HOST") == "" && !dockerd.Works(ctx, nil) {
		env = append(env, "DOCKER_HOST="+dockerd.Host)
	}
	var gateway string
	if dockerd.Works(ctx, env) && kindRunning(ctx, env) {
		if gateway, err = kindnode.Gateway(ctx, env); err != nil {
			return err
		}
		addrs = append(addrs, fmt.Sprintf("%s:%d", gateway, port))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, "registry.log"))
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }()
	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.Command(self, append([]string{"registry-serve", "--dir", dir}, addrs...)...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command and its terminal
	if err := cmd.Start(); err != nil {
		return err
	}
	if err := os.WriteFile(registryPID(dir), []byte(strconv.Itoa(cmd.Process.Pid)), 0o644); err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/v2/", port))
		if err == nil {
			_ = resp.Body.Close()
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the registry did not answer within 10s (log %s): %w", log.Name(), err)
		}
	}
	if gateway != "" {
		if err := registry.ConfigureKind(ctx, env, KindCluster, gateway, port); err != nil {
			return err
		}
	}
	fmt.Printf("registry on localhost:%d (blobs in %s/registry; manifests in memory, gone with registry:down)\n", port, dir)
	if gateway != "" {
		fmt.Printf("kind cluster %s pulls localhost:%d/… from it (http://%s:%d)\n", KindCluster, port, gateway, port)
	}
	fmt.Printf("push: go tool task image PATTERN=mirror REGISTRY=localhost:%d/kpatterns\n", port)
	return nil
}

// kindRunning tells whether the project's kind cluster has a running node.
func kindRunning(ctx context.Context, env []string) bool {
	cmd := exec.CommandContext(ctx, "docker", "ps", "-q", "--filter", "label=io.x-k8s.kind.cluster="+KindCluster)
	cmd.Env = env
	out, err := cmd.Output()
	return err == nil && len(strings.TrimSpace(string(out))) > 0
}

// registryServe serves the registry on addrs until SIGTERM or SIGINT.
func registryServe(dir string, addrs []string) error {
	if len(addrs) == 0 {
		return errors.New("registry-serve: no address")
	}
	s, err := registry.Start(filepath.Join(dir, "registry"), addrs...)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	fmt.Println("registry serving on", strings.Join(addrs, ", "))
	return s.Wait(ctx)
}

// registryDown stops the registry registry-up started.
func registryDown(dir string) error {
	b, err := os.ReadFile(registryPID(dir))
	if errors.Is(err, os.ErrNotExist) {
		fmt.Println("no registry running")
		return nil
	}
	if err != nil {
		return err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%s: %w", registryPID(dir), err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); syscall.Kill(pid, 0) == nil; time.Sleep(100 * time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("the registry (pid %d) did not stop within 10s", pid)
		}
	}
	fmt.Println("registry stopped")
	return errors.Join(os.Remove(registryPID(dir)), os.RemoveAll(filepath.Join(dir, "registry")))
}
