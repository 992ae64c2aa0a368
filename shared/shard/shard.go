// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package shard

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"
)

// Mode is how a member's informer is limited to its ranges.
type Mode string

const (
	// Server: the API server filters (metav1.ListOptions.ShardSelector, feature gate
	// ShardedListAndWatch): no label, no write to assign, each cache holds its share only.
	Server Mode = "server"
	// Label: a leader-elected sharder labels each object once with its range (ShardLabel), and a
	// member's informer selects its ranges by label. Works on any cluster.
	Label Mode = "label"
)

// ShardLabel is the range of an object in Label mode ("0" … "63"): an object's range never
// changes, so a label written once is never written again, whoever holds the range.
const ShardLabel = "patterns.kpatterns.dev/shard"

// Options say how a pattern's controllers are sharded.
type Options struct {
	Ring      string // the ring's name: its Leases' label value and name prefix
	Member    string // this replica's name, unique in the ring (a DNS label)
	Namespace string // where the ring's Leases live: the operator namespace
	Mode      Mode
	// Object is the kind that is split (a value of its type); other kinds the pattern caches are
	// cached whole by every member.
	Object client.Object
	// Field is the key of Server mode: "object.metadata.namespace" (an object and what it reads
	// in its namespace land on one member) or "object.metadata.uid". Label mode's key is the
	// object's controller owner's UID, else its own: a child lands with its owner.
	Field string
	// CacheOptions is the pattern's cache scope, and Setup registers its controllers: both are
	// applied to each member's worker manager, rebuilt whenever the member's ranges change.
	CacheOptions func(*cache.Options)
	Setup        func(manager.Manager) error
	// Manager are the process's manager options (app.ManagerOptions): the workers take their
	// cache defaults and controller options; leader election, metrics and probes stay the
	// process's.
	Manager manager.Options
	// LeaseDuration, RenewDeadline and RetryPeriod time the member Leases as leader election
	// times its Lease: a member that cannot renew for RenewDeadline stops all its work (noticed
	// within a RetryPeriod, its controllers given the rest of LeaseDuration to finish, else the
	// process exits); the others count it gone LeaseDuration after they last saw it renew.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// MaxMoves bounds how many ranges one new assignment moves between live members; the ranges
	// of a member that is gone move at once.
	MaxMoves int
}

func (o *Options) validate() error {
	var errs []error
	if o.Ring == "" || o.Member == "" || o.Namespace == "" || o.Object == nil || o.Setup == nil || o.CacheOptions == nil {
		errs = append(errs, errors.New("shard: Ring, Member, Namespace, Object, CacheOptions and Setup are required"))
	}
	if o.Mode != Server && o.Mode != Label {
		errs = append(errs, fmt.Errorf("shard: mode %q: want %q or %q", o.Mode, Server, Label))
	}
	if o.Field == "" {
		o.Field = "object.metadata.namespace"
	}
	if o.Field != "object.metadata.namespace" && o.Field != "object.metadata.uid" {
		errs = append(errs, fmt.Errorf("shard: field %q: the API server hashes object.metadata.namespace or object.metadata.uid", o.Field))
	}
	if o.LeaseDuration == 0 {
		o.LeaseDuration, o.RenewDeadline, o.RetryPeriod = 15*time.Second, 10*time.Second, 2*time.Second
	}
	if o.RetryPeriod <= 0 || o.RetryPeriod >= o.RenewDeadline || o.RenewDeadline+o.RetryPeriod >= o.LeaseDuration {
		errs = append(errs, fmt.Errorf("shard: want 0 < retry period (%s) < renew deadline (%s), and renew deadline + retry period < lease duration (%s)", o.RetryPeriod, o.RenewDeadline, o.LeaseDuration))
	}
	if o.MaxMoves <= 0 {
		o.MaxMoves = 8
	}
	return errors.Join(errs...)
}

// CacheOptions scopes the manager's own cache (not the workers'): the ring's Leases, and in Label
// mode the objects of the split kind that the pattern caches and that have no range label yet
// (what the sharder labels).
func CacheOptions(o Options, c *cache.Options) {
	if c.ByObject == nil {
		c.ByObject = map[client.Object]cache.ByObject{}
	}
	c.ByObject[&coordinationv1.Lease{}] = cache.ByObject{
		Namespaces: map[string]cache.Config{o.Namespace: {}},
		Label:      labels.SelectorFromSet(labels.Set{RingLabel: o.Ring}),
	}
	if o.Mode == Label {
		c.ByObject[o.Object] = cache.ByObject{Label: withRequirement(patternSelector(o), ShardLabel, selection.DoesNotExist)}
	}
}

// Setup adds the member (on every replica), the coordinator (on the leader) and, in Label mode,
// the sharder (on the leader) to mgr, whose cache was built with CacheOptions.
func Setup(mgr manager.Manager, o Options) error {
	if err := o.validate(); err != nil {
		return err
	}
	m := newMember(mgr, o)
	if err := mgr.Add(m); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("shard-member", m.healthy); err != nil {
		return err
	}
	if err := mgr.Add(&coordinator{mgr: mgr, o: o}); err != nil {
		return err
	}
	if o.Mode == Label {
		return setupSharder(mgr, o)
	}
	return nil
}

// patternSelector is the label selector the pattern's cache scope gives the split kind.
func patternSelector(o Options) labels.Selector {
	var c cache.Options
	o.CacheOptions(&c)
	for obj, by := range c.ByObject {
		if reflect.TypeOf(obj) == reflect.TypeOf(o.Object) && by.Label != nil {
			return by.Label
		}
	}
	return labels.Everything()
}

func withRequirement(sel labels.Selector, key string, op selection.Operator, values ...string) labels.Selector {
	req, err := labels.NewRequirement(key, op, values)
	if err != nil {
		panic(err) // ShardLabel and range numbers: constant, valid input
	}
	return sel.Add(*req)
}

// labelKey is Label mode's key: the controller owner's UID, else the object's own.
func labelKey(obj metav1.Object) string {
	if ref := metav1.GetControllerOf(obj); ref != nil {
		return string(ref.UID)
	}
	return string(obj.GetUID())
}

// rangeLabel is the value of ShardLabel for obj.
func rangeLabel(obj metav1.Object) string { return strconv.Itoa(RangeOf(labelKey(obj))) }
