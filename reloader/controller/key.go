// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"context"
	"crypto/rand"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/digest"
)

const (
	// KeySecret is the Secret in the operator's namespace holding the installation's DigestKey
	// (data key "key", at least 32 bytes): the reloader creates it on its first start with 32
	// random bytes, and reads it on each start. Deleting it starts a new key: every workload's
	// record is then a new baseline (nothing rolls for a change made in between).
	KeySecret = Name + "-digest-key"
	// DigestKeyAnnotation on a workload names the key its DigestsAnnotation was recorded with
	// (KeyID). Without it, the record is an earlier version's unkeyed one: compared as unkeyed
	// digests once, then rewritten keyed, so an upgrade rolls only what changed meanwhile.
	DigestKeyAnnotation = "patterns.kpatterns.dev/config-digests-key"
	keyBytes            = 32
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=create,namespace=system
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,namespace=system,resourceNames=reloader-digest-key

// LoadKey returns the installation's digest key from KeySecret in namespace ns, creating the
// Secret if it does not exist (two replicas starting at once: the second reads the first's).
// r reads live.
func LoadKey(ctx context.Context, r client.Reader, w client.Writer, ns string) ([]byte, error) {
	key := client.ObjectKey{Namespace: ns, Name: KeySecret}
	for range 2 {
		s := &corev1.Secret{}
		err := r.Get(ctx, key, s)
		if err == nil {
			if k := s.Data["key"]; len(k) >= keyBytes {
				return k, nil
			}
			return nil, fmt.Errorf("secret %s: data key %q must hold at least %d bytes (delete the Secret to start a new key)", key, "key", keyBytes)
		}
		if !apierrors.IsNotFound(err) {
			return nil, fmt.Errorf("reading the digest key: %w", err)
		}
		k := make([]byte, keyBytes)
		_, _ = rand.Read(k) // never fails (crypto/rand)
		s = &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: KeySecret, Namespace: ns,
			Labels: map[string]string{"app.kubernetes.io/name": Name, "app.kubernetes.io/component": "digest-key"}},
			Type: corev1.SecretTypeOpaque, Data: map[string][]byte{"key": k}}
		if err := w.Create(ctx, s); err == nil {
			return k, nil
		} else if !apierrors.IsAlreadyExists(err) {
			return nil, fmt.Errorf("creating the digest key: %w", err)
		}
	}
	return nil, fmt.Errorf("secret %s: created and deleted again while the reloader started", key)
}

// KeyID names a key on the workloads (DigestKeyAnnotation) without telling anything of it.
func KeyID(key []byte) string {
	return digest.NewKeyed(key).Field('i', []byte("reloader digest key id")).String()[:16]
}
