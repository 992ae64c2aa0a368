// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/utils/ptr"

	"github.com/kpatterns/kpatterns/shared/testenv"
)

// BenchmarkAdmissionLatency measures what the webhooks add to a Deployment create at the API
// server: creates at a fixed rate (50/s, then 200/s, for 5 s each) into a namespace the webhooks
// govern, and, as the baseline in the same run on the same API server, into the operator's
// namespace, which the webhook configurations exclude (namespaceSelector): the only difference is
// the two admission calls (mutating, then validating with its live policy GET). Reported: p50 and
// p99 of each, the p99 the webhooks add, and the ratio of the p99s. A benchmark, not a pass/fail
// test. The load generator runs in the webhook's process here; ../e2e's benchmark of the same name
// runs the webhook as its own process on the local cluster.
//
//	go test -run '^$' -bench AdmissionLatency -benchtime 1x ./deploypolicy/
func BenchmarkAdmissionLatency(b *testing.B) {
	env.Manager(b)
	governed := env.Namespace(b)
	create := func(ns string) func(rate int) func(int) error {
		return func(rate int) func(int) error {
			prefix := fmt.Sprintf("r%d-%d", rate, time.Now().UnixNano())
			return func(i int) error {
				return env.Client.Create(context.Background(), deployment(ns, fmt.Sprintf("%s-%d", prefix, i), ptr.To[int32](1), nil, nil))
			}
		}
	}
	testenv.CompareLatency(b, []int{50, 200}, create(testenv.Namespace), create(governed))
}
