// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package digest computes the configuration digests that patterns stamp on Pod templates so that a
// change of configuration rolls the Pods and an unchanged one does not.
package digest

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash"
	"maps"
	"slices"
)

// Annotation carries a configuration digest on a Pod template.
const Annotation = "patterns.kpatterns.dev/config-digest"

// Hash is a sha256 over tagged, length-prefixed fields: different contents never encode alike.
type Hash struct{ h hash.Hash }

// New returns an empty Hash.
func New() *Hash { return &Hash{h: sha256.New()} }

// NewKeyed returns an empty Hash keyed with key: an HMAC-SHA256, whose digests of low-entropy
// contents (a PIN) cannot be searched for without the key. A nil key is New's unkeyed sha256.
func NewKeyed(key []byte) *Hash {
	if key == nil {
		return New()
	}
	return &Hash{h: hmac.New(sha256.New, key)}
}

// Field adds one tagged field.
func (d *Hash) Field(tag byte, b []byte) *Hash {
	var n [9]byte
	n[0] = tag
	binary.BigEndian.PutUint64(n[1:], uint64(len(b)))
	d.h.Write(n[:])
	d.h.Write(b)
	return d
}

// Strings adds a string map in key order, keys tagged 'k' and values 'v'.
func (d *Hash) Strings(m map[string]string) *Hash {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		d.Field('k', []byte(k)).Field('v', []byte(m[k]))
	}
	return d
}

// Bytes adds a byte-slice map in key order, keys tagged 'K' and values 'b'.
func (d *Hash) Bytes(m map[string][]byte) *Hash {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		d.Field('K', []byte(k)).Field('b', m[k])
	}
	return d
}

// String is the hex digest of what was added.
func (d *Hash) String() string { return hex.EncodeToString(d.h.Sum(nil)) }

// Map is the digest of one string map.
func Map(m map[string]string) string { return New().Strings(m).String() }
