// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package controller shards mirror's controller: several active replicas, each mirroring the
// sources of its ranges (shared/shard), instead of one leader doing all and the others waiting.
package controller

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	"github.com/kpatterns/kpatterns/shared/shard"
)

// Name is the pattern's name, and its ring's.
const Name = "sharding"

// Label mode's sharder labels each source (and a child made before sharding) once with its range.
// +kubebuilder:rbac:groups="",resources=configmaps,verbs=patch

// Options shard mirror's controller over the ConfigMaps it caches, as member of the ring Name in
// namespace. Server mode keys by namespace — a source and its child (same namespace, another
// UID) land on one member, the only key the API server offers that keeps them together; Label
// mode keys by the source's UID, its child carrying its owner's range.
func Options(member, namespace string, mode shard.Mode, base manager.Options) shard.Options {
	return shard.Options{
		Ring: Name, Member: member, Namespace: namespace, Mode: mode,
		Object: &corev1.ConfigMap{}, Field: "object.metadata.namespace",
		CacheOptions: mirror.CacheOptions, Setup: mirror.Setup, Manager: base,
		// The members' Leases are timed as the leader's (--leader-elect-*).
		LeaseDuration: ptr.Deref(base.LeaseDuration, 0), RenewDeadline: ptr.Deref(base.RenewDeadline, 0),
		RetryPeriod: ptr.Deref(base.RetryPeriod, 0),
	}
}
