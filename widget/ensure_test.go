// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/stages"
	"github.com/kpatterns/kpatterns/widget/controller"
)

// raceReader is the API server's live reader with one interleaving made certain: right after it
// answers NotFound, someone else creates the object (what a user or another controller may do in
// the gap between Ensure's live read and its write).
type raceReader struct {
	client.Reader
	create func(context.Context) error
}

func (r raceReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	err := r.Reader.Get(ctx, key, obj, opts...)
	if apierrors.IsNotFound(err) {
		if cerr := r.create(ctx); cerr != nil {
			return cerr
		}
	}
	return err
}

// A child created by someone else between Ensure's live read (NotFound) and its write is not
// adopted: the write fails, the foreign object is left exactly as it was, and the next Ensure
// reports it as not owned.
func TestEnsureDoesNotAdoptAnObjectCreatedInTheGap(t *testing.T) {
	ns := env.Namespace(t)
	env.Manager(t, env.Namespace(t)) // for the webhooks only: its controller watches another namespace
	ctx := context.Background()
	w := widget(ns, "gap")
	if err := env.Client.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	foreign := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "gap", Namespace: ns}, Data: map[string]string{"greeting": "theirs"}}
	c := stages.Clients{Client: env.Client, FieldManager: stages.FieldManager(controller.Name), ManagedBy: stages.FieldManager(controller.Name),
		APIReader: raceReader{Reader: env.Client, create: func(ctx context.Context) error { return env.Client.Create(ctx, foreign) }}}
	s := stages.NewScope(&c, w)
	desired := corev1ac.ConfigMap("gap", ns).WithData(map[string]string{"greeting": "hello"})
	if err := s.Ensure(ctx, desired, &corev1.ConfigMap{}); !apierrors.IsConflict(err) {
		t.Errorf("Ensure over an object created after its live read: %v, want a Conflict", err)
	}
	after := get(t, &corev1.ConfigMap{}, ns, "gap")
	if after.ResourceVersion != foreign.ResourceVersion || len(after.OwnerReferences) != 0 || after.Data["greeting"] != "theirs" {
		t.Fatalf("the foreign ConfigMap was written: owners %v, data %v", after.OwnerReferences, after.Data)
	}
	c.APIReader = env.Client
	var notOwned *stages.NotOwnedError
	if err := s.Ensure(ctx, desired, &corev1.ConfigMap{}); !errors.As(err, &notOwned) || notOwned.Stale {
		t.Errorf("second Ensure: %v, want a NotOwnedError", err)
	}
}
