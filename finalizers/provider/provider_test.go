// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestTagRoundTrip(t *testing.T) {
	for _, o := range []Owner{{UID: "u-1", Namespace: "ns", Name: "app"}, {UID: "u-2", Namespace: "a", Name: "b", Orphan: true}} {
		got, ok := ParseTag(o.Tag())
		if !ok || got != o {
			t.Errorf("ParseTag(%q) = %+v, %v", o.Tag(), got, ok)
		}
	}
	for _, c := range []string{"", "a user's comment", "kpatterns-finalizers", "kpatterns-finalizers object=ns/x"} {
		if _, ok := ParseTag(c); ok {
			t.Errorf("ParseTag(%q) took a comment that is no tag", c)
		}
	}
}

// What counts as the object's own, what as foreign, and how drift is named.
func TestForeignAndDrift(t *testing.T) {
	own := Owner{UID: "u-1", Namespace: "ns", Name: "app"}
	other := Owner{UID: "u-2", Namespace: "ns", Name: "old"}
	w := Want{Database: "app", Role: "app_owner", ConnectionLimit: 5, Owner: own}
	synced := Observed{RoleExists: true, DatabaseExists: true, RoleTag: own.Tag(), DatabaseTag: own.Tag(), ConnectionLimit: 5, CanLogin: true, DatabaseOwner: "app_owner"}
	for _, c := range []struct {
		name    string
		want    Want
		o       Observed
		foreign bool
		drift   []string
	}{
		{name: "nothing yet", want: w, o: Observed{}, drift: []string{"role app_owner missing → created", "database app missing → created"}},
		{name: "synced", want: w, o: synced},
		{name: "limit and login", want: w, o: with(synced, func(o *Observed) { o.ConnectionLimit, o.CanLogin = 10, false }),
			drift: []string{"role connection limit 10 → 5", "role login disabled → enabled"}},
		{name: "role dropped, database handed over", want: w, o: with(synced, func(o *Observed) { o.RoleExists, o.RoleTag, o.DatabaseOwner = false, "", "postgres" }),
			drift: []string{"role app_owner missing → created", "database owner postgres → app_owner"}},
		{name: "database untagged but owned by the tagged role (a crash before its tag)", want: w,
			o: with(synced, func(o *Observed) { o.DatabaseTag = "" }), drift: []string{`database ownership tag "" → "` + own.Tag() + `"`}},
		{name: "a user's database", want: w, o: Observed{DatabaseExists: true, DatabaseOwner: "postgres"}, foreign: true},
		{name: "another object's role", want: w, o: with(synced, func(o *Observed) { o.RoleTag = other.Tag() }), foreign: true},
		{name: "observe only: no ownership, no tag drift", want: Want{Database: "app", Role: "app_owner", ConnectionLimit: 5},
			o: with(synced, func(o *Observed) { o.RoleTag, o.DatabaseTag, o.ConnectionLimit = "", "", 3 }), drift: []string{"role connection limit 3 → 5"}},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := Foreign(c.want, c.o) != ""; got != c.foreign {
				t.Fatalf("Foreign = %q, want foreign %v", Foreign(c.want, c.o), c.foreign)
			}
			if c.foreign {
				return
			}
			if d := cmp.Diff(c.drift, Drift(c.want, c.o)); d != "" {
				t.Errorf("Drift (-want +got):\n%s", d)
			}
		})
	}
}

func with(o Observed, f func(*Observed)) Observed { f(&o); return o }
