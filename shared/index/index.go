// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package index maps watch events through controller-runtime field indexes: a reverse lookup
// from an object to the objects that name it, without scanning the cache.
package index

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// MapByName returns a map function that maps an object to the objects of newList's kind, in its
// namespace, whose field index entry under field is the object's name.
func MapByName(c client.Reader, newList func() client.ObjectList, field string) handler.MapFunc {
	return func(ctx context.Context, obj client.Object) []reconcile.Request {
		list := newList()
		k := obj.GetName()
		if err := c.List(ctx, list, client.InNamespace(obj.GetNamespace()), client.MatchingFields{field: k}); err != nil {
			logf.FromContext(ctx).Error(err, "listing through a field index", "index", field, "key", k)
			return nil
		}
		var reqs []reconcile.Request
		_ = meta.EachListItem(list, func(o runtime.Object) error {
			if item, ok := o.(client.Object); ok {
				reqs = append(reqs, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(item)})
			}
			return nil
		})
		return reqs
	}
}
