// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// The cluster's own certificates, written before kube-apiserver starts (envtest then uses them
// instead of making its own): its serving certificate must also cover the `kubernetes` Service's
// ClusterIP, which Pods on the real node dial, and kube-apiserver needs a client certificate that
// the kubelet trusts for logs, exec and port-forward.
const (
	apiServerServiceIP = "10.0.0.1" // the first address of ServiceRange
	caCertFile         = "cluster-ca.crt"
	kubeletClientCert  = "kubelet-client.crt" // kube-apiserver's identity towards the kubelet
	kubeletClientKey   = "kubelet-client.key"
)

type pki struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

// loadOrWritePKI returns the CA of the certificates in dir, writing them first unless a start in
// the same directory did.
func loadOrWritePKI(dir string) ([]byte, error) {
	if b, err := os.ReadFile(filepath.Join(dir, caCertFile)); err == nil {
		return b, nil
	}
	return writePKI(dir)
}

// writePKI writes, into dir, a CA (cluster-ca.crt), kube-apiserver's serving certificate
// (apiserver.crt, .key), its kubelet client certificate, and the service-account signing key pair
// (sa-signer.crt, .key: envtest's names). It returns the CA certificate in PEM.
func writePKI(dir string) ([]byte, error) {
	ca, err := newCA()
	if err != nil {
		return nil, err
	}
	serving := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver"},
		DNSNames:    []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1"), net.ParseIP(apiServerServiceIP)},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	client := &x509.Certificate{
		Subject:     pkix.Name{CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	for _, f := range []struct {
		cert, key string
		tmpl      *x509.Certificate
	}{{"apiserver.crt", "apiserver.key", serving}, {kubeletClientCert, kubeletClientKey, client}} {
		if err := ca.issue(dir, f.cert, f.key, f.tmpl); err != nil {
			return nil, err
		}
	}
	signer, err := newCA() // a self-signed key pair: kube-apiserver reads the public key from the certificate
	if err != nil {
		return nil, err
	}
	if err := signer.write(dir, "sa-signer.crt", "sa-signer.key"); err != nil {
		return nil, err
	}
	return ca.pem, os.WriteFile(filepath.Join(dir, caCertFile), ca.pem, 0o600)
}

func newCA() (*pki, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serialNumber(), Subject: pkix.Name{CommonName: "kpatterns local cluster"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().AddDate(1, 0, 0),
		IsCA: true, BasicConstraintsValid: true, KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &pki{cert: cert, key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}, nil
}

// issue signs tmpl with the CA and writes the certificate and a new key into dir.
func (ca *pki) issue(dir, certFile, keyFile string, tmpl *x509.Certificate) error {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	tmpl.SerialNumber = serialNumber()
	tmpl.NotBefore, tmpl.NotAfter = time.Now().Add(-time.Hour), time.Now().AddDate(1, 0, 0)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		return err
	}
	return (&pki{key: key, pem: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}).write(dir, certFile, keyFile)
}

func (p *pki) write(dir, certFile, keyFile string) error {
	der, err := x509.MarshalECPrivateKey(p.key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, certFile), p.pem, 0o600); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, keyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}), 0o600)
}

func serialNumber() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120)) // crypto/rand does not fail (Go 1.24+)
	return n
}
