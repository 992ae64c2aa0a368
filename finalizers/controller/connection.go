// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

// How a PostgresDatabase reaches its server: the PostgresServer and its Secret in the operator
// namespace, and the role's credentials Secret beside the object.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	"github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	"github.com/kpatterns/kpatterns/finalizers/provider"
	"github.com/kpatterns/kpatterns/shared/status"
)

// want is what db asks of its server, the connection read from its PostgresServer's Secret — or,
// for a deletion (deleting) when the server or its Secret is gone, the connection last read for
// the object.
func (r *Reconciler) want(ctx context.Context, db *v1alpha1.PostgresDatabase, deleting bool) (provider.Want, error) {
	w := provider.Want{Database: db.Spec.Database, Role: db.Spec.Role, ConnectionLimit: -1, ObserveOnly: policy(db) == v1alpha1.ObserveOnly,
		Owner: provider.Owner{Installation: r.Installation, UID: string(db.UID), Namespace: db.Namespace, Name: db.Name, Orphan: policy(db) != v1alpha1.Full}}
	if db.Spec.ConnectionLimit != nil {
		w.ConnectionLimit = *db.Spec.ConnectionLimit
	}
	c, err := r.conn(ctx, db.Spec.ServerName)
	if last, ok := r.conns.Load(db.UID); deleting && apierrors.IsNotFound(err) && ok {
		c, err = last.(serverConn).conn, nil
	}
	if err != nil {
		return w, err
	}
	r.conns.Store(db.UID, serverConn{name: db.Spec.ServerName, conn: c})
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

// ownSecret: s is controlled by db, or by an earlier object of db's namespace and name (a restore
// brings the Secret back beside its object, whose UID is new).
func ownSecret(s *corev1.Secret, db *v1alpha1.PostgresDatabase) bool {
	ref := metav1.GetControllerOf(s)
	if ref == nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == v1alpha1.GroupVersion.Group && ref.Kind == "PostgresDatabase" && ref.Name == db.Name
}

// conflict is a state the user resolves (Ready=False/Conflict), not a failure to retry.
type conflict string

func (c conflict) Error() string { return string(c) }

// CredentialsSecret is the name of the Secret holding db's role login.
func CredentialsSecret(db *v1alpha1.PostgresDatabase) string { return db.Name + "-credentials" }

// credentials sets w.Password from the object's credentials Secret, read live; when it is missing
// it is created (owned by the object) with a new random password, and reset says the role needs
// the Secret's password: an existing role's reset is marked on the object before the Secret is
// written and cleared (sync) only once the role has it, so no failure in between loses it. A
// Secret of that name that is not the object's is never touched; one that names another host than
// the server's is a conflict: the PostgresServer was re-pointed, and creating the database on the
// new host would give the user an empty one.
func (r *Reconciler) credentials(ctx context.Context, p *status.Patcher[*v1alpha1.PostgresDatabase], db *v1alpha1.PostgresDatabase, w *provider.Want, o provider.Observed) (reset bool, err error) {
	_, pending := db.Annotations[PasswordResetPendingAnnotation]
	s := &corev1.Secret{}
	err = r.APIReader.Get(ctx, client.ObjectKey{Namespace: db.Namespace, Name: CredentialsSecret(db)}, s)
	if err == nil {
		if !ownSecret(s, db) {
			return false, conflict(fmt.Sprintf("the Secret %s exists and is not this object's", CredentialsSecret(db)))
		}
		if host, port := string(s.Data["host"]), string(s.Data["port"]); host != "" && (host != w.Conn.Host || port != w.Conn.Port) {
			return false, conflict(fmt.Sprintf("PostgresServer %s now reaches %s, but the role and the database were made on %s (the Secret %s says so): "+
				"nothing is created there. Move them to the new server, then delete the Secret: it is made again, for the new server, with a new password",
				db.Spec.ServerName, net.JoinHostPort(w.Conn.Host, w.Conn.Port), net.JoinHostPort(host, port), CredentialsSecret(db)))
		}
		w.Password = string(s.Data["password"])
		return pending, nil
	}
	if !apierrors.IsNotFound(err) {
		return false, err
	}
	if o.RoleExists && !pending {
		err := r.patchMeta(ctx, p, db, func() {
			metav1.SetMetaDataAnnotation(&db.ObjectMeta, PasswordResetPendingAnnotation, time.Now().UTC().Format(time.RFC3339))
		})
		if err != nil {
			return false, err
		}
		pending = true
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
	return pending, nil
}
