// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgxpool"
)

func TestTagRoundTrip(t *testing.T) {
	for _, o := range []Owner{{UID: "u-1", Namespace: "ns", Name: "app"}, {UID: "u-2", Namespace: "a", Name: "b", Orphan: true},
		{Installation: "5f0c/kpatterns-system", UID: "u-3", Namespace: "a", Name: "b"}} {
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
	own := Owner{Installation: "i", UID: "u-1", Namespace: "ns", Name: "app"}
	other := Owner{Installation: "i", UID: "u-2", Namespace: "ns", Name: "old"}
	earlier := Owner{Installation: "i", UID: "u-0", Namespace: "ns", Name: "app"}   // the same object before a restore
	elsewhere := Owner{Installation: "j", UID: "u-0", Namespace: "ns", Name: "app"} // another installation's object of that name
	unnamed := Owner{UID: "u-0", Namespace: "ns", Name: "app"}                      // a tag of no installation
	observe := Want{Database: "app", Role: "app_owner", ConnectionLimit: 5, Owner: own, ObserveOnly: true}
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
		{name: "observe only: no ownership, no tag drift, no PUBLIC drift", want: observe,
			o: with(synced, func(o *Observed) { o.RoleTag, o.DatabaseTag, o.ConnectionLimit, o.PublicAccess = "", "", 3, true }), drift: []string{"role connection limit 3 → 5"}},
		{name: "PUBLIC may connect", want: w, o: with(synced, func(o *Observed) { o.PublicAccess = true }),
			drift: []string{"database PUBLIC privileges (CONNECT, TEMPORARY) → revoked"}},
		{name: "restored: the earlier object's, adopted", want: w, o: with(synced, func(o *Observed) { o.RoleTag, o.DatabaseTag = earlier.Tag(), earlier.Tag() }),
			drift: []string{`role ownership tag "` + earlier.Tag() + `" → "` + own.Tag() + `"`, `database ownership tag "` + earlier.Tag() + `" → "` + own.Tag() + `"`}},
		{name: "another installation's object of the same name", want: w, o: with(synced, func(o *Observed) { o.RoleTag, o.DatabaseTag = elsewhere.Tag(), elsewhere.Tag() }), foreign: true},
		{name: "a tag of no installation, another UID", want: w, o: with(synced, func(o *Observed) { o.RoleTag, o.DatabaseTag = unnamed.Tag(), unnamed.Tag() }), foreign: true},
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

// Adopting names the earlier object only for this installation's tag of the same name.
func TestAdopting(t *testing.T) {
	own := Owner{Installation: "i", UID: "u-1", Namespace: "ns", Name: "app"}
	for _, c := range []struct {
		tag  Owner
		want string
	}{
		{Owner{Installation: "i", UID: "u-0", Namespace: "ns", Name: "app"}, "u-0"},
		{own, ""},
		{Owner{Installation: "j", UID: "u-0", Namespace: "ns", Name: "app"}, ""},
		{Owner{UID: "u-0", Namespace: "ns", Name: "app"}, ""},
		{Owner{Installation: "i", UID: "u-0", Namespace: "ns", Name: "other"}, ""},
	} {
		o := Observed{RoleExists: true, RoleTag: c.tag.Tag()}
		if got := Adopting(Want{Owner: own}, o); got != c.want {
			t.Errorf("Adopting over %q = %q, want %q", c.tag.Tag(), got, c.want)
		}
	}
}

// A password reaches the server as a SCRAM verifier only, and one that is not printable ASCII is
// refused; a literal with a quote or a backslash is refused whatever the server's settings.
func TestVerifierAndLiteral(t *testing.T) {
	v, err := scramVerifier(`x\'; CREATE ROLE pwned; --`)
	if err != nil {
		t.Fatal(err)
	}
	if !regexp.MustCompile(`^'SCRAM-SHA-256\$4096:[A-Za-z0-9+/=]{24}\$[A-Za-z0-9+/=]{44}:[A-Za-z0-9+/=]{44}'$`).MatchString(v) {
		t.Errorf("verifier %s", v)
	}
	for _, bad := range []string{"", "caf\u00e9", "tab\there"} {
		if _, err := scramVerifier(bad); err == nil {
			t.Errorf("scramVerifier(%q) took it", bad)
		}
	}
	for _, bad := range []string{"it's", `back\slash`} {
		if _, err := literal(bad); err == nil {
			t.Errorf("literal(%q) took it", bad)
		}
	}
}

// A rotated password replaces the login's pool (closing the old one) instead of adding one.
func TestRotationReplacesThePool(t *testing.T) {
	p := NewPostgres()
	defer p.Close()
	c := Conn{Host: "127.0.0.1", Port: "1", Username: "admin", SSLMode: "disable"}
	var first *pgxpool.Pool
	for i, pw := range []string{"a", "b", "c", "c"} {
		c.Password = pw
		pool, err := p.pool(c)
		if err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			first = pool
		}
	}
	if n := len(p.pools); n != 1 {
		t.Errorf("%d pools after three passwords of one login, want 1", n)
	}
	if err := first.Ping(context.Background()); err == nil || !strings.Contains(err.Error(), "closed") {
		t.Errorf("the first password's pool: ping %v, want closed", err)
	}
}
