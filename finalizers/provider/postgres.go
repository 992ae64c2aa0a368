// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package provider

import (
	"context"
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Postgres is the Provider for PostgreSQL servers: one small connection pool per server and
// login, opened on first use; a new password for the same login replaces its pool. Safe for
// concurrent use.
type Postgres struct {
	mu    sync.Mutex
	pools map[Conn]pool // by Conn without its Password
}

type pool struct {
	*pgxpool.Pool
	password string
}

// NewPostgres returns a Postgres with no connection open yet.
func NewPostgres() *Postgres { return &Postgres{pools: map[Conn]pool{}} }

// Close closes every pool.
func (p *Postgres) Close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c, pool := range p.pools {
		pool.Close()
		delete(p.pools, c)
	}
}

// DefaultSSLMode is the sslmode of a connection Secret without one: the server's certificate is
// verified and must name the host (the system's roots), so that the administrator's login never
// goes to a server that is not the one named, nor in the clear. A server without TLS needs
// sslmode: disable, said in its Secret.
const DefaultSSLMode = "verify-full"

// pool returns c's pool: at most 4 connections per server, each call bounded by ctx. A pool for
// the same server and login with another password (the Secret rotated) is closed and replaced.
func (p *Postgres) pool(c Conn) (*pgxpool.Pool, error) {
	key := c
	key.Password = ""
	p.mu.Lock()
	defer p.mu.Unlock()
	if old, ok := p.pools[key]; ok {
		if old.password == c.Password {
			return old.Pool, nil
		}
		old.Close() // waits for the connections in use to be released
		delete(p.pools, key)
	}
	mode := c.SSLMode
	if mode == "" {
		mode = DefaultSSLMode
	}
	u := url.URL{Scheme: "postgres", User: url.UserPassword(c.Username, c.Password), Host: net.JoinHostPort(c.Host, c.Port),
		Path: "/postgres", RawQuery: url.Values{"sslmode": {mode}, "application_name": {"kpatterns-finalizers"}}.Encode()}
	cfg, err := pgxpool.ParseConfig(u.String())
	if err != nil {
		return nil, fmt.Errorf("connection to %s: %w", net.JoinHostPort(c.Host, c.Port), redact(err, c.Password))
	}
	cfg.MaxConns = 4
	cfg.ConnConfig.ConnectTimeout = 5 * time.Second
	pl, err := pgxpool.NewWithConfig(context.Background(), cfg) // connects lazily
	if err != nil {
		return nil, redact(err, c.Password)
	}
	p.pools[key] = pool{Pool: pl, password: c.Password}
	return pl, nil
}

// redact keeps a password out of an error (and so out of logs and conditions).
func redact(err error, password string) error {
	if err == nil || password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "<redacted>"))
}

// exec runs sql, statements the controller wrote from identifiers (quoted by pgx) and from
// literals it made itself: never a value a user can write.
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
		d.datname IS NOT NULL, coalesce(pg_get_userbyid(d.datdba)::text, ''), coalesce(shobj_description(d.oid, 'pg_database'), ''),
		d.datname IS NOT NULL AND (d.datacl IS NULL OR EXISTS (SELECT 1 FROM aclexplode(d.datacl) a WHERE a.grantee = 0))
	FROM (SELECT 1) x LEFT JOIN pg_roles r ON r.rolname = $1 LEFT JOIN pg_database d ON d.datname = $2`, w.Role, w.Database).
		Scan(&o.RoleExists, &o.ConnectionLimit, &o.CanLogin, &o.RoleTag, &o.DatabaseExists, &o.DatabaseOwner, &o.DatabaseTag, &o.PublicAccess)
	return o, redact(err, w.Conn.Password)
}

// Apply implements Provider. The role is created with its tag in one transaction; the database
// with its owner in one statement (CREATE DATABASE cannot run in a transaction), then PUBLIC's
// privileges on it revoked (only its owner may connect) and tagged.
func (p *Postgres) Apply(ctx context.Context, w Want, o Observed) error {
	role, db := ident(w.Role), ident(w.Database)
	tag, err := literal(w.Owner.Tag())
	if err != nil {
		return err
	}
	var role1 []string
	switch {
	case !o.RoleExists:
		verifier, err := scramVerifier(w.Password)
		if err != nil {
			return fmt.Errorf("role %s: %w", w.Role, err)
		}
		role1 = append(role1, fmt.Sprintf("CREATE ROLE %s LOGIN PASSWORD %s CONNECTION LIMIT %d", role, verifier, w.ConnectionLimit),
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
		db1 = append(db1, revokePublic(db), fmt.Sprintf("COMMENT ON DATABASE %s IS %s", db, tag))
	default:
		if o.DatabaseOwner != w.Role {
			db1 = append(db1, fmt.Sprintf("ALTER DATABASE %s OWNER TO %s", db, role))
		}
		if o.PublicAccess {
			db1 = append(db1, revokePublic(db))
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

// revokePublic takes from PUBLIC what every database grants it (CONNECT, TEMPORARY): another
// tenant's role may then neither connect to the database nor create temporary tables in it.
func revokePublic(db string) string { return fmt.Sprintf("REVOKE ALL ON DATABASE %s FROM PUBLIC", db) }

// SetPassword implements Provider: the password reaches the server only as its SCRAM verifier.
func (p *Postgres) SetPassword(ctx context.Context, w Want) error {
	verifier, err := scramVerifier(w.Password)
	if err != nil {
		return fmt.Errorf("role %s: %w", w.Role, err)
	}
	return p.exec(ctx, w.Conn, fmt.Sprintf("ALTER ROLE %s PASSWORD %s", ident(w.Role), verifier))
}

// Retag implements Provider.
func (p *Postgres) Retag(ctx context.Context, w Want, o Observed) error {
	tag, err := literal(w.Owner.Tag())
	if err != nil {
		return err
	}
	var sql []string
	if o.DatabaseExists && tagged(o.DatabaseTag, w.Owner.UID) && o.DatabaseTag != w.Owner.Tag() {
		sql = append(sql, fmt.Sprintf("COMMENT ON DATABASE %s IS %s", ident(w.Database), tag))
	}
	if o.RoleExists && tagged(o.RoleTag, w.Owner.UID) && o.RoleTag != w.Owner.Tag() {
		sql = append(sql, fmt.Sprintf("COMMENT ON ROLE %s IS %s", ident(w.Role), tag))
	}
	if len(sql) == 0 {
		return nil
	}
	return p.exec(ctx, w.Conn, strings.Join(sql, "; "))
}

// Delete implements Provider: the database first (with its connections closed), then the role.
// A role that others granted privileges to (another tenant's GRANT CONNECT ON DATABASE theirs TO
// it) or that owns objects in the administrator's database cannot be dropped as it is; then what
// it owns there is handed to the administrator and its privileges revoked (REASSIGN OWNED, DROP
// OWNED, as PostgreSQL documents for dropping a role), in the transaction that drops it.
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
		role := ident(w.Role)
		err := p.exec(ctx, w.Conn, "DROP ROLE IF EXISTS "+role)
		if pgErr := (*pgconn.PgError)(nil); errors.As(err, &pgErr) && pgErr.Code == "2BP01" { // dependent_objects_still_exist
			err = p.exec(ctx, w.Conn, fmt.Sprintf("REASSIGN OWNED BY %s TO CURRENT_USER; DROP OWNED BY %s; DROP ROLE %s", role, role, role))
		}
		if err != nil {
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

// literal quotes s as an SQL string literal. It takes only what means the same whatever the
// server's standard_conforming_strings (a server, database or role setting): no quote, no
// backslash. Every literal here is the controller's own (a tag of names and UIDs, a verifier).
func literal(s string) (string, error) {
	if strings.ContainsAny(s, `'\`) {
		return "", fmt.Errorf("refusing to write %q as an SQL literal: it holds a quote or a backslash", s)
	}
	return "'" + s + "'", nil
}

// scramVerifier is what PostgreSQL stores for a SCRAM-SHA-256 password (RFC 5802, RFC 7677; the
// format of pg_authid.rolpassword), computed here so that the password itself never reaches the
// server, its SQL or its logs. The password must be printable ASCII (SASLprep leaves it as it is):
// the controller's are hex; a user's own Secret with anything else is refused.
func scramVerifier(password string) (string, error) {
	if password == "" {
		return "", errors.New("the password is empty")
	}
	for _, r := range password {
		if r < 0x20 || r > 0x7e {
			return "", errors.New("the password holds a character that is not printable ASCII")
		}
	}
	const iterations = 4096 // PostgreSQL's scram_iterations default
	salt := make([]byte, 16)
	_, _ = rand.Read(salt)
	salted, err := pbkdf2.Key(sha256.New, password, salt, iterations, sha256.Size)
	if err != nil {
		return "", err
	}
	mac := func(msg string) []byte { h := hmac.New(sha256.New, salted); h.Write([]byte(msg)); return h.Sum(nil) }
	stored := sha256.Sum256(mac("Client Key"))
	b64 := base64.StdEncoding.EncodeToString
	return literal(fmt.Sprintf("SCRAM-SHA-256$%d:%s$%s:%s", iterations, b64(salt), b64(stored[:]), b64(mac("Server Key"))))
}
