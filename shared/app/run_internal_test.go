// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// An explicit --kubeconfig gets no client-side rate limit, as controller-runtime's own config
// loading does: client-go's default (5 requests/s) made a webhook's live reads queue until the API
// server's call timed out.
func TestExplicitKubeconfigIsNotThrottled(t *testing.T) {
	path := filepath.Join(t.TempDir(), "kubeconfig")
	kubeconfig := `apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:6443"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: x, context: {cluster: c, user: u}}]
current-context: x
`
	if err := os.WriteFile(path, []byte(kubeconfig), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := restConfig(path)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.QPS >= 0 {
		t.Errorf("QPS = %v, want client-side limiting off (< 0)", cfg.QPS)
	}
	limitQPS(cfg, 0)
	if cfg.QPS >= 0 {
		t.Errorf("--kube-api-qps 0 set QPS %v", cfg.QPS)
	}
	limitQPS(cfg, 20)
	if cfg.QPS != 20 || cfg.Burst != 20 {
		t.Errorf("--kube-api-qps 20: QPS %v, burst %d", cfg.QPS, cfg.Burst)
	}
}

func TestLeaseTiming(t *testing.T) {
	for _, tc := range []struct {
		lease, renew, retry time.Duration
		ok                  bool
	}{
		{0, 0, 0, true}, // controller-runtime's defaults
		{15 * time.Second, 10 * time.Second, 2 * time.Second, true}, // run's flag defaults
		{4 * time.Second, 2 * time.Second, 500 * time.Millisecond, true},
		{4 * time.Second, 4 * time.Second, time.Second, false}, // renew must be shorter than the lease
		{4 * time.Second, 2 * time.Second, 2 * time.Second, false},
		{4 * time.Second, 0, 0, false},
	} {
		o := RunOptions{LeaseDuration: tc.lease, RenewDeadline: tc.renew, RetryPeriod: tc.retry}
		if err := o.checkLeaseTiming(); (err == nil) != tc.ok {
			t.Errorf("%s/%s/%s: err = %v, want ok=%v", tc.lease, tc.renew, tc.retry, err, tc.ok)
		}
	}
}
