// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"
)

// Pattern is a pattern binary running `run` as a local process.
type Pattern struct {
	Cmd       *exec.Cmd
	ProbeAddr string        // host:port of /healthz and /readyz
	Exited    chan struct{} // closed when the process has exited; Err is then set
	Err       error         // the process's exit status
}

// RunPattern starts `<bin> run --as-service-account [args...]` against kubeconfig (so the
// pattern's generated RBAC is what is exercised), with its probes on a free loopback port and
// metrics off, and returns once /readyz answers 200. A detached process gets its own session and
// outlives the caller.
func RunPattern(ctx context.Context, bin, kubeconfig, namespace string, log io.Writer, detach bool, args ...string) (*Pattern, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	p := &Pattern{ProbeAddr: "127.0.0.1:" + ports[0], Exited: make(chan struct{})}
	p.Cmd = exec.Command(bin, append([]string{"run", "--as-service-account", "--kubeconfig", kubeconfig,
		"--health-probe-bind-address", p.ProbeAddr, "--metrics-bind-address", "0"}, args...)...)
	p.Cmd.Env = append(p.Cmd.Environ(), "KPATTERNS_NAMESPACE="+namespace)
	p.Cmd.Stdout, p.Cmd.Stderr = log, log
	p.Cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: detach}
	if err := p.Cmd.Start(); err != nil {
		return nil, err
	}
	go func() { p.Err = p.Cmd.Wait(); close(p.Exited) }()
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		select {
		case <-p.Exited:
			return nil, fmt.Errorf("%s exited before it was ready: %v", bin, p.Err)
		case <-ctx.Done():
			_ = p.Cmd.Process.Kill()
			return nil, fmt.Errorf("%s not ready on http://%s/readyz: %w", bin, p.ProbeAddr, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
		if resp, err := http.Get("http://" + p.ProbeAddr + "/readyz"); err == nil {
			_ = resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
	}
}

// Stop sends SIGTERM and waits for a graceful exit, killing the process after grace. Stopping a
// stopped process returns its exit status again.
func (p *Pattern) Stop(grace time.Duration) error {
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.Exited:
		return p.Err
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM", p.Cmd.Path, grace)
	}
}

// Webhook is a webhook pattern prepared to run on this machine, outside the cluster: kube-apiserver
// calls it by URL at Host (127.0.0.1 for the local cluster's; the host's address on kind's Docker
// network for kind's), trusting a development CA.
type Webhook struct {
	Dir  string // ca.crt, tls.crt, tls.key from `<bin> certs`
	Host string
	Port string
}

// PrepareWebhook writes a development CA and a serving certificate for host into dir (with the
// pattern's own `certs` command) and picks a free port.
func PrepareWebhook(bin, namespace, dir, host string) (*Webhook, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(bin, "certs", "--dir", dir, "--hosts", host, "--force")
	cmd.Env = append(cmd.Environ(), "KPATTERNS_NAMESPACE="+namespace)
	if out, err := cmd.CombinedOutput(); err != nil {
		return nil, fmt.Errorf("%s certs: %w: %s", bin, err, out)
	}
	return &Webhook{Dir: dir, Host: host, Port: ports[0]}, nil
}

// InstallArgs are the flags of `install` that point the webhook configurations at the local port.
func (w *Webhook) InstallArgs() []string {
	return []string{"--webhook-url", "https://" + net.JoinHostPort(w.Host, w.Port), "--ca-file", filepath.Join(w.Dir, "ca.crt")}
}

// RunArgs are the flags of `run` that serve there with the certificate.
func (w *Webhook) RunArgs() []string {
	return []string{"--webhook-host", w.Host, "--webhook-port", w.Port, "--cert-dir", w.Dir}
}
