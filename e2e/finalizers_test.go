// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sync/errgroup"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/controller"
)

// demoProviderStats scrapes the finalizers process's metrics endpoint for its demo provider's
// counts (finalizers_demo_provider_*).
func demoProviderStats(t *testing.T, addr string) map[string]float64 {
	t.Helper()
	stats := map[string]float64{}
	for series, v := range scrape(t, addr, "finalizers_demo_provider_") {
		stats[strings.TrimPrefix(series, "finalizers_demo_provider_")] = v
	}
	return stats
}

// TestFinalizersUnderFaults: 200 create/delete cycles of ExternalRecord against the demo
// provider failing 30 % of its calls, the pattern as its ServiceAccount. Every object must be
// gone (none stuck Terminating), no external record left, and no record created twice.
func TestFinalizersUnderFaults(t *testing.T) {
	const ns, cycles = "e2e-finalizers", 200
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	metricsAddr := l.Addr().String()
	_ = l.Close()
	f := features.New("finalizers").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			if kindRun {
				t.Skip("the fault-injection run reads the demo provider's metrics from a local process")
			}
			return ctx
		})
	f = withPattern(f, "finalizers", ns, "--demo-error-rate", "0.3", "--metrics-bind-address", metricsAddr, "--metrics-secure=false").
		Assess("200 create/delete cycles with 30 % provider failures leave nothing behind", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			rc := rest.CopyConfig(cfg.Client().RESTConfig())
			rc.QPS, rc.Burst = 200, 400 // the load, not client-go's default 5/s, is what is tested
			c, err := client.New(rc, client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			g, gctx := errgroup.WithContext(ctx)
			g.SetLimit(10)
			for i := range cycles {
				g.Go(func() error {
					rec := &v1alpha1.ExternalRecord{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("chaos-%d", i), Namespace: ns},
						Spec: v1alpha1.ExternalRecordSpec{Value: "v"}}
					if err := c.Create(gctx, rec); err != nil {
						return err
					}
					if i%2 == 1 { // half are deleted once synced, half at once (maybe before the finalizer)
						for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(50 * time.Millisecond) {
							if err := c.Get(gctx, client.ObjectKeyFromObject(rec), rec); err != nil {
								return err
							}
							if rec.Status.ExternalID != "" {
								break
							}
							if time.Now().After(deadline) {
								return fmt.Errorf("%s never synced", rec.Name)
							}
						}
					}
					return c.Delete(gctx, rec)
				})
			}
			if err := g.Wait(); err != nil {
				t.Fatal(err)
			}
			waitFor(t, "every ExternalRecord gone", func(ctx context.Context) (bool, error) {
				list := &v1alpha1.ExternalRecordList{}
				err := c.List(ctx, list, client.InNamespace(ns))
				return err == nil && len(list.Items) == 0, err
			})
			took := time.Since(start)
			s := demoProviderStats(t, metricsAddr)
			t.Logf("%d cycles in %s: external creates %.0f, distinct ids created %.0f, records left %.0f, injected failures %.0f",
				cycles, took.Round(100*time.Millisecond), s["creates_total"], s["created_ids_total"], s["records"], s["injected_failures_total"])
			if s["records"] != 0 || s["creates_total"] != s["created_ids_total"] || s["creates_total"] < cycles/2 || s["injected_failures_total"] == 0 {
				t.Errorf("demo provider %v: want 0 records left, creates = distinct ids (at least the %d synced), failures injected", s, cycles/2)
			}
			return ctx
		}).
		Assess("a deleted record's object is not found again (no finalizer left behind)", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			err := clientFor(t, cfg).Get(ctx, client.ObjectKey{Namespace: ns, Name: "chaos-0"}, &v1alpha1.ExternalRecord{})
			if !apierrors.IsNotFound(err) {
				t.Errorf("chaos-0: %v", err)
			}
			_ = controller.Finalizer
			return ctx
		})
	testEnv.Test(t, f.Feature())
}
