// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package workspace reads the repository's one list of patterns.
package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Patterns are the repository's patterns in go.work's order: the modules its use block names, but
// shared, e2e and tools. go.work is the one list — the Taskfile's PATTERNS reads it too, and
// `task new` adds to it.
func Patterns(root string) ([]string, error) {
	b, err := os.ReadFile(filepath.Join(root, "go.work"))
	if err != nil {
		return nil, err
	}
	var patterns []string
	for _, line := range strings.Split(string(b), "\n") {
		dir, ok := strings.CutPrefix(strings.TrimSpace(line), "./")
		if ok && !strings.ContainsAny(dir, "/ ") && dir != "shared" && dir != "e2e" && dir != "tools" {
			patterns = append(patterns, dir)
		}
	}
	if len(patterns) == 0 {
		return nil, fmt.Errorf("%s/go.work uses no pattern module", root)
	}
	return patterns, nil
}

// ServesWebhooks reports whether a pattern serves admission webhooks: controller-gen wrote its
// config/webhook from its +kubebuilder:webhook markers.
func ServesWebhooks(root, pattern string) bool {
	_, err := os.Stat(filepath.Join(root, pattern, "config", "webhook"))
	return err == nil
}
