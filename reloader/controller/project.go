// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"iter"
	"maps"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/kpatterns/kpatterns/shared/digest"
)

// Project is the cache transform of every kind the reloader caches (CacheScheme's Source and
// Workload): it keeps only what the reloader reads, before the object enters the informer's store.
//
//   - ConfigMaps and Secrets: name, namespace, UID, resourceVersion, whether IgnoreAnnotation is
//     "true", and for each key the 32 bytes of its value's sha256 (Values). No value — and so no
//     Secret — is held after this.
//   - Workloads: identity, deletion timestamp, the reloader's own annotations, the references of
//     the Pod template (Refs) and the value that last rolled it (the template's digest
//     annotation; a Rollout's spec.restartAt).
//
// Projecting a projection returns it unchanged, as client-go asks of a transform: it transforms
// the objects of an informer's initial watch-list twice (the reflector hands the transformed
// objects to its FIFO's Replace, which transforms them again; TestTransformOfExistingObjects shows
// it). A projection holds no data or spec, and those are what projecting reads.
func Project(obj any) (any, error) {
	if o, ok := obj.(interface{ project() }); ok {
		o.project()
		return o, nil
	}
	return nil, fmt.Errorf("reloader: no projection for %T", obj) // a programming error: every cached kind has one
}

func (s *Source[K]) project() {
	s.Ignored = s.Ignored || s.Annotations[IgnoreAnnotation] == "true"
	if s.Data != nil || s.BinaryData != nil {
		strs, bins := s.Data, s.BinaryData
		if _, secret := any((*K)(nil)).(*corev1.Secret); secret { // a Secret's data are bytes, base64 in JSON
			strs, bins = nil, make(map[string][]byte, len(s.Data))
			for k, v := range s.Data {
				b, err := base64.StdEncoding.DecodeString(v)
				if err != nil { // not served by an API server; the text still digests each change
					b = []byte(v)
				}
				bins[k] = b
			}
		}
		s.Values = pack(strs, bins)
		s.Data, s.BinaryData = nil, nil
	}
	s.keep()
}

func (w *Workload[K]) project() {
	if w.Spec != (workloadSpec{}) {
		if t := w.Spec.template(); t != nil {
			w.References = t.uses().refs()
			w.Rolled = t.Metadata.Annotations[digest.Annotation]
		}
		if _, rollout := any((*K)(nil)).(*Rollout); rollout {
			w.Rolled = ""
			if at := w.Spec.RestartAt; at != nil {
				w.Rolled = at.UTC().Format(time.RFC3339)
			}
		}
		w.Spec = workloadSpec{}
	}
	w.keep(DigestsAnnotation, DigestKeyAnnotation, SourcesAnnotation, PausedAnnotation, PausedUntilAnnotation)
}

// uses are the uses of the references of the template.
func (t *podTemplate) uses() refUses {
	uses := refUses{}
	uses.volumes(t.Spec.Volumes)
	uses.containers(slices.Concat(t.Spec.InitContainers, t.Spec.Containers))
	return uses
}

// valueDigests are the sha256 digests of a source's values, packed in one string: per key, a byte
// telling its map (0: a ConfigMap's data; 1: its binaryData, or a Secret's data), the key's length
// (a key has at most 253 bytes), the key and the 32 bytes of the digest; the data's keys first,
// each map's in key order. One allocation of about 40 bytes a key, where a map of digests costs
// several times that.
type valueDigests string

func pack(strs map[string]string, bins map[string][]byte) valueDigests {
	size := 0
	for k := range strs {
		size += 2 + len(k) + sha256.Size
	}
	for k := range bins {
		size += 2 + len(k) + sha256.Size
	}
	var b strings.Builder
	b.Grow(size)
	add := func(binary byte, k string, sum [sha256.Size]byte) {
		b.WriteByte(binary)
		b.WriteByte(byte(len(k)))
		b.WriteString(k)
		b.Write(sum[:])
	}
	for _, k := range slices.Sorted(maps.Keys(strs)) {
		add(0, k, sha256.Sum256([]byte(strs[k])))
	}
	for _, k := range slices.Sorted(maps.Keys(bins)) {
		add(1, k, sha256.Sum256(bins[k]))
	}
	return valueDigests(b.String())
}

// of yields the keys and digests of the data (binary false) or of the binary data, in key order.
func (v valueDigests) of(binary bool) iter.Seq2[string, string] {
	return func(yield func(key, sum string) bool) {
		for i := 0; i+2 <= len(v); {
			n := int(v[i+1])
			key, sum := string(v[i+2:i+2+n]), string(v[i+2+n:i+2+n+sha256.Size])
			if (v[i] == 1) == binary && !yield(key, sum) {
				return
			}
			i += 2 + n + sha256.Size
		}
	}
}

// has says whether key has a value, in either map.
func (v valueDigests) has(key string) bool {
	for _, binary := range []bool{false, true} {
		for k := range v.of(binary) {
			if k == key {
				return true
			}
		}
	}
	return false
}
