// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package shard runs a pattern's controllers on several active replicas at once, each working on
// its share of the objects. The 64-bit FNV-1a hash space of an object's key (the hash the API
// server's shard selector uses) is cut into 64 equal ranges; a leader-elected coordinator assigns
// ranges to the live members of a ring (one Lease each), and a member works on a range only once
// every live member has seen the assignment and no other member holds it. A member that must give
// a range up stops working on it before it says so in its Lease; a member that cannot renew its
// Lease stops everything before the others may take over.
package shard

import (
	"fmt"
	"hash/fnv"
	"math/bits"
	"slices"
	"strconv"
	"strings"
)

// Ranges is the number of ranges the hash space is cut into: a Set is one bit per range.
const Ranges = 64

// Set is a set of ranges: bit i is the range [i<<58, (i+1)<<58) of the hash space.
type Set uint64

// All is every range.
const All = ^Set(0)

// Len is the number of ranges in s.
func (s Set) Len() int { return bits.OnesCount64(uint64(s)) }

// Has reports whether s holds range i.
func (s Set) Has(i int) bool { return s&(1<<i) != 0 }

// String is s as 16 hexadecimal digits, as it is written in a Lease.
func (s Set) String() string { return fmt.Sprintf("%016x", uint64(s)) }

// MarshalText writes s as String does: the assignment's JSON reads as the members' Leases do.
func (s Set) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// UnmarshalText reads what MarshalText wrote.
func (s *Set) UnmarshalText(b []byte) (err error) {
	*s, err = ParseSet(string(b))
	return err
}

// ParseSet reads a Set written by String ("" is the empty set).
func ParseSet(s string) (Set, error) {
	if s == "" {
		return 0, nil
	}
	v, err := strconv.ParseUint(s, 16, 64)
	return Set(v), err
}

// RangeOf is the range a key hashes to: the top 6 bits of FNV-1a 64, the hash the API server's
// shardRange selector compares (k8s.io/apimachinery/pkg/sharding.HashField).
func RangeOf(key string) int {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key)) // a hash never fails
	return int(h.Sum64() >> 58)
}

// Selector is s as a shard selector of the API server (metav1.ListOptions.ShardSelector) over
// field (object.metadata.uid or object.metadata.namespace): adjacent ranges are merged into one
// shardRange. The empty set has no selector: a member that holds nothing runs no informer.
func (s Set) Selector(field string) string {
	var parts []string
	for i := 0; i < Ranges; {
		if !s.Has(i) {
			i++
			continue
		}
		j := i
		for j < Ranges && s.Has(j) {
			j++
		}
		end := fmt.Sprintf("0x%016x", uint64(j)<<58)
		if j == Ranges {
			end = "0x10000000000000000" // 2^64, the exclusive end of the hash space
		}
		parts = append(parts, fmt.Sprintf("shardRange(%s, '0x%016x', '%s')", field, uint64(i)<<58, end))
		i = j
	}
	return strings.Join(parts, " || ")
}

// Values are the ranges of s as label values ("0" … "63"), for a label selector `in (…)`.
func (s Set) Values() []string {
	var v []string
	for i := range Ranges {
		if s.Has(i) {
			v = append(v, strconv.Itoa(i))
		}
	}
	return v
}

// Assign is the coordinator's assignment of ranges to the live members: it starts from prev (the
// current one), gives the ranges of members that are gone to live members at once, and moves at
// most maxMoves ranges from members above their quota to members below it. Quotas differ by at
// most one (Ranges/len(live), the members holding most getting the remainder), so a member
// joining one of N takes about Ranges/(N+1) ranges and a member leaving gives up only its own:
// nothing moves that does not have to. The result is deterministic in its inputs.
func Assign(prev map[string]Set, live []string, maxMoves int) map[string]Set {
	live = slices.Sorted(slices.Values(live))
	next := make(map[string]Set, len(live))
	if len(live) == 0 {
		return next
	}
	var assigned Set
	for _, m := range live {
		next[m] = prev[m] &^ assigned // a range claimed twice (never written so) stays with the first
		assigned |= next[m]
	}
	// Quotas: the members holding most keep the remainder, so fewer ranges move.
	byHeld := slices.Clone(live)
	slices.SortStableFunc(byHeld, func(a, b string) int { return next[b].Len() - next[a].Len() })
	quota := map[string]int{}
	for i, m := range byHeld {
		quota[m] = Ranges / len(live)
		if i < Ranges%len(live) {
			quota[m]++
		}
	}
	neediest := func() string { // the member furthest below its quota (first by name on a tie)
		best, gap := "", 0
		for _, m := range live {
			if g := quota[m] - next[m].Len(); g > gap {
				best, gap = m, g
			}
		}
		return best
	}
	for i := range Ranges { // ranges of members that are gone (or never assigned): at once
		if !assigned.Has(i) {
			m := neediest()
			next[m] |= 1 << i
		}
	}
	for ; maxMoves > 0; maxMoves-- { // rebalance, bounded: the highest range of the fullest member
		to := neediest()
		from, excess := "", 0
		for _, m := range live {
			if e := next[m].Len() - quota[m]; e > excess {
				from, excess = m, e
			}
		}
		if to == "" || from == "" {
			break
		}
		top := Set(1) << (63 - bits.LeadingZeros64(uint64(next[from])))
		next[from] &^= top
		next[to] |= top
	}
	return next
}

// Member is what a member publishes in its Lease: the ranges it holds (works on, or may) and the
// generation of the assignment it has seen and acted on.
type Member struct {
	Held Set
	Seen int64
}

// Next is the set a member holds after it has seen assignment target of generation gen: it keeps
// what it holds and is still assigned, gives up the rest, and takes a range assigned to it only
// when every other live member has seen gen (so none of them still acts on an older assignment
// that gave it the range) and none of them holds it (so its previous owner has stopped). A member
// that has seen gen holds only ranges gen gives it, so the second condition follows from the first
// while generations only grow; it still guards an assignment Lease deleted and started again.
func Next(held, target Set, gen int64, others []Member) Set {
	keep := held & target
	var taken Set
	for _, o := range others {
		if o.Seen < gen {
			return keep
		}
		taken |= o.Held
	}
	return keep | target&^taken
}
