// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/e2e/kindnode"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
)

// onKind says whether the demo's cluster is kind's (go tool task kind:up): no local cluster's
// supervisor runs in the state directory.
func onKind(dir string) bool {
	b, err := os.ReadFile(filepath.Join(dir, "supervisor.pid"))
	if err != nil {
		return true
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return err != nil || syscall.Kill(pid, 0) != nil
}

// prepareKind gives the kind cluster what the demo's workloads need: kwok's fake node beside
// kind's (its process left running, as the patterns' are, until kind:down), and the address on
// kind's Docker network at which kube-apiserver, inside the node, calls the webhooks the demo
// serves from this machine. The fake node joins in the background (on a new machine kwok may
// still be compiling): fakeNode says when it has.
func (d *demo) prepareKind() error {
	if err := os.MkdirAll(filepath.Join(d.dir, "logs"), 0o755); err != nil {
		return err
	}
	joined := make(chan error, 1)
	d.fakeNode = sync.OnceValue(func() error { return <-joined })
	if pid := d.pid("kwok"); pid == 0 || syscall.Kill(pid, 0) != nil {
		step("kind: kwok's fake node joins the cluster for the demo's workloads, in the background (tainted: only Pods in namespaces annotated for it go there)")
		go func() {
			kwok, err := localcluster.AddFakeNode(d.ctx, d.kubeconfig, filepath.Join(d.dir, "kwok"))
			if err == nil {
				err = os.WriteFile(filepath.Join(d.dir, "kwok.pid"), []byte(strconv.Itoa(kwok.KwokPID())), 0o644)
			}
			joined <- err
		}()
	} else {
		joined <- nil
	}
	host, err := dockerd.Up(d.ctx, filepath.Dir(d.dir))
	if err != nil {
		return err
	}
	env := os.Environ()
	if host != "" {
		env = append(env, "DOCKER_HOST="+host)
	}
	if d.webhookHost, err = kindnode.Gateway(d.ctx, env); err != nil {
		return fmt.Errorf("%w: nowhere to serve webhooks from", err)
	}
	return nil
}

// loadImage puts a pattern's image archive on the cluster's node: the real node's containerd, or
// kind's (kind load image-archive), as go tool task image:load does.
func (d *demo) loadImage(ctx context.Context, archive string) error {
	if !d.kind {
		return localcluster.LoadImages(ctx, d.dir, archive)
	}
	cmd := exec.CommandContext(ctx, "go", "run", "./e2e/cmd/cluster", "load-image", archive)
	cmd.Dir = filepath.Dir(d.dir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("kind load image-archive %s: %w: %s", archive, err, out)
	}
	return nil
}
