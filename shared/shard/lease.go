// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
)

const (
	// RingLabel marks every Lease of a ring (value: the ring's name): the members' and the
	// assignment's. Members and coordinator watch only these.
	RingLabel = "patterns.kpatterns.dev/ring"
	// HeldAnnotation and SeenAnnotation are what a member publishes in its Lease: the ranges it
	// holds (Set.String) and the generation of the assignment it has acted on.
	HeldAnnotation = "patterns.kpatterns.dev/shard-held"
	SeenAnnotation = "patterns.kpatterns.dev/shard-seen"
	// GenerationAnnotation and AssignmentAnnotation are the coordinator's, on the ring's own Lease
	// (named as the ring): the assignment's generation, and the assignment as JSON, member → Set.
	GenerationAnnotation = "patterns.kpatterns.dev/shard-generation"
	AssignmentAnnotation = "patterns.kpatterns.dev/shard-assignment"
)

// MemberLease is the name of a member's Lease.
func MemberLease(ring, member string) string { return ring + "-" + member }

// Assignment is the coordinator's decision: which member works on which ranges, in generation
// Generation (it grows by one with every change).
type Assignment struct {
	Generation int64
	Ranges     map[string]Set
}

// ReadAssignment reads the ring Lease's annotations (no Lease: generation 0, nothing assigned).
func ReadAssignment(l *coordinationv1.Lease) (Assignment, error) {
	a := Assignment{Ranges: map[string]Set{}}
	if l == nil || l.Annotations[GenerationAnnotation] == "" {
		return a, nil
	}
	var err error
	if a.Generation, err = strconv.ParseInt(l.Annotations[GenerationAnnotation], 10, 64); err != nil {
		return a, fmt.Errorf("lease %s: %s: %w", l.Name, GenerationAnnotation, err)
	}
	if err := json.Unmarshal([]byte(l.Annotations[AssignmentAnnotation]), &a.Ranges); err != nil {
		return a, fmt.Errorf("lease %s: %s: %w", l.Name, AssignmentAnnotation, err)
	}
	return a, nil
}

func (a Assignment) write(l *coordinationv1.Lease) error {
	b, err := json.Marshal(a.Ranges) // Sets as 16 hex digits, keys sorted: one text per value
	if err != nil {
		return err
	}
	if l.Annotations == nil {
		l.Annotations = map[string]string{}
	}
	l.Annotations[GenerationAnnotation] = strconv.FormatInt(a.Generation, 10)
	l.Annotations[AssignmentAnnotation] = string(b)
	return nil
}

// readMember reads what a member published (an unreadable annotation: an error, never a guess).
func readMember(l *coordinationv1.Lease) (Member, error) {
	held, err := ParseSet(l.Annotations[HeldAnnotation])
	if err != nil {
		return Member{}, fmt.Errorf("lease %s: %s: %w", l.Name, HeldAnnotation, err)
	}
	var seen int64
	if s := l.Annotations[SeenAnnotation]; s != "" {
		if seen, err = strconv.ParseInt(s, 10, 64); err != nil {
			return Member{}, fmt.Errorf("lease %s: %s: %w", l.Name, SeenAnnotation, err)
		}
	}
	return Member{Held: held, Seen: seen}, nil
}

// liveness tells live members from expired ones as client-go's leader election does: by the
// time this process saw a Lease change last (its own clock), not by the renewTime another
// clock wrote. A member that stops renewing is expired LeaseDuration after it was last seen to
// renew — and it stopped its work RenewDeadline after that renewal, earlier.
type liveness struct {
	seen map[string]observation
}

type observation struct {
	version string
	at      time.Time
}

// live returns the member Leases of leases (the ring's own Lease excluded) that are held and
// were seen to change within their duration, by member name.
func (v *liveness) live(leases []coordinationv1.Lease, ring string, now time.Time) map[string]*coordinationv1.Lease {
	if v.seen == nil {
		v.seen = map[string]observation{}
	}
	live := map[string]*coordinationv1.Lease{}
	present := map[string]bool{}
	for i := range leases {
		l := &leases[i]
		if l.Name == ring {
			continue
		}
		present[l.Name] = true
		o, ok := v.seen[l.Name]
		if !ok || o.version != l.ResourceVersion {
			o = observation{version: l.ResourceVersion, at: now}
			v.seen[l.Name] = o
		}
		holder, d := l.Spec.HolderIdentity, l.Spec.LeaseDurationSeconds
		if holder == nil || *holder == "" || d == nil || now.Sub(o.at) >= time.Duration(*d)*time.Second {
			continue
		}
		live[strings.TrimPrefix(l.Name, ring+"-")] = l
	}
	for name := range v.seen {
		if !present[name] {
			delete(v.seen, name)
		}
	}
	return live
}

// Settled reports whether the ring's Leases show an assignment that gives every range to exactly
// members, each of which publishes that it holds its ranges and has acted on the assignment (nil),
// or what is still moving: a readiness check for a rollout, a test or a demo.
func Settled(leases []coordinationv1.Lease, ring string, members ...string) (Assignment, error) {
	byName := map[string]*coordinationv1.Lease{}
	for i := range leases {
		byName[leases[i].Name] = &leases[i]
	}
	a, err := ReadAssignment(byName[ring])
	if err != nil {
		return a, err
	}
	var union Set
	for _, m := range members {
		if err := acted(a, m, byName[MemberLease(ring, m)]); err != nil {
			return a, err
		}
		union |= a.Ranges[m]
	}
	if len(a.Ranges) != len(members) || union != All {
		return a, fmt.Errorf("assignment %d gives ranges to %d members, %s of them to %v", a.Generation, len(a.Ranges), union, members)
	}
	return a, nil
}

// acted: member m's Lease l says it holds what assignment a gives it, and has seen a.
func acted(a Assignment, m string, l *coordinationv1.Lease) error {
	if l == nil {
		return fmt.Errorf("member %s has no Lease", m)
	}
	p, err := readMember(l)
	if err != nil {
		return err
	}
	if p.Held != a.Ranges[m] || p.Seen != a.Generation {
		return fmt.Errorf("member %s holds %s and has seen assignment %d; assignment %d gives it %s", m, p.Held, p.Seen, a.Generation, a.Ranges[m])
	}
	return nil
}
