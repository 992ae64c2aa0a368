// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package registry serves an OCI registry on this machine — go-containerregistry's pkg/registry,
// blobs on disk, manifests in memory — for images pushed with `go tool task image
// REGISTRY=localhost:PORT/kpatterns`, and points a kind cluster's nodes at it as kind's
// local-registry guide does (a hosts.toml per node). The local cluster's real node needs nothing:
// its containerd runs on this machine, and pulls from localhost over plain HTTP.
package registry

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/registry"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
)

// Server is a running registry.
type Server struct {
	srv  *http.Server
	done chan error
	addr string // the first address it serves, its port chosen if addrs gave 0
}

// Addr is the first address the registry serves (host:port).
func (s *Server) Addr() string { return s.addr }

// Start serves the registry on each of addrs (host:port; 127.0.0.1 and, for kind, its network's
// gateway) with blobs under dir.
func Start(dir string, addrs ...string) (*Server, error) {
	if len(addrs) == 0 {
		return nil, errors.New("registry: no address to serve")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &Server{srv: &http.Server{ReadHeaderTimeout: 10 * time.Second,
		Handler: registry.New(registry.WithBlobHandler(registry.NewDiskBlobHandler(dir)), registry.Logger(log.New(io.Discard, "", 0)))},
		done: make(chan error, len(addrs))}
	var listeners []net.Listener
	for _, a := range addrs {
		l, err := net.Listen("tcp", a)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return nil, fmt.Errorf("registry: %w", err)
		}
		listeners = append(listeners, l)
	}
	s.addr = listeners[0].Addr().String()
	for _, l := range listeners {
		go func() { s.done <- s.srv.Serve(l) }()
	}
	return s, nil
}

// Close stops serving.
func (s *Server) Close() error { return s.srv.Close() }

// Wait blocks until ctx ends, then stops serving; an error serving ends it earlier.
func (s *Server) Wait(ctx context.Context) error {
	select {
	case err := <-s.done:
		return err
	case <-ctx.Done():
		shut, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(shut); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	}
}

// ConfigureKind points the containerd of each node of kind cluster `cluster` at the registry:
// images named localhost:<port>/… are pulled from http://<gateway>:<port>, the registry's address
// on kind's network. The nodes' containerd reads certs.d on each pull (kindnode.Config sets its
// config_path), so no restart is needed.
func ConfigureKind(ctx context.Context, env []string, cluster, gateway string, port int) error {
	nodes, err := dockerd.Docker(ctx, env, "ps", "--filter", "label=io.x-k8s.kind.cluster="+cluster, "--format", "{{.Names}}")
	if err != nil {
		return err
	}
	if nodes == "" {
		return fmt.Errorf("kind cluster %s has no running node", cluster)
	}
	host := fmt.Sprintf("localhost:%d", port)
	toml := fmt.Sprintf("server = %q\n\n[host.%q]\n  capabilities = [\"pull\", \"resolve\"]\n",
		"http://"+host, fmt.Sprintf("http://%s:%d", gateway, port))
	for _, node := range strings.Fields(nodes) {
		script := fmt.Sprintf("mkdir -p /etc/containerd/certs.d/%[1]s && printf '%%s' '%[2]s' > /etc/containerd/certs.d/%[1]s/hosts.toml", host, toml)
		if _, err := dockerd.Docker(ctx, env, "exec", node, "sh", "-c", script); err != nil {
			return err
		}
	}
	return nil
}
