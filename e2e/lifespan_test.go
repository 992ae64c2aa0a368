// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	lifespanv1alpha1 "github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	lifespan "github.com/kpatterns/kpatterns/lifespan/controller"
)

// TestLifespan runs two lifespan processes as their ServiceAccount and hands leadership over five
// times by SIGTERM and once by SIGKILL, while labelled ConfigMaps are created every 100 ms. It
// checks that the Heartbeat's history never shows two holders at once (each term acquired after
// the previous term's last beat), that a SIGTERM'd leader's exit hook ran (or the standby's term
// came first) and a SIGKILL'd one's did not, and that every ConfigMap version written during the
// handovers got its Observed Event. Handover times (signal → the Lease names the standby) are
// logged; the README has them. Local cluster only: it signals processes.
func TestLifespan(t *testing.T) {
	if kindRun {
		t.Skip("signals local pattern processes")
	}
	ns := envconf.RandomName("lifespan", 12)
	leaseFlags := []string{"--heartbeat-interval", "200ms", "--leader-elect-retry-period", "500ms"}
	f := features.New("lifespan").
		Assess("handovers keep one holder at a time and lose no Observed event", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := c.Create(ctx, testNamespace(ns)); err != nil {
				t.Fatal(err)
			}
			installPattern(ctx, t, cfg, "lifespan")
			// A writer creates a labelled ConfigMap every 100 ms for the whole run. What it wrote is
			// read back from the API server afterwards: a Create whose reply was lost still counts.
			var stop atomic.Bool
			var writer sync.WaitGroup
			writer.Go(func() {
				for i := 0; !stop.Load() && ctx.Err() == nil; i++ {
					_ = c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("c-%04d", i), Namespace: ns,
						Labels: map[string]string{lifespan.ObserveLabel: "true"}}})
					time.Sleep(100 * time.Millisecond)
				}
			})

			r := &replicas{t: t, ctx: ctx, cfg: cfg, c: c, pattern: "lifespan", args: leaseFlags}
			var ids []string
			term, kill := r.handovers(5, func(holder string) {
				ids = append(ids, holder)
				waitFor(t, "the leader's term in the Heartbeat", func(ctx context.Context) (bool, error) {
					hb := &lifespanv1alpha1.Heartbeat{}
					err := c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: lifespan.Name}, hb)
					return err == nil && hb.Current() != nil && hb.Current().Holder == holder, client.IgnoreNotFound(err)
				})
			})
			stop.Store(true)
			writer.Wait()
			t.Logf("SIGTERM handovers %v: p50 %s, max %s; SIGKILL handover %s (flags %v)", term, term[len(term)/2], term[len(term)-1], kill, leaseFlags)

			// Every version written got its Observed event, from whichever replica led.
			cms := &corev1.ConfigMapList{}
			if err := c.List(ctx, cms, client.InNamespace(ns), client.MatchingLabels{lifespan.ObserveLabel: "true"}); err != nil {
				t.Fatal(err)
			}
			written := cms.Items
			waitFor(t, fmt.Sprintf("Observed events for all %d ConfigMaps", len(written)), func(ctx context.Context) (bool, error) {
				list := &eventsv1.EventList{}
				if err := c.List(ctx, list, client.InNamespace(ns), client.MatchingLabels{lifespan.EmittedByLabel: lifespan.Name}); err != nil {
					return false, err
				}
				seen := map[string]bool{}
				for _, e := range list.Items {
					seen[e.Name] = true
				}
				missing := slices.DeleteFunc(slices.Clone(written), func(cm corev1.ConfigMap) bool { return seen[lifespan.ObservedEventName(&cm)] })
				if len(missing) > 0 {
					t.Logf("%d of %d ConfigMaps not observed yet (first %s)", len(missing), len(written), missing[0].Name)
				} else if len(list.Items) != len(written) {
					t.Logf("%d Observed events for %d ConfigMaps", len(list.Items), len(written))
				}
				return len(missing) == 0 && len(list.Items) == len(written), nil
			})

			// The Heartbeat's history: one term per leader, in order, none overlapping.
			hb := &lifespanv1alpha1.Heartbeat{}
			if err := c.Get(ctx, client.ObjectKey{Namespace: operatorNamespace, Name: lifespan.Name}, hb); err != nil {
				t.Fatal(err)
			}
			ts := hb.Status.Terms
			if len(ts) < len(ids) {
				t.Fatalf("%d terms for %d leaders: %+v; the Lease named %v", len(ts), len(ids), ts, ids)
			}
			ts = ts[len(ts)-len(ids):]
			stopped := 0
			for i, x := range ts {
				if x.Holder != ids[i] {
					t.Errorf("term %d held by %s, the Lease named %s", i, x.Holder, ids[i])
				}
				if i > 0 && !ts[i-1].LastBeat.Before(&x.Acquired) {
					t.Errorf("two holders at once: %s acquired at %s, %s last beat at %s", x.Holder, x.Acquired.Format(time.StampMicro), ts[i-1].Holder, ts[i-1].LastBeat.Format(time.StampMicro))
				}
				if i > 0 {
					t.Logf("term %d: gap from the previous last beat to acquired %s", i, x.Acquired.Sub(ts[i-1].LastBeat.Time).Round(time.Millisecond))
				}
				if x.Stopped != nil {
					stopped++
				}
			}
			if killed := ts[len(ts)-2]; killed.Stopped != nil {
				t.Errorf("the SIGKILL'd leader's term is marked stopped: %+v", killed)
			}
			t.Logf("%d ConfigMaps observed across %d handovers; %d of 5 SIGTERM'd terms marked stopped by their leader exit hook", len(written), len(ids)-1, stopped)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
