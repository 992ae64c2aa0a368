// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The differential suite: one table of Database requests decided through envtest's
// kube-apiserver by the webhook alone and by the admission policy (config/policy) alone.

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/testenv"
)

// db creates the Database "db" with spec.
func db(spec map[string]any, opts ...client.CreateOption) testenv.Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		return c.Create(ctx, database(ns, "db", spec), opts...)
	}
}

// set updates fields of the Database "db"'s spec (nil removes one).
func set(fields map[string]any) testenv.Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		u := database(ns, "db", nil)
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return err
		}
		for k, v := range fields {
			if v == nil {
				unstructured.RemoveNestedField(u.Object, "spec", k)
			} else if err := unstructured.SetNestedField(u.Object, v, "spec", k); err != nil {
				return err
			}
		}
		return c.Update(ctx, u)
	}
}

// before creates the Database "db" with spec and finalizers as if it was made before the policy
// existed (neither form decides it).
func before(spec map[string]any, finalizers ...string) testenv.Step {
	probe := func(ctx context.Context, c client.Client, ns string) error { // refused by both forms
		return c.Create(ctx, database(ns, "probe", map[string]any{}), client.DryRunAll)
	}
	return testenv.Unadmitted(func(ctx context.Context, c client.Client, ns string) error {
		u := database(ns, "db", spec)
		u.SetFinalizers(finalizers)
		return c.Create(ctx, u)
	}, probe)
}

// meta changes the Database "db"'s metadata only.
func meta(change func(*unstructured.Unstructured)) testenv.Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		u := database(ns, "db", nil)
		if err := c.Get(ctx, client.ObjectKeyFromObject(u), u); err != nil {
			return err
		}
		change(u)
		return c.Update(ctx, u)
	}
}

func deleteDB(ctx context.Context, c client.Client, ns string) error {
	return c.Delete(ctx, database(ns, "db", nil))
}

func pg(version string, storage int64) map[string]any {
	return map[string]any{"engine": "postgres", "version": version, "storageGiB": storage}
}

const semverOnly = "the policy compares versions with CEL's semver library, which reads two or three numeric components only: it does not compare what it cannot read, where the webhook compares numerically and ignores a suffix"

var cases = []testenv.Case{
	{Name: "complete", Request: db(pg("16.2", 20))},
	{Name: "empty spec", Request: db(map[string]any{}), Probe: true,
		Deny: "[spec.engine: Required value: the database engine, e.g. postgres, spec.version: Required value: the engine version, e.g. 16.2, spec.storageGiB: Required value: the storage size in GiB]"},
	{Name: "no version", Request: db(map[string]any{"engine": "postgres", "storageGiB": int64(1)}), Deny: "spec.version: Required value: the engine version, e.g. 16.2"},
	{Name: "no storage", Request: db(map[string]any{"engine": "postgres", "version": "16.2"}), Deny: "spec.storageGiB: Required value: the storage size in GiB"},
	{Name: "not a version", Request: db(pg("latest", 1)), Deny: `spec.version: Invalid value: "latest": must be a version like 16.2 or 8.0.36`},
	{Name: "major only is not a version", Request: db(pg("8", 1)), Deny: `spec.version: Invalid value: "8": must be a version like`},
	{Name: "a leading zero", Request: db(pg("01.2", 1)), Deny: `spec.version: Invalid value: "01.2"`},
	{Name: "a leading v", Request: db(pg("v8.0.36", 1))},
	{Name: "a suffix is ignored", Request: db(pg("16.2-beta", 1))},
	{Name: "a component past uint64 (fuzz corpus)", Request: db(pg("99999999999999999999.1", 1)),
		Deny:    `spec.version: Invalid value: "99999999999999999999.1"`,
		Differs: "the policy checks a version's form by a regular expression, not the size of its numbers"},
	{Name: "zero storage", Request: db(pg("16.2", 0)), Deny: "spec.storageGiB: Invalid value: 0: must be positive"},
	{Name: "negative storage", Request: db(pg("16.2", -1)), Deny: "spec.storageGiB: Invalid value: -1: must be positive"},
	{Name: "the largest storage (fuzz corpus)", Request: db(pg("16.2", 9223372036854775807))},
	{Name: "JSON field names are case-sensitive", Request: db(map[string]any{"Engine": "postgres", "version": "16.2", "storageGiB": int64(1)}),
		Deny: "spec.engine: Required value"},
	{Name: "fields unknown to the policy", Request: db(map[string]any{"engine": "postgres", "version": "16.2", "storageGiB": int64(1),
		"backup": map[string]any{"schedule": "@daily"}})},

	{Name: "grow", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"storageGiB": int64(21)})},
	{Name: "same size", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"storageGiB": int64(20)})},
	{Name: "shrink", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"storageGiB": int64(19)}),
		Deny: "spec.storageGiB: Forbidden: database storage cannot shrink from 20 to 19 GiB"},
	{Name: "engine changed", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"engine": "mysql"}),
		Deny: `spec.engine: Forbidden: the engine is immutable: was "postgres", asked for "mysql"`},
	{Name: "engine removed", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"engine": nil}),
		Deny: `[spec.engine: Required value: the database engine, e.g. postgres, spec.engine: Forbidden: the engine is immutable: was "postgres", asked for ""]`},
	{Name: "downgrade", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"version": "15.6"}),
		Deny: "spec.version: Forbidden: the version cannot be downgraded from 16.2 to 15.6", Probe: true},
	{Name: "downgrade by a patch", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"version": "16.1.9"}),
		Deny: "the version cannot be downgraded from 16.2 to 16.1.9"},
	{Name: "upgrade from a patch-less version", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"version": "16.2.1"})},
	{Name: "versions compare numerically", Setup: db(pg("16.9", 20)), Request: set(map[string]any{"version": "16.10"})},
	{Name: "and not as text", Setup: db(pg("16.10", 20)), Request: set(map[string]any{"version": "16.9"}),
		Deny: "the version cannot be downgraded from 16.10 to 16.9"},
	{Name: "a downgrade behind a v", Setup: db(pg("v16.2", 20)), Request: set(map[string]any{"version": "16.1"}),
		Deny: "the version cannot be downgraded from v16.2 to 16.1"},
	{Name: "a downgrade of four components", Setup: db(pg("16.2.1.5", 20)), Request: set(map[string]any{"version": "16.2.1.4"}),
		Deny: "the version cannot be downgraded from 16.2.1.5 to 16.2.1.4", Differs: semverOnly},
	{Name: "a downgrade with a suffix", Setup: db(pg("16.2-beta", 20)), Request: set(map[string]any{"version": "15.0-beta"}),
		Deny: "the version cannot be downgraded from 16.2-beta to 15.0-beta", Differs: semverOnly},
	{Name: "a major upgrade", Setup: db(pg("15.6", 20)), Request: set(map[string]any{"version": "16.2"}),
		Warn: "spec.version: a major upgrade from 15.6 to 16.2 cannot be rolled back", Probe: true},
	{Name: "a minor upgrade", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"version": "16.3"})},
	{Name: "a major upgrade with a shrink", Setup: db(pg("15.6", 20)), Request: set(map[string]any{"version": "v16", "storageGiB": int64(10)}),
		Deny: "spec.storageGiB: Forbidden: database storage cannot shrink from 20 to 10 GiB"},
	{Name: "an update to a version past uint64 (an expression error)", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"version": "99999999999999999999.0"}),
		Deny: `spec.version: Invalid value: "99999999999999999999.0"`, PolicyDeny: "resulted in error",
		Differs: "semver() fails on a component past uint64: the policy's expression errors and its failurePolicy Fail refuses the update, where the webhook names the invalid version"},
	{Name: "all three at once", Setup: db(pg("16.2", 20)), Request: set(map[string]any{"engine": "mysql", "version": "9.1", "storageGiB": int64(1)}),
		Deny: `[spec.storageGiB: Forbidden: database storage cannot shrink from 20 to 1 GiB, spec.engine: Forbidden: the engine is immutable: was "postgres", asked for "mysql", spec.version: Forbidden: the version cannot be downgraded from 16.2 to 9.1]`},

	{Name: "server-side dry-run", Request: db(map[string]any{}, client.DryRunAll), Deny: "spec.engine: Required value"},

	// Objects made before the policy: an update judges only the fields it changes, so a deletion
	// can finish (its finalizer removed) and its namespace with it.
	{Name: "made before the policy: its finalizer removed while it is deleted", Setup: testenv.Steps(before(map[string]any{}, "example.com/keep"), deleteDB),
		Request: meta(func(u *unstructured.Unstructured) { u.SetFinalizers(nil) })},
	{Name: "made before the policy: a label added", Setup: before(map[string]any{"engine": "postgres"}),
		Request: meta(func(u *unstructured.Unstructured) { u.SetLabels(map[string]string{"team": "a"}) })},
	{Name: "made before the policy: storage grown, the version still missing", Setup: before(map[string]any{"engine": "postgres", "storageGiB": int64(5)}),
		Request: set(map[string]any{"storageGiB": int64(6)})},
	{Name: "made before the policy: a version set that is none", Setup: before(map[string]any{"engine": "postgres", "storageGiB": int64(5)}),
		Request: set(map[string]any{"version": "latest"}), Deny: `spec.version: Invalid value: "latest": must be a version like 16.2 or 8.0.36`},
	{Name: "made before the policy: its storage set to zero", Setup: before(map[string]any{"engine": "postgres"}),
		Request: set(map[string]any{"storageGiB": int64(0)}), Deny: "spec.storageGiB: Invalid value: 0: must be positive"},
}

func TestWebhookAndPolicyDecideAlike(t *testing.T) { env.DecideAlike(t, cases) }

// generatedVersions are versions made by rule rather than by hand, with a fixed seed: created
// (any prefix, 1–4 components with or without leading zeros, a suffix or not), and updated from
// one to another within what both forms compare (two or three components, no leading zero, a v
// or not). k8s.io/apimachinery's version.ParseGeneric and LessThan, which the webhook uses, are
// the reference; the policy must decide every one alike. Outside that domain — four components, a
// suffix, numbers past uint64 — the forms differ on purpose, as the hand-written cases say.
func generatedVersions() []testenv.Case {
	r := rand.New(rand.NewPCG(47, 4))
	component := func(zeros bool) string {
		c := strconv.Itoa(r.IntN(30))
		if zeros && r.IntN(4) == 0 {
			c = "0" + c
		}
		return c
	}
	version := func(parts int, zeros bool) string {
		v := []string{"", "", "v"}[r.IntN(3)]
		for i := range parts {
			if i > 0 {
				v += "."
			}
			v += component(zeros)
		}
		return v
	}
	var out []testenv.Case
	for i := range 24 {
		v := version(1+r.IntN(4), true)
		if r.IntN(5) == 0 {
			v = []string{" ", "V"}[r.IntN(2)] + v
		}
		if r.IntN(5) == 0 {
			v += []string{"-beta", "+b1", ".x", "rc"}[r.IntN(4)]
		}
		c := testenv.Case{Name: fmt.Sprintf("generated create %d: version %q", i, v), Request: db(pg(v, 1))}
		if _, err := utilversion.ParseGeneric(v); err != nil {
			c.Deny = fmt.Sprintf("spec.version: Invalid value: %q: must be a version like 16.2 or 8.0.36", v)
		}
		out = append(out, c)
	}
	for i := range 24 {
		from, to := version(2+r.IntN(2), false), version(2+r.IntN(2), false)
		c := testenv.Case{Name: fmt.Sprintf("generated update %d: %s → %s", i, from, to), Setup: db(pg(from, 20)),
			Request: set(map[string]any{"version": to})}
		was, now := utilversion.MustParseGeneric(from), utilversion.MustParseGeneric(to)
		switch {
		case now.LessThan(was):
			c.Deny = fmt.Sprintf("spec.version: Forbidden: the version cannot be downgraded from %s to %s", from, to)
		case now.Major() > was.Major():
			c.Warn = fmt.Sprintf("spec.version: a major upgrade from %s to %s cannot be rolled back", from, to)
		}
		out = append(out, c)
	}
	return out
}

func TestGeneratedVersionsDecideAlike(t *testing.T) { env.DecideAlike(t, generatedVersions()) }

// The suite is a test that can fail: with a shrink planted as allowed, the suite must report the case that shrinks.
func TestDifferentialSuiteFindsAPlantedDifference(t *testing.T) {
	env.FindsPlanted(t, cases, "size(variables.violations) == 0",
		"size(variables.violations) == 0 || variables.update && object.spec.storageGiB < oldObject.spec.storageGiB", "shrink")
}

// With no webhook process serving, failurePolicy Fail refuses every Database write.
func TestWebhookDownRefuses(t *testing.T) { env.WebhookDownRefuses(t, nil, db(pg("16.2", 20))) }
