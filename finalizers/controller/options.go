// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// The pattern's flags of run, and the installation's name that its ownership tags carry.

import (
	"context"
	"flag"
	"fmt"
	"regexp"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Options are the pattern's flags of `run`.
type Options struct {
	// SweepInterval is how often the servers are listed for what objects that no longer exist
	// left behind.
	SweepInterval time.Duration
	// SweepDryRun: the sweep reports what it would drop (log, event, metric) and drops nothing.
	SweepDryRun bool
	// SweepMaxDrops bounds what one sweep drops: a pass that finds more orphans drops none and
	// reports them (a wrong cluster or server, a mass deletion); 0 is no bound.
	SweepMaxDrops int
	// Installation names this installation in every tag it writes; its sweep touches nothing
	// tagged by another. Empty: the kube-system Namespace's UID and the operator namespace
	// (InstallationID).
	Installation string
	// Namespace is the operator's namespace: the only one PostgresServers' Secrets are read from.
	Namespace string
}

// BindFlags binds the options to run's flags.
func (o *Options) BindFlags(fs *flag.FlagSet) {
	fs.DurationVar(&o.SweepInterval, "sweep-interval", 5*time.Minute, "how often the orphan sweep lists each server")
	fs.BoolVar(&o.SweepDryRun, "sweep-dry-run", false, "the orphan sweep reports what it would drop and drops nothing")
	fs.IntVar(&o.SweepMaxDrops, "sweep-max-drops", 10, "a sweep that finds more orphans than this drops none of them (0: no bound)")
	fs.StringVar(&o.Installation, "installation", "", "this installation's name in the ownership tags (default: the kube-system Namespace's UID/the operator namespace); keep it when moving to another cluster")
}

var installationName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:/-]{0,127}$`)

// InstallationID is the installation's name o says, else "<kube-system UID>/<operator namespace>":
// the same across reinstalls into that namespace of that cluster, another for a second
// installation on the same server (another cluster, or another namespace of this one). Moving to
// another cluster, pass the old value as --installation: the new cluster's objects then adopt
// what the old one's created.
func InstallationID(ctx context.Context, r client.Reader, o Options) (string, error) {
	id := o.Installation
	if id == "" {
		ns := &corev1.Namespace{}
		if err := r.Get(ctx, client.ObjectKey{Name: metav1.NamespaceSystem}, ns); err != nil {
			return "", fmt.Errorf("finalizers: naming the installation from the kube-system Namespace's UID (or pass --installation): %w", err)
		}
		id = string(ns.UID) + "/" + o.Namespace
	}
	if !installationName.MatchString(id) {
		return "", fmt.Errorf("finalizers: installation %q: want letters, digits and . _ : / -, at most 128", id)
	}
	return id, nil
}
