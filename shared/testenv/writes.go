// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"sync/atomic"

	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// WriteCounter wraps a reconciler's client and counts the write requests it sends to the API
// server (create, update, patch, apply, delete, and status writes), so a test can assert that a
// converged object costs none. Reads pass through uncounted.
type WriteCounter struct {
	client.Client
	n atomic.Int32
}

// CountWrites wraps c.
func CountWrites(c client.Client) *WriteCounter { return &WriteCounter{Client: c} }

// N is the number of write requests so far.
func (c *WriteCounter) N() int { return int(c.n.Load()) }

func (c *WriteCounter) Create(ctx context.Context, obj client.Object, opts ...client.CreateOption) error {
	c.n.Add(1)
	return c.Client.Create(ctx, obj, opts...)
}

func (c *WriteCounter) Update(ctx context.Context, obj client.Object, opts ...client.UpdateOption) error {
	c.n.Add(1)
	return c.Client.Update(ctx, obj, opts...)
}

func (c *WriteCounter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.PatchOption) error {
	c.n.Add(1)
	return c.Client.Patch(ctx, obj, p, opts...)
}

func (c *WriteCounter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.ApplyOption) error {
	c.n.Add(1)
	return c.Client.Apply(ctx, obj, opts...)
}

func (c *WriteCounter) Delete(ctx context.Context, obj client.Object, opts ...client.DeleteOption) error {
	c.n.Add(1)
	return c.Client.Delete(ctx, obj, opts...)
}

func (c *WriteCounter) Status() client.SubResourceWriter {
	return &statusCounter{SubResourceWriter: c.Client.Status(), n: &c.n}
}

type statusCounter struct {
	client.SubResourceWriter
	n *atomic.Int32
}

func (c *statusCounter) Update(ctx context.Context, obj client.Object, opts ...client.SubResourceUpdateOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Update(ctx, obj, opts...)
}

func (c *statusCounter) Patch(ctx context.Context, obj client.Object, p client.Patch, opts ...client.SubResourcePatchOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Patch(ctx, obj, p, opts...)
}

func (c *statusCounter) Apply(ctx context.Context, obj runtime.ApplyConfiguration, opts ...client.SubResourceApplyOption) error {
	c.n.Add(1)
	return c.SubResourceWriter.Apply(ctx, obj, opts...)
}
