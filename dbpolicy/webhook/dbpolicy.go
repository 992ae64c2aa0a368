// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package webhook validates Database objects of a CRD that another operator installs and owns
// (database.example.com/v1): this pattern has no Go types, no informer and no RBAC for it. Every
// decision is made from the admission request alone — on UPDATE its old and new objects, never a
// cache — so it is as current as the request and needs no reads at all.
package webhook

import (
	"context"
	"fmt"

	admissionv1 "k8s.io/api/admission/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilversion "k8s.io/apimachinery/pkg/util/version"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/kpatterns/kpatterns/shared/admit"
)

const (
	// Name is the pattern's name.
	Name = "dbpolicy"
	// ValidatePath is the handler's path, as in the marker below.
	ValidatePath = "/validate-database-example-com-v1-database"
)

// +kubebuilder:webhook:path=/validate-database-example-com-v1-database,mutating=false,failurePolicy=fail,sideEffects=None,groups=database.example.com,resources=databases,verbs=create;update,versions=v1,name=validate.dbpolicy.patterns.kpatterns.dev,admissionReviewVersions=v1,timeoutSeconds=5

// DatabaseGVK is the other operator's kind.
var DatabaseGVK = schema.GroupVersionKind{Group: "database.example.com", Version: "v1", Kind: "Database"}

// database holds only what the policy reads of the other operator's object. Anything else in it —
// fields this pattern has never heard of included — is ignored when decoding.
type database struct {
	Spec struct {
		Engine     string `json:"engine"`
		Version    string `json:"version"`
		StorageGiB *int64 `json:"storageGiB"`
	} `json:"spec"`
}

// Setup registers the validating handler on the manager's webhook server. There is nothing else:
// no controller, no cache, no client use.
func Setup(mgr ctrl.Manager) error {
	admit.Register(mgr, ValidatePath, Validator{})
	return nil
}

// Validator enforces the Database policy: on CREATE the required fields (engine, version
// major.minor[.patch], storageGiB > 0); on UPDATE the same for each field that changed — a field
// left as it was is not judged again (Kubernetes' validation ratcheting), so an object made before
// the policy can still lose its finalizer, gain a label or be fixed one field at a time — and,
// against the old object, storage only grows, the engine never changes and the version is never
// downgraded. A metadata-only update (a finalizer removed, a label) always passes.
type Validator struct{}

// Handle implements admission.Handler.
func (Validator) Handle(_ context.Context, req admission.Request) admission.Response {
	var db database
	if resp, ok := admit.DecodeJSON(req.Kind, DatabaseGVK, req.Object, &db); !ok {
		return resp
	}
	spec := field.NewPath("spec")
	var old *database
	var errs field.ErrorList
	var warnings []string
	if req.Operation == admissionv1.Update {
		old = &database{}
		if resp, ok := admit.DecodeJSON(req.Kind, DatabaseGVK, req.OldObject, old); !ok {
			return resp
		}
		errs = required(spec, &db, old)
		errs = append(errs, transitions(spec, old, &db)...)
		warnings = majorUpgrade(old, &db)
	} else {
		errs = required(spec, &db, nil)
	}
	if len(errs) > 0 {
		return admission.Denied(errs.ToAggregate().Error()).WithWarnings(warnings...)
	}
	return admission.Allowed("").WithWarnings(warnings...)
}

// majorUpgrade warns of an upgrade to a new major version: allowed, and never to be undone, since
// the version cannot be downgraded.
func majorUpgrade(old, db *database) []string {
	was, errOld := utilversion.ParseGeneric(old.Spec.Version)
	now, errNew := utilversion.ParseGeneric(db.Spec.Version)
	if errOld != nil || errNew != nil || now.Major() <= was.Major() {
		return nil
	}
	return []string{fmt.Sprintf("spec.version: a major upgrade from %s to %s cannot be rolled back", old.Spec.Version, db.Spec.Version)}
}

// required checks the required fields of db; on UPDATE (old not nil) only those that differ from
// old's.
func required(spec *field.Path, db, old *database) field.ErrorList {
	var errs field.ErrorList
	if db.Spec.Engine == "" && (old == nil || old.Spec.Engine != db.Spec.Engine) {
		errs = append(errs, field.Required(spec.Child("engine"), "the database engine, e.g. postgres"))
	}
	switch {
	case old != nil && old.Spec.Version == db.Spec.Version:
	case db.Spec.Version == "":
		errs = append(errs, field.Required(spec.Child("version"), "the engine version, e.g. 16.2"))
	default:
		if _, err := utilversion.ParseGeneric(db.Spec.Version); err != nil {
			errs = append(errs, field.Invalid(spec.Child("version"), db.Spec.Version, "must be a version like 16.2 or 8.0.36"))
		}
	}
	switch {
	case old != nil && equalPtr(old.Spec.StorageGiB, db.Spec.StorageGiB):
	case db.Spec.StorageGiB == nil:
		errs = append(errs, field.Required(spec.Child("storageGiB"), "the storage size in GiB"))
	case *db.Spec.StorageGiB <= 0:
		errs = append(errs, field.Invalid(spec.Child("storageGiB"), *db.Spec.StorageGiB, "must be positive"))
	}
	return errs
}

func equalPtr(a, b *int64) bool { return a == nil && b == nil || a != nil && b != nil && *a == *b }

// transitions compares the old and new objects of an UPDATE. A field the old object lacks (one
// created before this policy) has nothing to compare against and is only held to required().
func transitions(spec *field.Path, old, db *database) field.ErrorList {
	var errs field.ErrorList
	if old.Spec.StorageGiB != nil && db.Spec.StorageGiB != nil && *db.Spec.StorageGiB < *old.Spec.StorageGiB {
		errs = append(errs, field.Forbidden(spec.Child("storageGiB"),
			fmt.Sprintf("database storage cannot shrink from %d to %d GiB", *old.Spec.StorageGiB, *db.Spec.StorageGiB)))
	}
	if old.Spec.Engine != "" && db.Spec.Engine != old.Spec.Engine {
		errs = append(errs, field.Forbidden(spec.Child("engine"),
			fmt.Sprintf("the engine is immutable: was %q, asked for %q", old.Spec.Engine, db.Spec.Engine)))
	}
	was, errOld := utilversion.ParseGeneric(old.Spec.Version)
	now, errNew := utilversion.ParseGeneric(db.Spec.Version)
	if errOld == nil && errNew == nil && now.LessThan(was) {
		errs = append(errs, field.Forbidden(spec.Child("version"),
			fmt.Sprintf("the version cannot be downgraded from %s to %s", old.Spec.Version, db.Spec.Version)))
	}
	return errs
}
