// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Paced calls op n times at a fixed rate (per second), each call in its own goroutine so a slow
// call never delays the next start, and returns the latencies of the calls that succeeded, sorted,
// and the first error. For benchmarks: latency under a steady arrival rate, not a closed loop.
func Paced(rate, n int, op func(i int) error) ([]time.Duration, error) {
	var mu sync.Mutex
	var lat []time.Duration
	var first error
	var wg sync.WaitGroup
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	for i := range n {
		<-tick.C
		wg.Add(1)
		go func() {
			defer wg.Done()
			start := time.Now()
			err := op(i)
			took := time.Since(start)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				if first == nil {
					first = err
				}
				return
			}
			lat = append(lat, took)
		}()
	}
	wg.Wait()
	slices.Sort(lat)
	return lat, first
}

// Percentile returns the p-th percentile (0–100) of sorted latencies; 0 if there are none.
func Percentile(sorted []time.Duration, p int) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	return sorted[min(len(sorted)-1, len(sorted)*p/100)]
}

// ReportLatency reports a baseline's and a variant's p50 and p99 in milliseconds, the p99 the
// variant adds, and the ratio of the p99s, as benchmark metrics.
func ReportLatency(b *testing.B, baseline, variant []time.Duration) {
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	bp99, vp99 := Percentile(baseline, 99), Percentile(variant, 99)
	b.ReportMetric(ms(Percentile(baseline, 50)), "baseline-p50-ms")
	b.ReportMetric(ms(bp99), "baseline-p99-ms")
	b.ReportMetric(ms(Percentile(variant, 50)), "webhook-p50-ms")
	b.ReportMetric(ms(vp99), "webhook-p99-ms")
	b.ReportMetric(ms(vp99-bp99), "added-p99-ms")
	if bp99 > 0 {
		b.ReportMetric(float64(vp99)/float64(bp99), "p99-ratio")
	}
}

// CompareLatency runs, for each rate, n = 5 s worth of baseline calls and then as many variant
// calls, paced at that rate, and reports both latencies as ReportLatency does, one sub-benchmark
// per rate. baseline and variant return the call for a given rate.
func CompareLatency(b *testing.B, rates []int, baseline, variant func(rate int) func(i int) error) {
	for _, rate := range rates {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			for range b.N {
				cpu0 := MachineCPU()
				base, err := Paced(rate, rate*5, baseline(rate))
				if err != nil {
					b.Fatal(err)
				}
				cpu1 := MachineCPU()
				hooked, err := Paced(rate, rate*5, variant(rate))
				if err != nil {
					b.Fatal(err)
				}
				cpu2 := MachineCPU()
				ReportLatency(b, base, hooked)
				if cpu0.total > 0 {
					b.ReportMetric(cpu1.BusySince(cpu0), "baseline-machine-busy-%")
					b.ReportMetric(cpu2.BusySince(cpu1), "webhook-machine-busy-%")
				}
			}
		})
	}
}

// CPUTimes is the machine's CPU time in clock ticks, all CPUs together, from /proc/stat (Linux);
// zero where there is none. Used to show whether a latency tail coincides with a saturated machine.
type CPUTimes struct{ idle, total uint64 }

// MachineCPU reads the machine's CPU times now.
func MachineCPU() CPUTimes {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return CPUTimes{}
	}
	line, _, _ := strings.Cut(string(data), "\n")
	fields := strings.Fields(line) // cpu user nice system idle iowait irq softirq steal ...
	if len(fields) < 5 || fields[0] != "cpu" {
		return CPUTimes{}
	}
	var t CPUTimes
	for i, f := range fields[1:] {
		v, err := strconv.ParseUint(f, 10, 64)
		if err != nil {
			return CPUTimes{}
		}
		t.total += v
		if i == 3 || i == 4 { // idle, iowait
			t.idle += v
		}
	}
	return t
}

// BusySince is the percentage of all CPUs' time that was not idle between then and t.
func (t CPUTimes) BusySince(then CPUTimes) float64 {
	if t.total <= then.total {
		return 0
	}
	return 100 * (1 - float64(t.idle-then.idle)/float64(t.total-then.total))
}
