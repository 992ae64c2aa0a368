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
	SSLMode                        string // empty: prefer
}

// Owner is the object a database and role belong to, written as their ownership tag.
type Owner struct {
	UID, Namespace, Name string
	Orphan               bool // deletion leaves them: the sweep never drops them
}

// Want is what one object asks of a server.
type Want struct {
	Conn            Conn
	Database, Role  string
	ConnectionLimit int32
	Owner           Owner
	Password        string // the role's password: set when the role is created (Apply) or reset (SetPassword)
}

// Observed is what a server holds under a Want's names.
type Observed struct {
	RoleExists, DatabaseExists bool
	RoleTag, DatabaseTag       string // the comments, "" when none
	ConnectionLimit            int32
	CanLogin                   bool
	DatabaseOwner              string
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
	// Owned lists what carries any object's tag on the server at c, one Want per object (Conn,
	// Owner and the names found).
	Owned(ctx context.Context, c Conn) ([]Want, error)
}

// tagPrefix starts every ownership tag.
const tagPrefix = "kpatterns-finalizers "

// Tag is o's ownership tag: "kpatterns-finalizers uid=… object=<namespace>/<name> deletion=Delete|Orphan".
func (o Owner) Tag() string {
	deletion := "Delete"
	if o.Orphan {
		deletion = "Orphan"
	}
	return fmt.Sprintf("%suid=%s object=%s/%s deletion=%s", tagPrefix, o.UID, o.Namespace, o.Name, deletion)
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
// a role with another or no tag, or a database that carries neither w.Owner's tag nor w.Owner's
// role as its owner. Such a resource is reported, never adopted. A Want with no Owner (observe
// only) finds nothing foreign.
func Foreign(w Want, o Observed) string {
	if w.Owner.UID == "" {
		return ""
	}
	if o.RoleExists && !tagged(o.RoleTag, w.Owner.UID) {
		return fmt.Sprintf("role %s exists and was not created for this object (%s)", w.Role, describe(o.RoleTag))
	}
	if o.DatabaseExists && !DatabaseOurs(w, o) {
		return fmt.Sprintf("database %s exists and was not created for this object (%s, owner %s)", w.Database, describe(o.DatabaseTag), o.DatabaseOwner)
	}
	return ""
}

// DatabaseOurs: the database carries w.Owner's tag, or is owned by w.Owner's tagged role (the tag
// is written just after CREATE DATABASE, whose owner is set in the same statement).
func DatabaseOurs(w Want, o Observed) bool {
	return tagged(o.DatabaseTag, w.Owner.UID) || (o.DatabaseOwner == w.Role && o.RoleExists && tagged(o.RoleTag, w.Owner.UID))
}

func tagged(tag, uid string) bool {
	o, ok := ParseTag(tag)
	return ok && o.UID == uid
}

func describe(tag string) string {
	if o, ok := ParseTag(tag); ok {
		return fmt.Sprintf("tagged for %s/%s, uid %s", o.Namespace, o.Name, o.UID)
	}
	return "no ownership tag"
}

// Drift lists how o differs from w, each as one change a repair makes ("role connection limit 5 →
// 10"); empty when they agree. Call it only when Foreign(w, o) is "". The ownership tags count
// only for a Want with an Owner.
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
		if w.Owner.UID != "" && o.RoleTag != w.Owner.Tag() {
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
		if w.Owner.UID != "" && o.DatabaseTag != w.Owner.Tag() {
			d = append(d, fmt.Sprintf("database ownership tag %q → %q", o.DatabaseTag, w.Owner.Tag()))
		}
	}
	return d
}
