// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"strings"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	"github.com/kpatterns/kpatterns/shared/shard"
)

// sharding runs mirror's controller on three active replicas in place of multi's, each caching
// and mirroring only the sources whose range it holds; one replica stops and its share moves.
func (d *demo) sharding() error {
	step("sharding: mirror's controller on three active replicas at once (in place of multi's), each mirroring the sources of its hash ranges (--sharding=label: a source's range is the hash of its UID)")
	d.stop("multi")
	_ = d.c.DeleteAllOf(d.ctx, &corev1.Namespace{}, client.MatchingLabels{"demo": "sharding"}) // a previous run's
	var sources []*corev1.ConfigMap
	for range 6 {
		n := localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-shard-", Labels: map[string]string{"demo": "sharding"}}})
		if err := d.c.Create(d.ctx, n); err != nil {
			return err
		}
		for i := range 4 {
			src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("settings-%d", i), Namespace: n.Name,
				Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"namespace": n.Name}}
			if err := d.c.Create(d.ctx, src); err != nil {
				return err
			}
			sources = append(sources, src)
		}
	}
	fmt.Printf("    %d sources in 6 namespaces demo-shard-*\n", len(sources))
	if err := d.install("sharding"); err != nil {
		return err
	}
	members := []string{"a", "b", "c"}
	for _, m := range members {
		if err := d.run("sharding-"+m, "sharding", "--member", m, "--sharding", "label"); err != nil {
			return err
		}
	}
	if err := d.shares(sources, members...); err != nil {
		return err
	}
	step("Stop replica b (SIGTERM): it stops its work, deletes its Lease, and its ranges move to a and c at once; then change every source")
	d.stop("sharding-b")
	for _, src := range sources {
		patch := client.MergeFrom(src.DeepCopy()) // the data alone: the sharder labelled the source meanwhile
		src.Data["namespace"] += " (changed)"
		if err := d.c.Patch(d.ctx, src, patch); err != nil {
			return err
		}
	}
	if err := d.shares(sources, "a", "c"); err != nil {
		return err
	}
	step("Stop the replicas; multi takes mirroring back for what follows")
	d.stop("sharding-a")
	d.stop("sharding-c")
	return d.start("multi")
}

// shares waits for the sharding ring to settle on members and every source's data to be in its
// child, and prints each member's share side by side (a source's range: the hash of its UID).
func (d *demo) shares(sources []*corev1.ConfigMap, members ...string) error {
	var a shard.Assignment
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var leases coordinationv1.LeaseList
		if err := d.c.List(d.ctx, &leases, client.InNamespace(ns), client.MatchingLabels{shard.RingLabel: "sharding"}); err != nil {
			return err
		}
		var err error
		if a, err = shard.Settled(leases.Items, "sharding", members...); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the ring did not settle on %v: %w", members, err)
		}
	}
	for _, src := range sources {
		child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace}}
		if err := d.waitFor(src.Name+mirror.Suffix, child, func() bool { return child.Data["namespace"] == src.Data["namespace"] }); err != nil {
			return err
		}
	}
	fmt.Printf("    assignment %d (Lease sharding):\n    MEMBER  RANGES  SOURCES\n", a.Generation)
	for _, m := range members {
		var mine []string
		for _, src := range sources {
			if a.Ranges[m].Has(shard.RangeOf(string(src.UID))) {
				mine = append(mine, strings.TrimPrefix(src.Namespace, "demo-shard-")+"/"+src.Name)
			}
		}
		fmt.Printf("    %-7s %-7d %-2d %s\n", m, a.Ranges[m].Len(), len(mine), strings.Join(mine, " "))
	}
	fmt.Printf("    every one of the %d children holds its source's data\n", len(sources))
	return nil
}
