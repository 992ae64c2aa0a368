// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

func cmState(name string, data map[string]string) *Source[corev1.ConfigMap] {
	return &Source[corev1.ConfigMap]{Meta: Meta{Name: name, Namespace: "ns"}, Values: pack(data, nil)}
}

// record is what DigestsAnnotation records of ref over src.
func record(ref Ref, src client.Object) string {
	return seen([]Ref{ref}, Digests(nil, []Ref{ref}, func(Ref) client.Object { return src }))
}

// The keys of a change are named from the state the record was made of: values changed, added
// or removed, only those the reference reads, after several changes, and not at all when no
// state kept has the recorded digest (seen before the changes kept, or evicted).
func TestChangedKeys(t *testing.T) {
	whole := Ref{Kind: ConfigMap, Name: "a"}
	some := Ref{Kind: ConfigMap, Name: "a", Keys: []string{"x", "z"}}
	v1 := cmState("a", map[string]string{"x": "1", "y": "1", "z": "1"})
	v2 := cmState("a", map[string]string{"x": "1", "y": "2", "w": "2"}) // y changed, w added, z removed
	v3 := cmState("a", map[string]string{"x": "3", "y": "2", "w": "2"})
	c := newChanges()
	c.update(ConfigMap, v1, v2)
	c.update(ConfigMap, v1, v2) // the same event, seen by another workload kind's controller
	c.update(ConfigMap, v2, v3)
	if n := len(c.states[sourceKey{ConfigMap, "ns", "a"}]); n != 2 {
		t.Fatalf("%d states kept, want 2", n)
	}
	for _, tc := range []struct {
		ref      Ref
		from, to *Source[corev1.ConfigMap]
		want     []string
		known    bool
	}{
		{whole, v1, v2, []string{"w", "y", "z"}, true},
		{whole, v2, v3, []string{"x"}, true},
		{whole, v1, v3, []string{"w", "x", "y", "z"}, true}, // two changes rolled as one
		{some, v1, v2, []string{"z"}, true},
		{some, v2, v3, []string{"x"}, true},
		{whole, v3, v3, nil, false}, // no state kept has the current data
	} {
		_, recorded, _ := strings.Cut(record(tc.ref, tc.from), "=")
		got, known := c.keys(nil, "ns", tc.ref, recorded, tc.to.Values)
		if known != tc.known || !cmp.Equal(tc.want, got) {
			t.Errorf("keys of %s from %v: %v, %v; want %v, %v", tc.ref.Entry(), tc.from.Values != v1.Values, got, known, tc.want, tc.known)
		}
	}
	if _, known := c.keys(nil, "other", whole, "0123456789abcdef", v3.Values); known {
		t.Error("a source of another namespace has kept states")
	}

	// The explanation: keys where known.
	before, now := record(whole, v1), record(whole, v3)
	got := c.explain(nil, "ns", []Ref{whole}, map[string]client.Object{whole.Key(): v3}, before, changedSources(before, now))
	_, b, _ := strings.Cut(before, "=")
	_, a, _ := strings.Cut(now, "=")
	if want := []string{fmt.Sprintf("configmap/a (%s → %s; keys w+x+y+z)", b, a)}; !cmp.Equal(want, got) {
		t.Errorf("explain: %q, want %q", got, want)
	}

	// Bounded: the last maxStates states of a source, the last maxChangedSources sources.
	for i := range maxStates + 1 {
		c.update(ConfigMap, cmState("a", map[string]string{"x": fmt.Sprint(i)}), cmState("a", map[string]string{"x": fmt.Sprint(i + 1)}))
	}
	if n := len(c.states[sourceKey{ConfigMap, "ns", "a"}]); n != maxStates {
		t.Errorf("%d states kept of one source, want %d", n, maxStates)
	}
	for i := range maxChangedSources + 1 {
		name := fmt.Sprint("s-", i)
		c.update(Secret, &Source[corev1.Secret]{Meta: Meta{Name: name, Namespace: "ns"}, Values: "1"}, &Source[corev1.Secret]{Meta: Meta{Name: name, Namespace: "ns"}})
	}
	if n, o := len(c.states), len(c.order); n != maxChangedSources || o != n {
		t.Errorf("%d sources kept (%d in order), want %d", n, o, maxChangedSources)
	}
	if _, kept := c.states[sourceKey{ConfigMap, "ns", "a"}]; kept {
		t.Error("the least recently changed source was kept")
	}
}
