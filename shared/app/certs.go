// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// Files `certs` writes into its directory. tls.crt and tls.key are what `run --cert-dir` serves
// (controller-runtime's default names); ca.crt is what `install --ca-file` puts in caBundle.
const (
	CAFile     = "ca.crt"
	CAKeyFile  = "ca.key" // kept so that --renew can sign a new serving certificate with the same CA
	CertFile   = "tls.crt"
	KeyFile    = "tls.key"
	SecretFile = "secret.yaml"
)

// CertOptions are the flags of `certs`.
type CertOptions struct {
	Dir   string
	Hosts []string // extra SANs: IP addresses or DNS names (127.0.0.1 for the local cluster)
	Force bool     // overwrite existing files
	Renew bool     // sign a new serving certificate with the existing CA in Dir (rotation: caBundle stays valid)
	Valid time.Duration
}

// WebhookSecretName is the TLS Secret a deployed admission pattern mounts.
func WebhookSecretName(pattern string) string { return pattern + "-webhook-tls" }

// ServiceHost is the name the webhook Service answers to; the serving certificate must cover it.
func ServiceHost(pattern, namespace string) string { return pattern + "." + namespace + ".svc" }

// WriteCerts creates a development CA and a serving certificate signed by it for the pattern's
// Service (and the extra hosts), with Go's crypto: no openssl. It refuses to overwrite existing
// files unless o.Force. For production, use a real issuer (cert-manager, say) and mount its Secret.
func WriteCerts(pattern, namespace string, o CertOptions) error {
	if o.Valid == 0 {
		o.Valid = 365 * 24 * time.Hour
	}
	files := []string{CAFile, CAKeyFile, CertFile, KeyFile, SecretFile}
	if !o.Force && !o.Renew {
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(o.Dir, f)); err == nil {
				return fmt.Errorf("%s exists: pass --force to overwrite", filepath.Join(o.Dir, f))
			} else if !errors.Is(err, fs.ErrNotExist) {
				return err
			}
		}
	}
	now := time.Now()
	ca, caKey, caDER, err := loadOrCreateCA(pattern, o, now)
	if err != nil {
		return err
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	host := ServiceHost(pattern, namespace)
	leaf := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: host},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(o.Valid),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames: []string{pattern + "." + namespace, host, host + ".cluster.local"},
	}
	for _, h := range o.Hosts {
		if ip := net.ParseIP(h); ip != nil {
			leaf.IPAddresses = append(leaf.IPAddresses, ip)
		} else {
			leaf.DNSNames = append(leaf.DNSNames, h)
		}
	}
	leafDER, err := x509.CreateCertificate(rand.Reader, leaf, ca, &key.PublicKey, caKey)
	if err != nil {
		return err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return err
	}
	caKeyDER, err := x509.MarshalECPrivateKey(caKey)
	if err != nil {
		return err
	}
	caPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: caDER})
	caKeyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: caKeyDER})
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	secret := &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: WebhookSecretName(pattern), Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: certPEM, corev1.TLSPrivateKeyKey: keyPEM, CAFile: caPEM},
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return err
	}
	var secretYAML bytes.Buffer
	if err := WriteYAML(&secretYAML, []client.Object{secret}); err != nil {
		return err
	}
	for f, b := range map[string][]byte{CAFile: caPEM, CAKeyFile: caKeyPEM, CertFile: certPEM, KeyFile: keyPEM, SecretFile: secretYAML.Bytes()} {
		// Write then rename, so a certificate watcher never reads half a file.
		tmp := filepath.Join(o.Dir, "."+f+".tmp")
		if err := os.WriteFile(tmp, b, 0o600); err != nil {
			return err
		}
		if err := os.Rename(tmp, filepath.Join(o.Dir, f)); err != nil {
			return err
		}
	}
	return nil
}

// loadOrCreateCA returns the CA in o.Dir for o.Renew, else a new one.
func loadOrCreateCA(pattern string, o CertOptions, now time.Time) (*x509.Certificate, *ecdsa.PrivateKey, []byte, error) {
	if o.Renew {
		pair, err := tls.LoadX509KeyPair(filepath.Join(o.Dir, CAFile), filepath.Join(o.Dir, CAKeyFile))
		if err != nil {
			return nil, nil, nil, fmt.Errorf("--renew needs the CA that certs wrote: %w", err)
		}
		ca, err := x509.ParseCertificate(pair.Certificate[0])
		if err != nil {
			return nil, nil, nil, err
		}
		key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
		if !ok {
			return nil, nil, nil, errors.New("--renew: the CA key is not an ECDSA key")
		}
		return ca, key, pair.Certificate[0], nil
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	ca := &x509.Certificate{
		SerialNumber: serial(), Subject: pkix.Name{CommonName: "kpatterns development CA for " + pattern},
		NotBefore: now.Add(-time.Minute), NotAfter: now.Add(o.Valid),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, ca, ca, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	ca, err = x509.ParseCertificate(der)
	return ca, key, der, err
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return n
}
