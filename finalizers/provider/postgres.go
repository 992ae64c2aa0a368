// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the Provider for PostgreSQL servers: one small connection pool per server and
// login, opened on first use. Safe for concurrent use.
type Postgres struct {
	mu    sync.Mutex
	pools map[Conn]*pgxpool.Pool
}

// NewPostgres returns a Postgres with no connection open yet.
func NewPostgres() *Postgres { return &Postgres{pools: map[Conn]*pgxpool.Pool{}} }

// Close closes every pool.
func (p *Postgres) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, pool := range p.pools {
		pool.Close()
		delete(p.pools, c)
	}
}

// pool returns c's pool: at most 4 connections per server, each call bounded by ctx.
func (p *Postgres) pool(c Conn) (*pgxpool.Pool, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pool, ok := p.pools[c]; ok {
		return pool, nil
	}
	mode := c.SSLMode
	if mode == "" {
		mode = "prefer"
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(c.Username, c.Password), Host: net.JoinHostPort(c.Host, c.Port),
		Path: "/postgres", RawQuery: url.Values{"sslmode": {mode}, "application_name": {"kpatterns-finalizers"}}.Encode()}
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("connection to %s: %w", net.JoinHostPort(c.Host, c.Port), redact(err, c.Password))
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		return nil, redact(err, c.Password)
	}
	p.pools[c] = pool
	return pool, nil
}

// redact keeps a password out of an error (and so out of logs and conditions).
func redact(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "<redacted>"))
}

func (p *Postgres) exec(ctx context.Context, c Conn, sql string) error {
	pool, err := p.pool(c)
	if err != nil {
		return err
	}
	_, err = pool.Exec(ctx, sql, pgx.QueryExecModeSimpleProtocol)
	return redact(err, c.Password)
}

// Observe implements Provider: one query over pg_roles and pg_database.
func (p *Postgres) Observe(ctx context.Context, w Want) (Observed, error) {
	pool, err := p.pool(w.Conn)
	if err != nil {
		return Observed{}, err
	}
	var o Observed
	err = pool.QueryRow(ctx, `SELECT r.rolname IS NOT NULL, coalesce(r.rolconnlimit, 0), coalesce(r.rolcanlogin, false),
		coalesce(shobj_description(r.oid, 'pg_authid'), ''),
		d.datname IS NOT NULL, coalesce(pg_get_userbyid(d.datdba)::text, ''), coalesce(shobj_description(d.oid, 'pg_database'), '')
	FROM (SELECT 1) x LEFT JOIN pg_roles r ON r.rolname = $1 LEFT JOIN pg_database d ON d.datname = $2`, w.Role, w.Database).
		Scan(&o.RoleExists, &o.ConnectionLimit, &o.CanLogin, &o.RoleTag, &o.DatabaseExists, &o.DatabaseOwner, &o.DatabaseTag)
	return o, redact(err, w.Conn.Password)
}

// Apply implements Provider. The role is created with its tag in one transaction; the database
// with its owner in one statement (CREATE DATABASE cannot run in a transaction), then tagged.
func (p *Postgres) Apply(ctx context.Context, w Want, o Observed) error {
	role, db, tag := ident(w.Role), ident(w.Database), literal(w.Owner.Tag())
	var role1 []string
	switch {
	case !o.RoleExists:
		role1 = append(role1, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD %s CONNECTION LIMIT %d", role, literal(w.Password), w.ConnectionLimit),
			fmt.Sprintf("COMMENT ON ROLE %s IS %s", role, tag))
	default:
		if o.ConnectionLimit != w.ConnectionLimit || !o.CanLogin {
			role1 = append(role1, fmt.Sprintf("ALTER ROLE %s LOGIN CONNECTION LIMIT %d", role, w.ConnectionLimit))
		}
		if o.RoleTag != w.Owner.Tag() {
			role1 = append(role1, fmt.Sprintf("COMMENT ON ROLE %s IS %s", role, tag))
		}
	}
	if len(role1) > 0 { // several statements in one simple query run as one transaction
		if err := p.exec(ctx, w.Conn, strings.Join(role1, "; ")); err != nil {
			return fmt.Errorf("role %s: %w", w.Role, err)
		}
	}
	var db1 []string
	switch {
	case !o.DatabaseExists:
		if err := p.exec(ctx, w.Conn, fmt.Sprintf("CREATE DATABASE %s OWNER %s", db, role)); err != nil {
			return fmt.Errorf("database %s: %w", w.Database, err)
		}
		db1 = append(db1, fmt.Sprintf("COMMENT ON DATABASE %s IS %s", db, tag))
	default:
		if o.DatabaseOwner != w.Role {
			db1 = append(db1, fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", db, role))
		}
		if o.DatabaseTag != w.Owner.Tag() {
			db1 = append(db1, fmt.Sprintf("COMMENT ON DATABASE %s IS %s", db, tag))
		}
	}
	if len(db1) > 0 {
		if err := p.exec(ctx, w.Conn, strings.Join(db1, "; ")); err != nil {
			return fmt.Errorf("database %s: %w", w.Database, err)
		}
	}
	return nil
}

// SetPassword implements Provider.
func (p *Postgres) SetPassword(ctx context.Context, w Want) error {
	return p.exec(ctx, w.Conn, fmt.Sprintf("ALTER ROLE %s PASSWORD %s", ident(w.Role), literal(w.Password)))
}

// Delete implements Provider: the database first (with its connections closed), then the role.
func (p *Postgres) Delete(ctx context.Context, w Want) error {
	o, err := p.Observe(ctx, w)
	if err != nil {
		return err
	}
	if w.Database != "" && o.DatabaseExists && DatabaseOurs(w, o) {
		if err := p.exec(ctx, w.Conn, fmt.Sprintf("DROP DATABASE IF EXISTS %s WITH (FORCE)", ident(w.Database))); err != nil {
			return fmt.Errorf("database %s: %w", w.Database, err)
		}
	}
	if w.Role != "" && o.RoleExists && tagged(o.RoleTag, w.Owner.UID) {
		if err := p.exec(ctx, w.Conn, "DROP ROLE IF EXISTS "+ident(w.Role)); err != nil {
			return fmt.Errorf("role %s: %w", w.Role, err)
		}
	}
	return nil
}

// Release implements Provider.
func (p *Postgres) Release(ctx context.Context, w Want) error {
	o, err := p.Observe(ctx, w)
	if err != nil {
		return err
	}
	var sql []string
	if o.DatabaseExists && tagged(o.DatabaseTag, w.Owner.UID) {
		sql = append(sql, fmt.Sprintf("COMMENT ON DATABASE %s IS NULL", ident(w.Database)))
	}
	if o.RoleExists && tagged(o.RoleTag, w.Owner.UID) {
		sql = append(sql, fmt.Sprintf("COMMENT ON ROLE %s IS NULL", ident(w.Role)))
	}
	if len(sql) == 0 {
		return nil
	}
	return p.exec(ctx, w.Conn, strings.Join(sql, "; "))
}

// Owned implements Provider.
func (p *Postgres) Owned(ctx context.Context, c Conn) ([]Want, error) {
	pool, err := p.pool(c)
	if err != nil {
		return nil, err
	}
	rows, err := pool.Query(ctx, `SELECT true, rolname::text, shobj_description(oid, 'pg_authid') FROM pg_roles
		WHERE shobj_description(oid, 'pg_authid') LIKE $1
	UNION ALL SELECT false, datname::text, shobj_description(oid, 'pg_database') FROM pg_database
		WHERE shobj_description(oid, 'pg_database') LIKE $1`, tagPrefix+"%")
	if err != nil {
		return nil, redact(err, c.Password)
	}
	byUID := map[string]*Want{}
	var order []string
	var isRole bool
	var name, tag string
	_, err = pgx.ForEachRow(rows, []any{&isRole, &name, &tag}, func() error {
		o, ok := ParseTag(tag)
		if !ok {
			return nil
		}
		w := byUID[o.UID]
		if w == nil {
			w = &Want{Conn: c, Owner: o}
			byUID[o.UID] = w
			order = append(order, o.UID)
		}
		if isRole {
			w.Role = name
		} else {
			w.Database = name
		}
		return nil
	})
	if err != nil {
		return nil, redact(err, c.Password)
	}
	owned := make([]Want, 0, len(order))
	for _, uid := range order {
		owned = append(owned, *byUID[uid])
	}
	return owned, nil
}

func ident(s string) string { return pgx.Identifier{s}.Sanitize() }

// literal quotes s as an SQL string literal (standard_conforming_strings is on since PostgreSQL 9.1).
func literal(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
