// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// stuck is a manager whose Start does what controller-runtime v0.25's does when stopped before
// its caches synced (kubernetes-sigs/controller-runtime#3440): it never returns.
type stuck struct{ manager.Manager }

func (stuck) Start(context.Context) error { select {} }

// returns is a manager whose Start returns err once its context ends.
type returns struct {
	manager.Manager
	err error
}

func (r returns) Start(ctx context.Context) error { <-ctx.Done(); return r.err }

func TestStartIsBoundedOnceStopped(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err := start(ctx, stuck{}, 10*time.Millisecond)
	if err == nil || !strings.Contains(err.Error(), "had not stopped 10ms after it was told to") {
		t.Fatalf("a manager that never returns: start returned %v", err)
	}
	want := errors.New("leader election lost")
	if err := start(ctx, returns{err: want}, time.Minute); !errors.Is(err, want) {
		t.Fatalf("a manager that returns: start returned %v, want its error", err)
	}
}
