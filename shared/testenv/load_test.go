// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"testing"
	"time"
)

func TestBusySince(t *testing.T) {
	then := CPUTimes{idle: 100, total: 200}
	if got := (CPUTimes{idle: 130, total: 300}).BusySince(then); got != 70 {
		t.Errorf("busy = %v%%, want 70%%", got)
	}
	if got := then.BusySince(then); got != 0 {
		t.Errorf("no time passed: busy = %v%%, want 0", got)
	}
}

func TestPercentile(t *testing.T) {
	lat := []time.Duration{1, 2, 3, 4, 5, 6, 7, 8, 9, 10}
	if got := Percentile(lat, 50); got != 6 {
		t.Errorf("p50 = %v, want 6", got)
	}
	if got := Percentile(lat, 99); got != 10 {
		t.Errorf("p99 = %v, want 10", got)
	}
	if got := Percentile(nil, 99); got != 0 {
		t.Errorf("p99 of nothing = %v, want 0", got)
	}
}
