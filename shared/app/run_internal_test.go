package app

import (
	"os"
	"path/filepath"
	"testing"
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
}
