// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package provider is the external system a PostgresDatabase stands for: a database and a login
// role in a PostgreSQL server. Everything it creates carries an ownership tag (a comment naming
// the object's UID), so it never takes over a database or role it did not create, it can tell
// after a crash whether its own create happened, and it can list what it created for the
// controller's orphan sweep.
package provider

import (
	"context"
	"fmt"
	"strings"
)

// Conn is how to reach a server as an administrator (the connection Secret's keys).
type Conn struct {
	Host, Port, Username, Password string
	SSLMode                        string // empty: verify-full
}

// Owner is the object a database and role belong to, written as their ownership tag.
type Owner struct {
	// Installation is the controller installation that created them: a sweep touches only its
	// own. Empty in tags written before installations were named.
	Installation         string
	UID, Namespace, Name string
	Orphan               bool // deletion leaves them: the sweep never drops them
}

// Want is what one object asks of a server.
type Want struct {
	Conn            Conn
	Database, Role  string
	ConnectionLimit int32
	Owner           Owner
	// ObserveOnly: nothing is owned, so no tag is foreign and no tag drifts.
	ObserveOnly bool
	Password    string // the role's password: set when the role is created (Apply) or reset (SetPassword)
}

// Observed is what a server holds under a Want's names.
type Observed struct {
	RoleExists, DatabaseExists bool
	RoleTag, DatabaseTag       string // the comments, "" when none
	ConnectionLimit            int32
	CanLogin                   bool
	DatabaseOwner              string
	// PublicAccess: PUBLIC holds a privilege on the database (CONNECT and TEMPORARY by default),
	// so every role of the server, another tenant's included, may connect to it.
	PublicAccess bool
}

// Provider is every external call the controller makes.
type Provider interface {
	// Observe reads the role and the database named in w.
	Observe(ctx context.Context, w Want) (Observed, error)
	// Apply creates what is missing and corrects what differs (o is what Observe returned), and
	// writes the ownership tags: the create and the repair are one code path.
	Apply(ctx context.Context, w Want, o Observed) error
	// SetPassword sets the role's password to w.Password.
	SetPassword(ctx context.Context, w Want) error
	// Delete drops the database and the role if they carry w.Owner's tag; what is missing or not
	// w.Owner's is left, and that is success.
	Delete(ctx context.Context, w Want) error
	// Release removes w.Owner's tags: the database and the role stay, unmanaged.
	Release(ctx context.Context, w Want) error
	// Retag writes w.Owner's tag over a tag of w.Owner's UID that differs (its deletion, say)
	// and changes nothing else: what a policy change away from Full writes.
	Retag(ctx context.Context, w Want, o Observed) error
	// Owned lists what carries any object's tag on the server at c, one Want per object (Conn,
	// Owner and the names found).
	Owned(ctx context.Context, c Conn) ([]Want, error)
}

// tagPrefix starts every ownership tag.
const tagPrefix = "kpatterns-finalizers "

// Tag is o's ownership tag: "kpatterns-finalizers inst=<installation> uid=… object=<namespace>/<name>
// deletion=Delete|Orphan" (no inst= for an Owner without an Installation).
func (o Owner) Tag() string {
	deletion := "Delete"
	if o.Orphan {
		deletion = "Orphan"
	}
	inst := ""
	if o.Installation != "" {
		inst = "inst=" + o.Installation + " "
	}
	return fmt.Sprintf("%s%suid=%s object=%s/%s deletion=%s", tagPrefix, inst, o.UID, o.Namespace, o.Name, deletion)
}

// ParseTag reads an ownership tag; ok is false for any other comment.
func ParseTag(tag string) (o Owner, ok bool) {
	rest, ok := strings.CutPrefix(tag, tagPrefix)
	if !ok {
		return Owner{}, false
	}
	for f := range strings.FieldsSeq(rest) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "inst":
			o.Installation = v
		case "uid":
			o.UID = v
		case "object":
			o.Namespace, o.Name, _ = strings.Cut(v, "/")
		case "deletion":
			o.Orphan = v == "Orphan"
		}
	}
	return o, o.UID != "" && o.Name != ""
}

// Foreign says why what exists under w's names is not w.Owner's ("" when nothing foreign exists):
// a role with no tag, another installation's or another object's, or a database that carries
// neither w.Owner's tag nor w.Owner's role as its owner. Such a resource is reported, never
// adopted. What this installation created for an earlier object of the same namespace and name
// (a restore, a re-creation: same names, another UID) is not foreign: it is adopted (Adopting).
// An observe-only Want finds nothing foreign.
func Foreign(w Want, o Observed) string {
	if w.ObserveOnly || w.Owner.UID == "" {
		return ""
	}
	if o.RoleExists && !ours(o.RoleTag, w.Owner) {
		return fmt.Sprintf("role %s exists and was not created for this object (%s)", w.Role, describe(o.RoleTag))
	}
	ownedByOurRole := o.DatabaseOwner == w.Role && o.RoleExists && ours(o.RoleTag, w.Owner)
	if o.DatabaseExists && !ours(o.DatabaseTag, w.Owner) && !ownedByOurRole {
		return fmt.Sprintf("database %s exists and was not created for this object (%s, owner %s)", w.Database, describe(o.DatabaseTag), o.DatabaseOwner)
	}
	return ""
}

// Adopting returns the UID of the earlier object whose tags w.Owner takes over ("" when none):
// a tag of this installation for the same namespace and name under another UID. Call it only
// when Foreign(w, o) is "".
func Adopting(w Want, o Observed) string {
	for _, tag := range []string{o.RoleTag, o.DatabaseTag} {
		if t, ok := ParseTag(tag); ok && adoptable(t, w.Owner) {
			return t.UID
		}
	}
	return ""
}

// DatabaseOurs: the database carries w.Owner's tag, or is owned by w.Owner's tagged role (the tag
// is written just after CREATE DATABASE, whose owner is set in the same statement). Only an
// exact UID counts: what is dropped is never adopted on the way.
func DatabaseOurs(w Want, o Observed) bool {
	return tagged(o.DatabaseTag, w.Owner.UID) || (o.DatabaseOwner == w.Role && o.RoleExists && tagged(o.RoleTag, w.Owner.UID))
}

func tagged(tag, uid string) bool {
	o, ok := ParseTag(tag)
	return ok && o.UID == uid
}

// ours: tagged for owner, or adoptable by it.
func ours(tag string, owner Owner) bool {
	t, ok := ParseTag(tag)
	return ok && (t.UID == owner.UID || adoptable(t, owner))
}

// adoptable: t was written by owner's installation for an object of owner's namespace and name
// that had another UID. Two live objects never share a namespace and name, so that object is
// gone, and what it left is the user's data under the names the new object asks for. A tag of no
// installation (written before installations were named) is adopted by no one: it could be
// another cluster's.
func adoptable(t, owner Owner) bool {
	return owner.Installation != "" && t.Installation == owner.Installation &&
		t.Namespace == owner.Namespace && t.Name == owner.Name && t.UID != owner.UID
}

func describe(tag string) string {
	if o, ok := ParseTag(tag); ok {
		inst := "no installation"
		if o.Installation != "" {
			inst = "installation " + o.Installation
		}
		return fmt.Sprintf("tagged for %s/%s, uid %s, by %s", o.Namespace, o.Name, o.UID, inst)
	}
	return "no ownership tag"
}

// Drift lists how o differs from w, each as one change a repair makes ("role connection limit 5 →
// 10"); empty when they agree. Call it only when Foreign(w, o) is "". The ownership tags count
// only for a Want that owns.
func Drift(w Want, o Observed) []string {
	var d []string
	switch {
	case !o.RoleExists:
		d = append(d, fmt.Sprintf("role %s missing → created", w.Role))
	default:
		if o.ConnectionLimit != w.ConnectionLimit {
			d = append(d, fmt.Sprintf("role connection limit %d → %d", o.ConnectionLimit, w.ConnectionLimit))
		}
		if !o.CanLogin {
			d = append(d, "role login disabled → enabled")
		}
		if !w.ObserveOnly && w.Owner.UID != "" && o.RoleTag != w.Owner.Tag() {
			d = append(d, fmt.Sprintf("role ownership tag %q → %q", o.RoleTag, w.Owner.Tag()))
		}
	}
	switch {
	case !o.DatabaseExists:
		d = append(d, fmt.Sprintf("database %s missing → created", w.Database))
	default:
		if o.DatabaseOwner != w.Role {
			d = append(d, fmt.Sprintf("database owner %s → %s", o.DatabaseOwner, w.Role))
		}
		if !w.ObserveOnly && w.Owner.UID != "" && o.DatabaseTag != w.Owner.Tag() {
			d = append(d, fmt.Sprintf("database ownership tag %q → %q", o.DatabaseTag, w.Owner.Tag()))
		}
		if !w.ObserveOnly && o.PublicAccess {
			d = append(d, "database PUBLIC privileges (CONNECT, TEMPORARY) → revoked")
		}
	}
	return d
}

// Retags: a tag of w.Owner's UID differs from w.Owner's tag (Retag would write).
func Retags(w Want, o Observed) bool {
	return o.RoleExists && tagged(o.RoleTag, w.Owner.UID) && o.RoleTag != w.Owner.Tag() ||
		o.DatabaseExists && tagged(o.DatabaseTag, w.Owner.UID) && o.DatabaseTag != w.Owner.Tag()
}

// Unnamed: a tag of w.Owner's UID names no installation — written by a version before
// installations were named, which also left PUBLIC's privileges on the database.
func Unnamed(w Want, o Observed) bool {
	for _, tag := range []string{o.RoleTag, o.DatabaseTag} {
		if t, ok := ParseTag(tag); ok && t.UID == w.Owner.UID && t.Installation == "" && w.Owner.Installation != "" {
			return true
		}
	}
	return false
}
