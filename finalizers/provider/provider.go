// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package provider is the external system an ExternalRecord stands for, behind a small interface
// keyed by the object's UID: a retry or a restart never creates a second record for one object.
// Demo is an in-memory implementation for the demo and the tests — DEMO ONLY: its records are lost
// when the process exits. A durable adapter implements Provider against a real system.
package provider

import (
	"context"
	"errors"
	"flag"
	"math/rand/v2"
	"sync"
	"time"
)

// Record is what the external system holds for one object.
type Record struct {
	Value string
}

// Provider is the external system. Every method is keyed by id, the object's UID.
type Provider interface {
	// Get returns the record and whether it exists.
	Get(ctx context.Context, id string) (Record, bool, error)
	// Put creates the record or replaces it: idempotent, a second Put of the same id never makes a
	// second record.
	Put(ctx context.Context, id string, r Record) error
	// Delete removes the record; deleting a record that does not exist is success.
	Delete(ctx context.Context, id string) error
}

// ErrInjected is the failure Demo injects.
var ErrInjected = errors.New("demo provider: injected failure")

// DemoOptions are the fault-injection knobs of Demo, flags of `run`.
type DemoOptions struct {
	ErrorRate float64       // the share of calls that fail with ErrInjected, 0–1
	Latency   time.Duration // added to every call
}

// BindFlags binds the options to run's flags.
func (o *DemoOptions) BindFlags(fs *flag.FlagSet) {
	fs.Float64Var(&o.ErrorRate, "demo-error-rate", 0, "demo provider only: the share of external calls that fail (0–1)")
	fs.DurationVar(&o.Latency, "demo-latency", 0, "demo provider only: latency added to every external call")
}

// DemoStats counts what Demo did.
type DemoStats struct {
	Records  int   // held now
	Creates  int64 // Puts of an id that held no record
	Created  int   // distinct ids ever created: Creates > Created means a record was created twice
	Failures int64 // injected failures
}

// Demo is an in-memory Provider with fault injection. DEMO ONLY: not durable, not shared between
// replicas. Safe for concurrent use.
type Demo struct {
	mu      sync.Mutex
	opts    DemoOptions
	records map[string]Record
	created map[string]bool
	stats   DemoStats
}

// NewDemo returns an empty Demo.
func NewDemo(o DemoOptions) *Demo {
	return &Demo{opts: o, records: map[string]Record{}, created: map[string]bool{}}
}

// Stats returns the counts so far.
func (d *Demo) Stats() DemoStats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.stats
	s.Records, s.Created = len(d.records), len(d.created)
	return s
}

// call waits the injected latency (or until ctx ends) and fails at the injected rate.
func (d *Demo) call(ctx context.Context) error {
	o := d.opts // fixed by NewDemo
	if o.Latency > 0 {
		select {
		case <-time.After(o.Latency):
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	if o.ErrorRate > 0 && rand.Float64() < o.ErrorRate {
		d.mu.Lock()
		d.stats.Failures++
		d.mu.Unlock()
		return ErrInjected
	}
	return nil
}

// Get implements Provider.
func (d *Demo) Get(ctx context.Context, id string) (Record, bool, error) {
	if err := d.call(ctx); err != nil {
		return Record{}, false, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.records[id]
	return r, ok, nil
}

// Put implements Provider.
func (d *Demo) Put(ctx context.Context, id string, r Record) error {
	if err := d.call(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if _, ok := d.records[id]; !ok {
		d.stats.Creates++
		d.created[id] = true
	}
	d.records[id] = r
	return nil
}

// Delete implements Provider.
func (d *Demo) Delete(ctx context.Context, id string) error {
	if err := d.call(ctx); err != nil {
		return err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	delete(d.records, id)
	return nil
}
