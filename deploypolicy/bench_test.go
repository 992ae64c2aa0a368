package main

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/kpatterns/kpatterns/shared/testenv"
)

// BenchmarkAdmissionLatency measures what the webhooks add to a Deployment create at the API
// server: creates at a fixed rate (50/s, then 200/s, for 5 s each) into a namespace the webhooks govern, and, as
// the baseline in the same run on the same API server, into the operator's namespace, which the
// webhook configurations exclude (namespaceSelector): the only difference is the two admission
// calls (mutating, then validating with its live policy GET). Reported: p50 and p99 of each, the
// p99 the webhooks add, and the ratio of the p99s. A benchmark, not a pass/fail test.
//
//	go test -run '^$' -bench AdmissionLatency -benchtime 1x ./deploypolicy/
func BenchmarkAdmissionLatency(b *testing.B) {
	const seconds = 5
	env.Manager(b)
	governed := env.Namespace(b)
	ctx := context.Background()
	run := func(ns, prefix string, rate int) (p50, p99 time.Duration) {
		var mu sync.Mutex
		var lat []time.Duration
		var wg sync.WaitGroup
		tick := time.NewTicker(time.Second / time.Duration(rate))
		defer tick.Stop()
		for i := range rate * seconds {
			<-tick.C
			wg.Add(1)
			go func() {
				defer wg.Done()
				d := deployment(ns, fmt.Sprintf("%s-%d", prefix, i), ptr.To[int32](1), nil, nil)
				start := time.Now()
				err := env.Client.Create(ctx, d)
				took := time.Since(start)
				if err != nil {
					b.Error(err)
					return
				}
				mu.Lock()
				lat = append(lat, took)
				mu.Unlock()
			}()
		}
		wg.Wait()
		slices.Sort(lat)
		if len(lat) == 0 {
			b.Fatal("no create succeeded")
		}
		return lat[len(lat)/2], lat[len(lat)*99/100]
	}
	for _, rate := range []int{50, 200} {
		b.Run(fmt.Sprintf("rate=%d", rate), func(b *testing.B) {
			for range b.N {
				prefix := fmt.Sprintf("r%d-%d", rate, time.Now().UnixNano())
				baseP50, baseP99 := run(testenv.Namespace, prefix, rate)
				hookP50, hookP99 := run(governed, prefix, rate)
				ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
				b.ReportMetric(ms(baseP50), "baseline-p50-ms")
				b.ReportMetric(ms(baseP99), "baseline-p99-ms")
				b.ReportMetric(ms(hookP50), "webhook-p50-ms")
				b.ReportMetric(ms(hookP99), "webhook-p99-ms")
				b.ReportMetric(ms(hookP99-baseP99), "added-p99-ms")
				b.ReportMetric(float64(hookP99)/float64(baseP99), "p99-ratio")
			}
		})
	}
}
