// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// How a PostgresDatabase reaches its server: the PostgresServer and its Secret in the operator
// namespace, and the role's credentials Secret beside the object.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/provider"
)

// want is what db asks of its server, the connection read from its PostgresServer's Secret — or,
// for a deletion (deleting) when the server or its Secret is gone, the connection last read for
// the object.
func (r *Reconciler) want(ctx context.Context, db *v1alpha1.PostgresDatabase, deleting bool) (provider.Want, error) {
	w := provider.Want{Database: db.Spec.Database, Role: db.Spec.Role, ConnectionLimit: -1}
	if db.Spec.ConnectionLimit != nil {
		w.ConnectionLimit = *db.Spec.ConnectionLimit
	}
	if policy(db) != v1alpha1.ObserveOnly { // observing needs no ownership
		w.Owner = provider.Owner{UID: string(db.UID), Namespace: db.Namespace, Name: db.Name, Orphan: policy(db) == v1alpha1.Orphan}
	}
	c, err := r.conn(ctx, db.Spec.ServerName)
	if last, ok := r.conns.Load(db.UID); deleting && apierrors.IsNotFound(err) && ok {
		c, err = last.(provider.Conn), nil
	}
	if err != nil {
		return w, err
	}
	r.conns.Store(db.UID, c)
	w.Conn = c
	return w, nil
}

// conn reads how to reach the PostgresServer named server: the server from the cache, its Secret
// live and only from the operator's namespace — never from a namespace a PostgresDatabase's
// writer chooses.
func (r *Reconciler) conn(ctx context.Context, server string) (provider.Conn, error) {
	ps := &v1alpha1.PostgresServer{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: server}, ps); err != nil {
		return provider.Conn{}, err // it names the kind and the server
	}
	key := client.ObjectKey{Namespace: r.Namespace, Name: ps.Spec.ConnectionSecret}
	s := &corev1.Secret{}
	if err := r.APIReader.Get(ctx, key, s); err != nil {
		return provider.Conn{}, fmt.Errorf("PostgresServer %s: connection Secret %s: %w", server, key, err)
	}
	c := provider.Conn{Host: string(s.Data["host"]), Port: string(s.Data["port"]), Username: string(s.Data["username"]),
		Password: string(s.Data["password"]), SSLMode: string(s.Data["sslmode"])}
	if c.Host == "" || c.Port == "" || c.Username == "" {
		return c, fmt.Errorf("PostgresServer %s: connection Secret %s: keys host, port and username are required", server, key)
	}
	return c, nil
}

var errConflict = errors.New("not this object's")

// CredentialsSecret is the name of the Secret holding db's role login.
func CredentialsSecret(db *v1alpha1.PostgresDatabase) string { return db.Name + "-credentials" }

// credentials sets w.Password from the object's credentials Secret, read live; when it is missing
// it is created (owned by the object) with a new random password, and reset says the role, if it
// exists, needs that password. A Secret of that name that is not the object's is never touched.
func (r *Reconciler) credentials(ctx context.Context, db *v1alpha1.PostgresDatabase, w *provider.Want, o provider.Observed) (reset bool, err error) {
	s := &corev1.Secret{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: CredentialsSecret(db)}, s)
	if err == nil {
		if !metav1.IsControlledBy(s, db) {
			return false, fmt.Errorf("the Secret %s exists and is %w", CredentialsSecret(db), errConflict)
		}
		w.Password = string(s.Data["password"])
		return false, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	w.Password = hex.EncodeToString(b[:])
	s = &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: CredentialsSecret(db), Namespace: db.Namespace},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"username": w.Role, "password": w.Password, "database": w.Database,
			"host": w.Conn.Host, "port": w.Conn.Port},
	}
	// Collected with its PostgresDatabase, without blocking that object's foreground deletion,
	// which would take update of postgresdatabases/finalizers: a permission this needs nowhere else.
	if err := controllerutil.SetControllerReference(db, s, r.Client.Scheme(), controllerutil.WithBlockOwnerDeletion(false)); err != nil {
		return false, err
	}
	if err := r.Client.Create(ctx, s); err != nil {
		return false, err // AlreadyExists: created meanwhile; the retry reads it
	}
	return o.RoleExists, nil
}
