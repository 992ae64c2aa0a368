// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package assets

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
)

// ReleasesEnv names a server holding dl.k8s.io's and github.com's release paths in their place (a
// mirror, or the local server the tests serve); "none" skips release downloads.
const ReleasesEnv = "KPATTERNS_RELEASES"

// Release hosts: the paths under them are what a mirror named by ReleasesEnv serves.
const (
	KubernetesReleases = "https://dl.k8s.io"
	GitHub             = "https://github.com"
)

// An Asset is one file of a project's release and the binaries it holds.
type Asset struct {
	URL string // on KubernetesReleases or GitHub
	// Sum is the URL of its published SHA-256: a file holding the digest alone, or sha256sum
	// lines naming URL's file. Empty where the project publishes none (kwok): then HTTPS alone
	// vouches for the file.
	Sum string
	// Binaries maps each binary to its path in the gzipped tar at URL; "" if URL is the binary.
	Binaries map[string]string
}

// FetchReleases downloads each asset (or its copy on ReleasesEnv's mirror), checks it against its
// published SHA-256 and writes its binaries into dir, mode 0755. A file that cannot be fetched
// whole and as published is an error.
func FetchReleases(ctx context.Context, dir string, assets ...Asset) error {
	ctx, cancel := context.WithTimeout(ctx, DownloadTimeout)
	defer cancel()
	for _, a := range assets {
		if err := fetch(ctx, dir, a); err != nil {
			return err
		}
	}
	return nil
}

func fetch(ctx context.Context, dir string, a Asset) error {
	body, err := get(ctx, a.URL)
	if err != nil {
		return err
	}
	if a.Sum != "" {
		sums, err := get(ctx, a.Sum)
		if err != nil {
			return err
		}
		want, err := digestFor(sums, path.Base(a.URL))
		if err != nil {
			return fmt.Errorf("%s: %w", a.Sum, err)
		}
		if got := sha256.Sum256(body); hex.EncodeToString(got[:]) != want {
			return fmt.Errorf("%s: checksum mismatch: SHA-256 %x, published %s", a.URL, got, want)
		}
	}
	for name, member := range a.Binaries {
		b := body
		if member != "" {
			if b, err = untar(body, member); err != nil {
				return fmt.Errorf("%s: %w", a.URL, err)
			}
		}
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o755); err != nil {
			return err
		}
	}
	return nil
}

// mirrored is u on ReleasesEnv's mirror, if one is named.
func mirrored(u string) (string, error) {
	m := strings.TrimSuffix(os.Getenv(ReleasesEnv), "/")
	switch m {
	case "":
		return u, nil
	case "none":
		return "", errors.New(ReleasesEnv + "=none")
	}
	for _, host := range []string{KubernetesReleases, GitHub} {
		if rest, ok := strings.CutPrefix(u, host); ok {
			return m + rest, nil
		}
	}
	return "", fmt.Errorf("%s is not on a host %s mirrors", u, ReleasesEnv)
}

// get reads u, or its copy on ReleasesEnv's mirror.
func get(ctx context.Context, u string) ([]byte, error) {
	u, err := mirrored(u)
	if err != nil {
		return nil, err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer func() { _ = resp.Body.Close() }()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", u, resp.Status)
	}
	b, err := io.ReadAll(resp.Body) // a body shorter than its Content-Length is an error here
	if err != nil {
		return nil, fmt.Errorf("GET %s: %w", u, err)
	}
	return b, nil
}

var hexDigest = regexp.MustCompile(`^[0-9a-f]{64}$`)

// digestFor reads a SHA-256 file: the digest alone, or sha256sum lines of which one names file.
func digestFor(sums []byte, file string) (string, error) {
	sc := bufio.NewScanner(bytes.NewReader(sums))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || !hexDigest.MatchString(strings.ToLower(f[0])) {
			continue
		}
		if len(f) == 1 || strings.TrimPrefix(f[1], "*") == file {
			return strings.ToLower(f[0]), nil
		}
	}
	return "", fmt.Errorf("no SHA-256 for %s", file)
}

// untar returns the file member of the gzipped tar archive.
func untar(archive []byte, member string) ([]byte, error) {
	gz, err := gzip.NewReader(bytes.NewReader(archive))
	if err != nil {
		return nil, err
	}
	tr := tar.NewReader(gz)
	for {
		h, err := tr.Next()
		if err != nil {
			return nil, fmt.Errorf("%s not in the archive: %w", member, err)
		}
		if path.Clean(h.Name) == member && h.Typeflag == tar.TypeReg {
			return io.ReadAll(tr)
		}
	}
}

// A ReleaseServer serves assets on 127.0.0.1 at their paths, made from binaries built here: the
// release hosts a user's machine reaches, standing in where none can be reached. Corrupt.Store(true)
// makes it serve each release file (not its SHA-256) with its last byte changed.
type ReleaseServer struct {
	URL     string // for ReleasesEnv
	Corrupt atomic.Bool
	files   map[string][]byte
	sums    map[string]bool // the paths of SHA-256 files
	srv     *http.Server
}

// ServeReleases makes each asset from the binaries found in dirs — a binary as it is, an archive
// gzipped with its members at their paths — and its SHA-256 file, and serves them until Close.
func ServeReleases(dirs []string, assets ...Asset) (*ReleaseServer, error) {
	s := &ReleaseServer{files: map[string][]byte{}, sums: map[string]bool{}}
	for _, a := range assets {
		body, err := releaseFile(dirs, a)
		if err != nil {
			return nil, err
		}
		s.files[urlPath(a.URL)] = body
		if a.Sum != "" {
			sum := sha256.Sum256(body)
			s.files[urlPath(a.Sum)] = fmt.Appendf(nil, "%x  %s\n", sum, path.Base(a.URL))
			s.sums[urlPath(a.Sum)] = true
		}
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s.URL = "http://" + l.Addr().String()
	s.srv = &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, ok := s.files[r.URL.Path]
		if !ok {
			http.NotFound(w, r)
			return
		}
		if s.Corrupt.Load() && !s.sums[r.URL.Path] && len(body) > 0 {
			body = append(body[:len(body)-1:len(body)-1], body[len(body)-1]^0xff)
		}
		_, _ = w.Write(body)
	})}
	go func() { _ = s.srv.Serve(l) }() // returns ErrServerClosed after Close
	return s, nil
}

// Close stops the server.
func (s *ReleaseServer) Close() error { return s.srv.Close() }

func urlPath(u string) string {
	p, err := url.Parse(u)
	if err != nil {
		return u
	}
	return p.Path
}

func releaseFile(dirs []string, a Asset) ([]byte, error) {
	find := func(name string) ([]byte, error) {
		for _, d := range dirs {
			if b, err := os.ReadFile(filepath.Join(d, name)); err == nil {
				return b, nil
			}
		}
		return nil, fmt.Errorf("%s for %s: in none of %v", name, a.URL, dirs)
	}
	var buf bytes.Buffer
	gz, _ := gzip.NewWriterLevel(&buf, gzip.BestSpeed) // a valid level: no error
	tw := tar.NewWriter(gz)
	for name, member := range a.Binaries {
		b, err := find(name)
		if err != nil {
			return nil, err
		}
		if member == "" {
			return b, nil
		}
		if err := tw.WriteHeader(&tar.Header{Name: member, Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	if err := gz.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
