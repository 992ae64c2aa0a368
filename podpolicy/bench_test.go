// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kpatterns/kpatterns/podpolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// BenchmarkDecision measures one decision in the handler with the Namespace in the informer cache
// (warm) and, in the same run, with every call a miss answered by a live GET (the Namespace lacks
// the enforce label, so the cache never holds it; calls are sequential, so nothing is shared).
// Reported: the mean of each in µs and their ratio.
//
//	go test -run '^$' -bench Decision ./podpolicy/
func BenchmarkDecision(b *testing.B) {
	mgr := env.Manager(b)
	cached := namespace(b, webhook.EnforceLabel, webhook.AllowPodsLabel)
	uncached := namespace(b, webhook.AllowPodsLabel)
	v := &webhook.Validator{Decoder: admission.NewDecoder(mgr.GetScheme()), Cache: mgr.GetCache(), Live: mgr.GetAPIReader()}
	warmReq, liveReq := podRequest(b, cached), podRequest(b, uncached)
	testenv.Eventually(b, "the labelled namespace is cached", func() error {
		return mgr.GetCache().Get(context.Background(), client.ObjectKey{Name: cached}, &corev1.Namespace{})
	})
	mean := func(req admission.Request) time.Duration {
		start := time.Now()
		for range 500 {
			if resp := v.Handle(context.Background(), req); !resp.Allowed {
				b.Fatalf("denied: %+v", resp.Result)
			}
		}
		return time.Since(start) / 500
	}
	for b.Loop() {
		warm, live := mean(warmReq), mean(liveReq)
		b.ReportMetric(float64(warm.Nanoseconds())/1000, "warm-µs")
		b.ReportMetric(float64(live.Nanoseconds())/1000, "live-µs")
		b.ReportMetric(float64(live)/float64(warm), "live/warm")
	}
}

// BenchmarkCacheHitRate creates 20 labelled namespaces and then, at once, 1,000 Pods (dry-run:
// admission runs, nothing is stored) across them at 200/s through the API server, and reports the
// share of decisions answered from the cache.
//
//	go test -run '^$' -bench CacheHitRate -benchtime 1x ./podpolicy/
func BenchmarkCacheHitRate(b *testing.B) {
	env.Manager(b)
	for b.Loop() {
		var namespaces []string
		for range 20 {
			namespaces = append(namespaces, namespace(b, webhook.EnforceLabel, webhook.AllowPodsLabel))
		}
		hits, misses := counter(b, "podpolicy_namespace_cache_hits_total"), counter(b, "podpolicy_namespace_cache_misses_total")
		live := counter(b, "podpolicy_namespace_live_reads_total")
		_, err := testenv.Paced(200, 1000, func(i int) error {
			return env.Client.Create(context.Background(), pod(namespaces[i%20], fmt.Sprintf("p-%d", i)), client.DryRunAll)
		})
		if err != nil {
			b.Fatal(err)
		}
		h := counter(b, "podpolicy_namespace_cache_hits_total") - hits
		m := counter(b, "podpolicy_namespace_cache_misses_total") - misses
		b.ReportMetric(100*h/(h+m), "hit-rate-%")
		b.ReportMetric(m, "misses")
		b.ReportMetric(counter(b, "podpolicy_namespace_live_reads_total")-live, "live-reads")
	}
}

// BenchmarkAdmissionLatency is deploypolicy's benchmark for Pods: dry-run creates at 50/s and
// 200/s for 5 s each into a governed namespace and, as the baseline in the same run, into one
// without the enforce label (the webhook is not called).
//
//	go test -run '^$' -bench AdmissionLatency -benchtime 1x ./podpolicy/
func BenchmarkAdmissionLatency(b *testing.B) {
	env.Manager(b)
	governed := namespace(b, webhook.EnforceLabel, webhook.AllowPodsLabel)
	plain := namespace(b)
	create := func(ns string) func(rate int) func(int) error {
		return func(rate int) func(int) error {
			return func(i int) error {
				return env.Client.Create(context.Background(), pod(ns, fmt.Sprintf("r%d-%d", rate, i)), client.DryRunAll)
			}
		}
	}
	testenv.CompareLatency(b, []int{50, 200}, create(plain), create(governed))
}
