// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package dockerd

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// The project's engine runs a privileged container (as kind runs a node) on a network of its own,
// with docker exec into it, and leaves the host's links, routes, rules, forwarding and mounts as
// they were once it is down.
func TestEngine(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("starting a Docker engine needs root")
	}
	ctx := context.Background()
	if os.Getenv("DOCKER_HOST") != Host && Works(ctx, nil) {
		t.Skip("a Docker engine of the user's answers: the project starts none")
	}
	if Works(ctx, append(os.Environ(), "DOCKER_HOST="+Host)) {
		t.Skip("the project's engine is running (a kind cluster may be using it): not stopping it")
	}
	if err := Down(ctx); err != nil { // one left by an interrupted run
		t.Fatal(err)
	}
	before := hostState(t)
	dockerHost, err := Up(ctx, filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = Down(ctx) }()
	if dockerHost != Host {
		t.Fatalf("Up gave DOCKER_HOST %q, want %q", dockerHost, Host)
	}
	env := append(os.Environ(), "DOCKER_HOST="+Host)
	image := importImage(t, env)
	run(t, env, "network", "create", "kpatterns-test")
	run(t, env, "run", "-d", "--name", "kpatterns-test", "--privileged", "--network", "kpatterns-test", image, "sleep")
	// Privileged: CAP_SYS_ADMIN (21), and nothing the host lacks.
	host, inContainer := capBnd(t, capLine(t)), capBnd(t, run(t, env, "exec", "kpatterns-test", "/probe"))
	if inContainer&(1<<21) == 0 || inContainer&^host != 0 {
		t.Errorf("the privileged container's bounding set is %x, want CAP_SYS_ADMIN and no more than the host's %x", inContainer, host)
	}
	if err := Down(ctx); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(before, hostState(t)); diff != "" {
		t.Errorf("the host changed across Up and Down (-before +after):\n%s", diff)
	}
	if _, err := os.Stat(RunDir); !os.IsNotExist(err) {
		t.Errorf("%s is still there after Down (%v)", RunDir, err)
	}
}

// importImage makes an image of one static program, /probe, which prints its capabilities (and,
// given an argument, then sleeps): nothing is pulled.
func importImage(t *testing.T, env []string) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "main.go")
	if err := os.WriteFile(src, []byte(`package main

import ("fmt"; "os"; "strings"; "time")

func main() {
	b, _ := os.ReadFile("/proc/self/status")
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "CapBnd") { fmt.Println(l) }
	}
	if len(os.Args) > 1 { time.Sleep(time.Hour) }
}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	rootfs := filepath.Join(dir, "rootfs")
	build := exec.Command("go", "build", "-o", filepath.Join(rootfs, "probe"), src)
	build.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the probe: %v\n%s", err, out)
	}
	archive := filepath.Join(dir, "rootfs.tar")
	if out, err := exec.Command("tar", "-C", rootfs, "-cf", archive, ".").CombinedOutput(); err != nil {
		t.Fatalf("tar: %v\n%s", err, out)
	}
	run(t, env, "import", "--change", `ENTRYPOINT ["/probe"]`, archive, "kpatterns-test/probe:1")
	return "kpatterns-test/probe:1"
}

// capLine is this process's CapBnd line: a container can have at most the host's set.
func capLine(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "CapBnd") {
			return l
		}
	}
	t.Fatal("no CapBnd in /proc/self/status")
	return ""
}

// capBnd parses a "CapBnd:\t<hex>" line.
func capBnd(t *testing.T, line string) uint64 {
	t.Helper()
	hex, ok := strings.CutPrefix(strings.TrimSpace(line), "CapBnd:")
	v, err := strconv.ParseUint(strings.TrimSpace(hex), 16, 64)
	if !ok || err != nil {
		t.Fatalf("not a CapBnd line: %q (%v)", line, err)
	}
	return v
}

func run(t *testing.T, env []string, args ...string) string {
	t.Helper()
	out, err := Docker(context.Background(), env, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// hostState is what an engine could change on the host: links, routes, packet filter rules,
// forwarding and mounts. The local cluster's real node (the e2e package, which may run at the
// same time) adds links and routes of its own, kpnN and the unreachable Service range: those
// lines are left out; mounts count where they are an engine's.
func hostState(t *testing.T) map[string]string {
	t.Helper()
	if err := controlplane.EnsurePackage("nftables", "nft"); err != nil {
		t.Fatal(err)
	}
	keep := func(s string, want func(string) bool) string {
		var kept []string
		for _, l := range strings.Split(s, "\n") {
			if want(l) {
				kept = append(kept, l)
			}
		}
		return strings.Join(kept, "\n")
	}
	notLocalCluster := func(l string) bool { return !strings.Contains(l, "kpn") && !strings.Contains(l, "10.0.0.0/16") }
	state := map[string]string{}
	for name, cmd := range map[string][]string{
		"links":  {"ip", "-br", "link"},
		"routes": {"ip", "route", "show", "table", "all"},
		"nft":    {"nft", "list", "ruleset"},
	} {
		out, err := exec.Command(cmd[0], cmd[1:]...).Output()
		if err != nil {
			t.Fatalf("%s: %v", strings.Join(cmd, " "), err)
		}
		state[name] = keep(string(out), notLocalCluster)
	}
	for _, f := range []string{"/proc/sys/net/ipv4/ip_forward", "/proc/sys/net/ipv6/conf/all/forwarding"} {
		b, _ := os.ReadFile(f)
		state[f] = string(b)
	}
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	state["mounts"] = keep(string(b), func(l string) bool {
		return strings.Contains(l, "docker") || strings.Contains(l, "containerd") || strings.Contains(l, "overlay")
	})
	return state
}
