// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// What a Pod template references (ConfigMaps and Secrets, whole or by key) and the digests of
// what it last saw, as recorded on the workload.

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/digest"
)

// Kind is the kind of a referenced source.
type Kind string

// The kinds of sources.
const (
	ConfigMap Kind = "configmap"
	Secret    Kind = "secret"
)

// Ref is one ConfigMap or Secret a Pod template references.
type Ref struct {
	Kind     Kind
	Name     string
	Optional bool // every reference to it is optional
	// Keys are the keys the template reads, sorted — env valueFrom key references, and volume and
	// projected items — or nil when it reads every key (envFrom, a volume without items).
	Keys []string
}

// Key is the reference's index entry: "configmap/<name>".
func (r Ref) Key() string { return string(r.Kind) + "/" + r.Name }

// Entry is the reference's name in DigestsAnnotation: Key, and the keys read when not all are
// ("configmap/<name>:<key>+<key>"; neither ':' nor '+' can be in a name or a key). A record of a
// whole source and one of some of its keys name different entries, so changing which keys are
// read — or upgrading from a record without keys — records a new baseline and rolls nothing.
func (r Ref) Entry() string {
	if r.Keys == nil {
		return r.Key()
	}
	return r.Key() + ":" + strings.Join(r.Keys, "+")
}

// Refs returns the ConfigMaps and Secrets a Pod spec references, sorted by Key: volumes,
// projected volume sources, and envFrom and env valueFrom of containers and init containers. A
// source is optional only if every reference to it is; it is read whole if any reference reads
// every key, else the union of the keys its references select.
func Refs(spec *corev1.PodSpec) []Ref {
	uses := refUses{}
	uses.volumes(spec.Volumes)
	for _, c := range slices.Concat(spec.InitContainers, spec.Containers) {
		uses.container(envOf{EnvFrom: c.EnvFrom, Env: c.Env})
	}
	return uses.refs()
}

// SourcesAnnotation on a workload names sources its Pods read although their template does not
// reference them — an application that reads a ConfigMap through the API, a sidecar's file:
// comma-separated "configmap/<name>" or "secret/<name>", each optionally followed by
// ":<key>+<key>", the keys that count. They count as the template's references do, as optional
// ones (the Pods start without them): recorded, and a change of their data rolls the workload.
const SourcesAnnotation = "patterns.kpatterns.dev/reloader-sources"

// WorkloadRefs are the Refs of a workload's Pod template with the sources its SourcesAnnotation
// names, and an error naming each entry of that annotation that names no source (left out). obj
// is what the reloader's cache holds of the workload (Cached), or the workload as the API serves it.
func WorkloadRefs(obj client.Object) ([]Ref, error) {
	cached, ok := obj.(cachedWorkload)
	if !ok {
		c, err := Cached(obj)
		if err != nil {
			return nil, err
		}
		cached = c.(cachedWorkload)
	}
	w := cached.workload()
	sources, named := w.annotation(SourcesAnnotation)
	if !named { // the template's references as the cache holds them: nothing to build per reconcile
		return w.References, nil
	}
	uses := refUses{}
	for _, r := range w.References {
		uses.add(r.Kind, r.Name, ptr.To(r.Optional), r.Keys)
	}
	var bad []string
	for entry := range strings.SplitSeq(sources, ",") {
		if entry = strings.TrimSpace(entry); entry == "" {
			continue
		}
		src, keyList, selects := strings.Cut(entry, ":")
		kind, name, _ := strings.Cut(src, "/")
		var keys []string
		if selects {
			keys = strings.Split(keyList, "+")
		}
		if Kind(kind) != ConfigMap && Kind(kind) != Secret || len(validation.IsDNS1123Subdomain(name)) > 0 ||
			slices.ContainsFunc(keys, func(k string) bool { return len(validation.IsConfigMapKey(k)) > 0 }) {
			bad = append(bad, strconv.Quote(entry))
			continue
		}
		uses.add(Kind(kind), name, ptr.To(true), keys)
	}
	refs := uses.refs()
	if len(bad) > 0 {
		return refs, fmt.Errorf("%s: %s: want configmap/<name> or secret/<name>, optionally :<key>+<key>", SourcesAnnotation, strings.Join(bad, ", "))
	}
	return refs, nil
}

// refUses are how a Pod template's references use each source: whether any requires it, whether
// any reads it whole, and else the keys they read.
type refUses map[refSource]*refUse

type refSource struct {
	kind Kind
	name string
}

type refUse struct {
	required, whole bool
	keys            map[string]bool
}

// add records one reference; keys nil: every key.
func (uses refUses) add(kind Kind, name string, optional *bool, keys []string) {
	if name == "" {
		return
	}
	r := refSource{kind, name}
	u := uses[r]
	if u == nil {
		u = &refUse{keys: map[string]bool{}}
		uses[r] = u
	}
	u.required = u.required || optional == nil || !*optional
	u.whole = u.whole || keys == nil
	for _, k := range keys {
		u.keys[k] = true
	}
}

// items are the keys a volume's items select (nil: no items, every key).
func items(in []corev1.KeyToPath) []string {
	if len(in) == 0 {
		return nil
	}
	keys := make([]string, len(in))
	for i, it := range in {
		keys[i] = it.Key
	}
	return keys
}

func (uses refUses) volumes(volumes []corev1.Volume) {
	for _, v := range volumes {
		if v.ConfigMap != nil {
			uses.add(ConfigMap, v.ConfigMap.Name, v.ConfigMap.Optional, items(v.ConfigMap.Items))
		}
		if v.Secret != nil {
			uses.add(Secret, v.Secret.SecretName, v.Secret.Optional, items(v.Secret.Items))
		}
		if v.Projected == nil {
			continue
		}
		for _, s := range v.Projected.Sources {
			if s.ConfigMap != nil {
				uses.add(ConfigMap, s.ConfigMap.Name, s.ConfigMap.Optional, items(s.ConfigMap.Items))
			}
			if s.Secret != nil {
				uses.add(Secret, s.Secret.Name, s.Secret.Optional, items(s.Secret.Items))
			}
		}
	}
}

func (uses refUses) containers(containers []envOf) {
	for _, c := range containers {
		uses.container(c)
	}
}

func (uses refUses) container(c envOf) {
	for _, e := range c.EnvFrom { // a prefix renames the variables; every key is still read
		if e.ConfigMapRef != nil {
			uses.add(ConfigMap, e.ConfigMapRef.Name, e.ConfigMapRef.Optional, nil)
		}
		if e.SecretRef != nil {
			uses.add(Secret, e.SecretRef.Name, e.SecretRef.Optional, nil)
		}
	}
	for _, e := range c.Env {
		if e.ValueFrom == nil {
			continue
		}
		if r := e.ValueFrom.ConfigMapKeyRef; r != nil {
			uses.add(ConfigMap, r.Name, r.Optional, []string{r.Key})
		}
		if r := e.ValueFrom.SecretKeyRef; r != nil {
			uses.add(Secret, r.Name, r.Optional, []string{r.Key})
		}
	}
}

// refs are the references, sorted by Key.
func (uses refUses) refs() []Ref {
	refs := make([]Ref, 0, len(uses))
	for src, u := range uses {
		r := Ref{Kind: src.kind, Name: src.name, Optional: !u.required}
		if !u.whole {
			r.Keys = slices.Sorted(maps.Keys(u.keys))
		}
		refs = append(refs, r)
	}
	slices.SortFunc(refs, func(a, b Ref) int { return strings.Compare(a.Key(), b.Key()) })
	return refs
}

// Digests returns a digest of each referenced source, in the order of refs, from what the cache
// holds of it (Project: per-key digests, never values): its kind and name, then each key and
// value digest — only of the keys the reference reads, with an explicit entry for each of those
// missing — every field tagged and length-prefixed so different contents never encode alike. A
// missing source (get returns nil) is an explicit "absent" entry; an ignored one
// (IgnoreAnnotation) is Ignored, whatever its data. Other labels and annotations do not count.
// The digests are HMACs with key (the installation's DigestKey): the workloads they are written
// on are readable by far more than the Secrets, and an unkeyed digest of a low-entropy value is
// searched for offline. A nil key gives the unkeyed digests earlier versions recorded.
func Digests(key []byte, refs []Ref, get func(Ref) client.Object) []string {
	out := make([]string, len(refs))
	for i, r := range refs {
		d := digest.NewKeyed(key).Field('n', []byte(r.Key()))
		src, ok := get(r).(cachedSource)
		if !ok {
			out[i] = d.Field('a', nil).String()
			continue
		}
		values, ignored := src.source()
		if ignored {
			out[i] = Ignored
			continue
		}
		// A ConfigMap's data, then its binary data (a Secret's data are binary): the entries
		// digest.Hash's Strings (k, v) and Bytes (K, b) add, in key order.
		for _, binary := range []bool{false, true} {
			keyTag, valueTag := byte('k'), byte('v')
			if binary {
				keyTag, valueTag = 'K', 'b'
			}
			for k, sum := range values.of(binary) {
				if r.Keys == nil || slices.Contains(r.Keys, k) {
					d.Field(keyTag, []byte(k)).Field(valueTag, []byte(sum))
				}
			}
		}
		for _, k := range r.Keys {
			if !values.has(k) {
				d.Field('m', []byte(k))
			}
		}
		out[i] = d.String()
	}
	return out
}

// Combined is the Pod template's digest: a digest of the per-source digests, in Key order.
func Combined(digests []string) string {
	d := digest.New()
	for _, s := range digests {
		d.Field('d', []byte(s))
	}
	return d.String()
}

// seen is the value of DigestsAnnotation ("" without references).
func seen(refs []Ref, digests []string) string {
	parts := make([]string, len(refs))
	for i, r := range refs {
		parts[i] = r.Entry() + "=" + digests[i][:min(16, len(digests[i]))]
	}
	return strings.Join(parts, ",")
}

func parseSeen(v string) map[string]string {
	m := map[string]string{}
	for _, part := range strings.Split(v, ",") {
		if key, d, ok := strings.Cut(part, "="); ok {
			m[key] = d
		}
	}
	return m
}

// changedSources names the sources referenced in both DigestsAnnotation values whose digest
// differs, each with its digest before and after ("secret/b (0123456789abcdef → fedcba9876543210)"),
// sorted; nil if the set of references changed (then the template was edited anyway).
func changedSources(before, after string) []string {
	b, a := parseSeen(before), parseSeen(after)
	if !slices.Equal(slices.Sorted(maps.Keys(b)), slices.Sorted(maps.Keys(a))) {
		return nil
	}
	var keys []string
	for k, d := range a {
		if b[k] != d && b[k] != Ignored && d != Ignored { // ignored, or no longer: a new baseline
			keys = append(keys, k+" ("+b[k]+" → "+d+")")
		}
	}
	slices.Sort(keys)
	return keys
}
