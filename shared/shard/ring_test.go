// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"testing"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apiserver/pkg/sharding"
)

// uids are n UUID-shaped keys from a fixed seed: what object.metadata.uid looks like.
func uids(n int) []string {
	r := rand.New(rand.NewPCG(1, 2))
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("%08x-%04x-4%03x-8%03x-%012x", r.Uint32(), r.Uint32()&0xffff, r.Uint32()&0xfff, r.Uint32()&0xfff, r.Uint64()&0xffffffffffff)
	}
	return keys
}

func names(n int) []string {
	m := make([]string, n)
	for i := range m {
		m[i] = fmt.Sprintf("m%02d", i)
	}
	return m
}

// settle applies Assign until nothing changes, as the coordinator does one generation at a time.
func settle(prev map[string]Set, live []string, maxMoves int) (map[string]Set, int) {
	generations := 0
	for {
		next := Assign(prev, live, maxMoves)
		if owners(next) == owners(prev) {
			return next, generations
		}
		prev, generations = next, generations+1
	}
}

func owners(a map[string]Set) (o [Ranges]string) {
	for m, s := range a {
		for i := range Ranges {
			if s.Has(i) {
				o[i] = m
			}
		}
	}
	return o
}

func check(t *testing.T, a map[string]Set, live []string) {
	t.Helper()
	var union Set
	lo, hi := Ranges, 0
	for _, m := range live {
		if union&a[m] != 0 {
			t.Fatalf("a range is assigned twice: %v", a)
		}
		union |= a[m]
		lo, hi = min(lo, a[m].Len()), max(hi, a[m].Len())
	}
	if union != All || len(a) != len(live) {
		t.Fatalf("not every range assigned to a live member: %v", a)
	}
	if hi-lo > 1 {
		t.Fatalf("ranges per member from %d to %d, want at most one apart", lo, hi)
	}
}

// TestBalance: 10,000 UIDs over 1–16 members. Ranges per member differ by at most one, so the
// bound is that granularity, ceil(64/N)/(64/N), plus the keys' spread over the ranges: the
// fullest member holds at most 1.3 × the mean.
func TestBalance(t *testing.T) {
	keys := uids(10000)
	for n := 1; n <= 16; n++ {
		live := names(n)
		a := Assign(nil, live, 0)
		check(t, a, live)
		count := map[string]int{}
		o := owners(a)
		for _, k := range keys {
			count[o[RangeOf(k)]]++
		}
		most := 0
		for _, c := range count {
			most = max(most, c)
		}
		if mean := float64(len(keys)) / float64(n); float64(most) > 1.3*mean {
			t.Errorf("%d members: the fullest holds %d keys, %.2f × the mean", n, most, float64(most)/mean)
		}
	}
}

// TestMoves: a member joining N takes its quota (about 64/(N+1) ranges) and nothing else moves; a
// member leaving gives up its own ranges and nothing else moves; a rebalance moves at most
// maxMoves ranges per assignment, and the ranges of a member that is gone move in one.
func TestMoves(t *testing.T) {
	keys := uids(10000)
	for n := 1; n < 16; n++ {
		a, _ := settle(nil, names(n), 64)
		joined, gens := settle(a, names(n+1), 3)
		check(t, joined, names(n+1))
		moved := diff(a, joined)
		if want := joined[names(n + 1)[n]].Len(); moved != want {
			t.Errorf("join %d→%d: %d ranges moved, want only the newcomer's %d", n, n+1, moved, want)
		}
		if limit := (moved + 2) / 3; gens > limit {
			t.Errorf("join %d→%d: %d assignments for %d moves at 3 a time", n, n+1, gens, moved)
		}
		if km := movedKeys(keys, a, joined); float64(km) > 1.5*float64(len(keys))/float64(n+1) {
			t.Errorf("join %d→%d: %d of %d keys moved, want about 1/%d", n, n+1, km, len(keys), n+1)
		}
		gone := names(n + 1)[0]
		left := Assign(joined, names(n + 1)[1:], 0) // no rebalancing budget: only the leaver's ranges
		check(t, left, names(n + 1)[1:])
		if moved, want := diff(joined, left), joined[gone].Len(); moved != want {
			t.Errorf("leave %d→%d: %d ranges moved, want only the leaver's %d", n+1, n, moved, want)
		}
	}
}

func diff(a, b map[string]Set) int {
	oa, ob := owners(a), owners(b)
	n := 0
	for i := range Ranges {
		if oa[i] != ob[i] {
			n++
		}
	}
	return n
}

func movedKeys(keys []string, a, b map[string]Set) int {
	oa, ob := owners(a), owners(b)
	n := 0
	for _, k := range keys {
		if r := RangeOf(k); oa[r] != ob[r] {
			n++
		}
	}
	return n
}

// TestSelectorMatchesServer: the API server's own parser and matcher (what kube-apiserver runs)
// select exactly the UIDs whose range the Set holds.
func TestSelectorMatchesServer(t *testing.T) {
	for _, s := range []Set{All, 1, 1 << 63, 0x00ff00ff00ff00ff, 0x8000000000000001, 0x5555555555555555} {
		sel, err := sharding.Parse(s.Selector("object.metadata.uid"))
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		for _, uid := range uids(2000) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{UID: types.UID(uid)}}
			got, err := sel.Matches(cm)
			if err != nil {
				t.Fatal(err)
			}
			if want := s.Has(RangeOf(uid)); got != want {
				t.Fatalf("set %s, uid %s (range %d): the server matches %v, the set holds %v", s, uid, RangeOf(uid), got, want)
			}
		}
	}
	if got := Set(0x0f).Selector("object.metadata.namespace"); got != "shardRange(object.metadata.namespace, '0x0000000000000000', '0x1000000000000000')" {
		t.Errorf("adjacent ranges not merged: %s", got)
	}
}

// TestNext is the member's state machine: what it holds after seeing an assignment.
func TestNext(t *testing.T) {
	for _, tc := range []struct {
		name         string
		held, target Set
		gen          int64
		others       []Member
		want         Set
	}{
		{name: "first assignment, alone", target: 0b1111, gen: 1, want: 0b1111},
		{name: "assigned, but another member has not seen the assignment yet", target: 0b11, gen: 2,
			others: []Member{{Seen: 1}}, want: 0},
		{name: "holding, another member behind: keep what is still assigned, give up the rest", held: 0b110, target: 0b011, gen: 2,
			others: []Member{{Seen: 1}}, want: 0b010},
		{name: "assigned, its previous owner still holds it", held: 0b01, target: 0b11, gen: 3,
			others: []Member{{Held: 0b10, Seen: 3}}, want: 0b01},
		{name: "previous owner released it and has seen the assignment", held: 0b01, target: 0b11, gen: 3,
			others: []Member{{Held: 0b100, Seen: 3}}, want: 0b11},
		{name: "moved away: given up whatever the others do", held: 0b11, target: 0b01, gen: 4,
			others: []Member{{Seen: 3}}, want: 0b01},
		{name: "not assigned anything", held: 0b1, gen: 5, want: 0},
		{name: "another member ahead of this one's view", target: 0b1, gen: 5, others: []Member{{Seen: 6}}, want: 0b1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Next(tc.held, tc.target, tc.gen, tc.others); got != tc.want {
				t.Errorf("Next = %b, want %b", got, tc.want)
			}
		})
	}
}

// TestAssignEdges: no members; a member that is gone with no budget to rebalance.
func TestAssignEdges(t *testing.T) {
	if a := Assign(map[string]Set{"a": All}, nil, 8); len(a) != 0 {
		t.Errorf("no live member, assignment %v", a)
	}
	a := Assign(map[string]Set{"a": 0xffffffff, "b": 0xffffffff00000000}, []string{"b", "c"}, 0)
	check(t, a, []string{"b", "c"})
	if a["b"] != 0xffffffff00000000 {
		t.Errorf("b's ranges moved although only a left: %v", a)
	}
}

// TestProtocolModel runs the handover protocol with simulated members whose views lag: each
// member sees the assignments and every other member's Lease at a random, older version (an
// informer is behind, never ahead, and never goes back), while members join, leave (releasing)
// and crash (fenced: they stop working at once) and the coordinator reassigns. After every step no
// range may be worked on by two members; at the end, with fresh views, every range is held.
func TestProtocolModel(t *testing.T) {
	for seed := range uint64(200) {
		r := rand.New(rand.NewPCG(seed, 7))
		type sim struct {
			pubs   []Member       // every version of its Lease
			ring   int            // the assignment version it has seen
			views  map[string]int // the version it has seen of each other member's Lease
			living bool
		}
		members := map[string]*sim{}
		var history []Assignment // generation i+1 at index i
		next := 0
		join := func() {
			name := fmt.Sprintf("m%d", next)
			next++
			members[name] = &sim{pubs: []Member{{}}, ring: -1, views: map[string]int{}, living: true}
		}
		live := func() (names []string) {
			for n, m := range members {
				if m.living {
					names = append(names, n)
				}
			}
			return names
		}
		coordinate := func() {
			prev := Assignment{Ranges: map[string]Set{}}
			if len(history) > 0 {
				prev = history[len(history)-1]
			}
			moves := 8
			for _, n := range live() {
				if p := members[n].pubs[len(members[n].pubs)-1]; p.Seen != prev.Generation || p.Held != prev.Ranges[n] {
					moves = 0
				}
			}
			a := Assign(prev.Ranges, live(), moves)
			if owners(a) != owners(prev.Ranges) {
				history = append(history, Assignment{Generation: prev.Generation + 1, Ranges: a})
			}
		}
		step := func(name string, fresh bool) {
			m := members[name]
			lag := func(have, latest int) int { // a newer version, or the same; never an older one
				if fresh {
					return latest
				}
				return have + r.IntN(latest-have+1)
			}
			m.ring = lag(m.ring, len(history)-1)
			a := Assignment{Ranges: map[string]Set{}}
			if m.ring >= 0 {
				a = history[m.ring]
			}
			var others []Member
			for _, o := range live() {
				if o != name {
					m.views[o] = lag(m.views[o], len(members[o].pubs)-1)
					others = append(others, members[o].pubs[m.views[o]])
				}
			}
			held := m.pubs[len(m.pubs)-1].Held
			m.pubs = append(m.pubs, Member{Held: Next(held, a.Ranges[name], a.Generation, others), Seen: a.Generation})
		}
		join()
		for i := 0; i < 400; i++ {
			switch x := r.IntN(20); {
			case x == 0 && len(live()) < 6:
				join()
				coordinate()
			case x == 1 && len(live()) > 1: // leaves: releases (works on nothing), its Lease deleted
				m := members[live()[r.IntN(len(live()))]]
				m.pubs = append(m.pubs, Member{Seen: m.pubs[len(m.pubs)-1].Seen})
				m.living = false
				coordinate()
			case x == 2 && len(live()) > 1: // crashes: fenced, works on nothing; its Lease expires
				members[live()[r.IntN(len(live()))]].living = false
				coordinate()
			case x < 6:
				coordinate()
			default:
				step(live()[r.IntN(len(live()))], false)
			}
			var working Set
			for _, n := range live() {
				h := members[n].pubs[len(members[n].pubs)-1].Held
				if working&h != 0 {
					t.Fatalf("seed %d, step %d: ranges %s worked on by two members", seed, i, working&h)
				}
				working |= h
			}
		}
		for range 50 { // fresh views: the ring settles
			coordinate()
			for _, n := range live() {
				step(n, true)
			}
		}
		var held Set
		for _, n := range live() {
			held |= members[n].pubs[len(members[n].pubs)-1].Held
		}
		if held != All {
			t.Fatalf("seed %d: after the changes stop, members hold %s of the ranges", seed, held)
		}
	}
}

// TestAssignmentText: the assignment Lease's JSON holds each Set as its Lease does, and reads back.
func TestAssignmentText(t *testing.T) {
	l := &coordinationv1.Lease{}
	want := Assignment{Generation: 3, Ranges: map[string]Set{"a": 0xffffffff, "b": 0xffffffff00000000}}
	if err := want.write(l); err != nil {
		t.Fatal(err)
	}
	if got := l.Annotations[AssignmentAnnotation]; got != `{"a":"00000000ffffffff","b":"ffffffff00000000"}` {
		t.Errorf("written %s", got)
	}
	got, err := ReadAssignment(l)
	if err != nil || got.Generation != 3 || !maps.Equal(got.Ranges, want.Ranges) {
		t.Errorf("read back %v, %v", got, err)
	}
	l.Annotations[AssignmentAnnotation] = `{"a":"zz"}`
	if _, err := ReadAssignment(l); err == nil {
		t.Error("an unreadable assignment read without an error")
	}
}
