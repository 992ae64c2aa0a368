// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// changes keeps, for the sources that changed while the reloader watched, the digests of their
// values before their last few changes: what a rollout's event names the changed keys from. The
// workload's record holds one digest per source (DigestsAnnotation), not one per key, so the
// keys of a change the reloader did not see — made while it was down, or older than the states
// kept — are not named (the event still names the source and its digests). Memory only, and
// bounded: at most maxChangedSources sources (the least recently changed dropped first), each
// with its last maxStates states.
type changes struct {
	mu     sync.Mutex
	states map[sourceKey][]valueDigests // oldest first
	order  []sourceKey                  // least recently changed first
}

type sourceKey struct {
	kind      Kind
	namespace string
	name      string
}

const (
	maxChangedSources = 256
	maxStates         = 4
)

func newChanges() *changes { return &changes{states: map[sourceKey][]valueDigests{}} }

// update keeps old's values as a state src had before a change of its values. The four workload
// kinds' controllers each see the same event: a state already kept last is not kept again.
func (c *changes) update(kind Kind, old, src client.Object) {
	before, _ := old.(cachedSource).source()
	after, _ := src.(cachedSource).source()
	if before == after {
		return
	}
	k := sourceKey{kind, src.GetNamespace(), src.GetName()}
	c.mu.Lock()
	defer c.mu.Unlock()
	kept := c.states[k]
	if len(kept) > 0 && kept[len(kept)-1] == before {
		return
	}
	c.order = append(slices.DeleteFunc(c.order, func(o sourceKey) bool { return o == k }), k)
	if len(c.order) > maxChangedSources {
		delete(c.states, c.order[0])
		c.order = slices.Delete(c.order, 0, 1)
	}
	c.states[k] = append(kept[max(0, len(kept)-maxStates+1):], before)
}

// keys are the keys of ref (in namespace ns) whose values differ between the state ref's record
// digest names (recorded, DigestsAnnotation's 16 hex digits) and now, or that only one of them
// has, sorted; false if no kept state has that digest.
func (c *changes) keys(key []byte, ns string, ref Ref, recorded string, now valueDigests) ([]string, bool) {
	c.mu.Lock()
	kept := slices.Clone(c.states[sourceKey{ref.Kind, ns, ref.Name}])
	c.mu.Unlock()
	for _, before := range slices.Backward(kept) {
		if Digests(key, []Ref{ref}, func(Ref) client.Object { return &Source[corev1.ConfigMap]{Values: before} })[0][:16] != recorded {
			continue
		}
		var keys []string
		for _, binary := range []bool{false, true} {
			was, is := map[string]string{}, map[string]string{}
			for k, sum := range before.of(binary) {
				was[k] = sum
			}
			for k, sum := range now.of(binary) {
				is[k] = sum
			}
			for k, sum := range was {
				if is[k] != sum {
					keys = append(keys, k)
				}
			}
			for k := range is {
				if _, ok := was[k]; !ok {
					keys = append(keys, k)
				}
			}
		}
		keys = slices.DeleteFunc(keys, func(k string) bool { return ref.Keys != nil && !slices.Contains(ref.Keys, k) })
		slices.Sort(keys)
		return slices.Compact(keys), true
	}
	return nil, false
}

// explain names the changed sources (changedSources of the records before and now), each with
// its digests before and after and, where this process saw the change, the keys that changed:
// "configmap/a (0123456789abcdef → fedcba9876543210; keys x+y)". sources are the sources refs
// name, by Ref.Key; key is the one the record before was made with.
func (c *changes) explain(key []byte, ns string, refs []Ref, sources map[string]client.Object, before string, changed []string) []string {
	out, recorded := slices.Clone(changed), parseSeen(before)
	for i, s := range out {
		entry, digests, _ := strings.Cut(s, " (")
		at := slices.IndexFunc(refs, func(r Ref) bool { return r.Entry() == entry })
		if at < 0 {
			continue
		}
		src, ok := sources[refs[at].Key()].(cachedSource)
		if !ok {
			continue
		}
		values, _ := src.source()
		if keys, ok := c.keys(key, ns, refs[at], recorded[entry], values); ok {
			out[i] = entry + " (" + strings.TrimSuffix(digests, ")") + "; keys " + strings.Join(keys, "+") + ")"
		}
	}
	return out
}

// sourceEvents maps a source's events to the workloads of w's kind that reference it
// (MapSourceToWorkloads), keeping in c what each update changed first.
func sourceEvents(read client.Reader, w WorkloadKind, kind Kind, c *changes) handler.EventHandler {
	mapped := handler.EnqueueRequestsFromMapFunc(MapSourceToWorkloads(read, w, kind))
	return handler.Funcs{
		CreateFunc: mapped.Create,
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			c.update(kind, e.ObjectOld, e.ObjectNew)
			// Old and new are one source: one scan (mapped.Update would scan for each).
			mapped.Generic(ctx, event.GenericEvent{Object: e.ObjectNew}, q)
		},
		DeleteFunc:  mapped.Delete,
		GenericFunc: mapped.Generic,
	}
}
