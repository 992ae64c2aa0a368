// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	lifespanv1alpha1 "github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	lifespan "github.com/kpatterns/kpatterns/lifespan/controller"
)

// lifespan shows the lifetime hooks: a Heartbeat term per leader, a restart (SIGTERM, a new
// process) ending one term and starting the next, and Observed events not repeated across it.
func (d *demo) lifespan() error {
	hb := &lifespanv1alpha1.Heartbeat{}
	beating := func(since time.Time) func() bool { // a term of a process started after since
		return func() bool { t := hb.Current(); return t != nil && t.Acquired.After(since) && t.Beats > 1 }
	}
	since := time.Now()
	if err := d.start("lifespan"); err != nil {
		return err
	}
	if err := d.waitFor(lifespan.Name, hb, beating(since)); err != nil {
		return err
	}
	step("Label ConfigMap demo-observed patterns.kpatterns.dev/observe=true: the leader emits one Observed event for its version")
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-observed", Namespace: ns, Labels: map[string]string{lifespan.ObserveLabel: "true"}},
		Data: map[string]string{"at": time.Now().UTC().Format(time.RFC3339)}}
	if err := d.recreate(cm, cm.DeepCopy()); err != nil {
		return err
	}
	ev := &eventsv1.Event{}
	if err := d.waitFor(lifespan.ObservedEventName(cm), ev, func() bool { return true }); err != nil {
		return err
	}
	fmt.Printf("    kubectl events: %s %s %q (by %s)\n", ev.Type, ev.Reason, ev.Note, ev.ReportingInstance)
	step("Restart lifespan (SIGTERM, then a new process): its leader exit hook ends the term, the new leader starts one")
	since = time.Now()
	if err := d.start("lifespan"); err != nil {
		return err
	}
	if err := d.waitFor(lifespan.Name, hb, beating(since)); err != nil {
		return err
	}
	fmt.Println("    kubectl get heartbeat lifespan -o jsonpath='{.status.terms}'   # the latest terms")
	ts := hb.Status.Terms
	for _, t := range ts[max(0, len(ts)-2):] {
		stopped := "-"
		if t.Stopped != nil {
			stopped = t.Stopped.Format("15:04:05.000")
		}
		fmt.Printf("    holder %s  acquired %s  last beat %s  beats %d  stopped %s\n", t.Holder,
			t.Acquired.Format("15:04:05.000"), t.LastBeat.Format("15:04:05.000"), t.Beats, stopped)
	}
	list := &eventsv1.EventList{}
	if err := d.c.List(d.ctx, list, client.InNamespace(ns), client.MatchingLabels{lifespan.EmittedByLabel: lifespan.Name}); err != nil {
		return err
	}
	observed := 0
	for _, e := range list.Items {
		if e.Reason == string(lifespan.Observed) && e.Regarding.UID == cm.UID {
			observed++
		}
	}
	fmt.Printf("    Observed events for demo-observed after the restart: %d (the new leader found its version already observed)\n", observed)
	return nil
}
