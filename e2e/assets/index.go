// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package assets

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha512"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"sync/atomic"

	"sigs.k8s.io/yaml"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// ArchiveName is the name setup-envtest's index gives the archive of this platform.
func ArchiveName() string {
	return fmt.Sprintf("envtest-v%s-%s-%s.tar.gz", controlplane.KubernetesVersion, runtime.GOOS, runtime.GOARCH)
}

// Archive writes what setup-envtest downloads: a gzipped tar of controller-tools/envtest/<binary>
// for the EnvtestBinaries in dir, as the controller-tools releases lay it out.
func Archive(w io.Writer, dir string) error {
	gz, _ := gzip.NewWriterLevel(w, gzip.BestSpeed) // a valid level: no error
	tw := tar.NewWriter(gz)
	for _, name := range controlplane.EnvtestBinaries {
		f, err := os.Open(filepath.Join(dir, name))
		if err != nil {
			return err
		}
		fi, err := f.Stat()
		if err == nil {
			err = tw.WriteHeader(&tar.Header{Name: "controller-tools/envtest/" + name, Mode: 0o755, Size: fi.Size(), Typeflag: tar.TypeReg})
		}
		if err == nil {
			_, err = io.Copy(tw, f)
		}
		_ = f.Close() // read only
		if err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	return gz.Close()
}

// An IndexServer serves a setup-envtest index and its one archive on 127.0.0.1: the release
// index a user's machine reaches, standing in where none can be reached. Truncate.Store(true)
// makes it send only the first half of the archive (a download cut short).
type IndexServer struct {
	URL      string // the index's address, for setup-envtest --index
	Truncate atomic.Bool
	archive  []byte
	srv      *http.Server
}

// ServeIndex archives the EnvtestBinaries of dir and serves them until Close.
func ServeIndex(dir string) (*IndexServer, error) {
	var buf bytes.Buffer
	if err := Archive(&buf, dir); err != nil {
		return nil, err
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &IndexServer{URL: "http://" + l.Addr().String() + "/envtest-releases.yaml", archive: buf.Bytes()}
	sum := sha512.Sum512(s.archive)
	index, err := yaml.Marshal(map[string]any{"releases": map[string]any{
		"v" + controlplane.KubernetesVersion: map[string]any{
			ArchiveName(): map[string]string{"hash": hex.EncodeToString(sum[:]), "selfLink": "http://" + l.Addr().String() + "/" + ArchiveName()},
		},
	}})
	if err != nil {
		_ = l.Close()
		return nil, err
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /envtest-releases.yaml", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write(index) })
	mux.HandleFunc("GET /"+ArchiveName(), func(w http.ResponseWriter, _ *http.Request) {
		body := s.archive
		if s.Truncate.Load() {
			body = body[:len(body)/2]
		}
		_, _ = w.Write(body)
	})
	s.srv = &http.Server{Handler: mux}
	go func() { _ = s.srv.Serve(l) }() // returns ErrServerClosed after Close
	return s, nil
}

// Close stops the server.
func (s *IndexServer) Close() error { return s.srv.Close() }
