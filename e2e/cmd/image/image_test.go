// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"archive/tar"
	"bytes"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// TestMirrorImage builds mirror's image for two platforms as `go tool task image` does, then
// reads it back as a registry or a runtime would: the index's platforms, each image's user,
// entrypoint, labels and files, the per-platform tarball, and the binary itself — extracted from
// the image and run on this machine.
func TestMirrorImage(t *testing.T) {
	out := t.TempDir()
	var log bytes.Buffer
	err := Build("mirror", Options{Root: filepath.Join("..", "..", ".."), Out: out, Platforms: []string{"linux/amd64", "linux/arm64"},
		Tag: "test", CAFile: caFile, Log: &log})
	if err != nil {
		t.Fatalf("%v\n%s", err, log.String())
	}
	idx, err := layout.ImageIndexFromPath(filepath.Join(out, "mirror"))
	if err != nil {
		t.Fatal(err)
	}
	m, err := idx.IndexManifest()
	if err != nil {
		t.Fatal(err)
	}
	var platforms []string
	for _, d := range m.Manifests {
		platforms = append(platforms, d.Platform.OS+"/"+d.Platform.Architecture)
	}
	if d := cmp.Diff([]string{"linux/amd64", "linux/arm64"}, platforms); d != "" {
		t.Fatalf("platforms (-want +got):\n%s", d)
	}
	for _, d := range m.Manifests {
		img, err := idx.Image(d.Digest)
		if err != nil {
			t.Fatal(err)
		}
		cfg, err := img.ConfigFile()
		if err != nil {
			t.Fatal(err)
		}
		if cfg.Architecture != d.Platform.Architecture || cfg.OS != "linux" {
			t.Errorf("%s: config says %s/%s", d.Platform.Architecture, cfg.OS, cfg.Architecture)
		}
		if c := cfg.Config; c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/manager"}) || !slices.Equal(c.Cmd, []string{"run"}) {
			t.Errorf("%s: user %q entrypoint %q cmd %q, want 65532:65532, [/manager], [run]", d.Platform.Architecture, c.User, c.Entrypoint, c.Cmd)
		}
		labels := cfg.Config.Labels
		if labels["org.opencontainers.image.source"] != Source || labels["org.opencontainers.image.version"] != "test" ||
			len(labels["org.opencontainers.image.revision"]) != 40 {
			t.Errorf("%s: labels %v", d.Platform.Architecture, labels)
		}
		files := filesOf(t, img)
		for _, want := range []string{"manager", "etc/passwd", "etc/group", "etc/ssl/certs/ca-certificates.crt", "tmp", "home/nonroot"} {
			if _, ok := files[want]; !ok {
				t.Errorf("%s: no %s in the image (it has %v)", d.Platform.Architecture, want, slices.Sorted(maps.Keys(files)))
			}
		}
		if h := files["tmp"]; h != nil && (h.Typeflag != tar.TypeDir || h.Mode&0o7777 != 0o1777) {
			t.Errorf("/tmp: type %c mode %o, want a directory with mode 1777", h.Typeflag, h.Mode)
		}
		if h := files["home/nonroot"]; h != nil && (h.Uid != 65532 || h.Typeflag != tar.TypeDir) {
			t.Errorf("/home/nonroot: uid %d type %c, want a directory of 65532", h.Uid, h.Typeflag)
		}
		if h := files["manager"]; h != nil && h.Mode&0o111 == 0 {
			t.Errorf("/manager mode %o: not executable", h.Mode)
		}
		if !strings.Contains(string(fileData(t, img, "etc/passwd")), "nonroot:x:65532:65532:") {
			t.Errorf("/etc/passwd has no entry for 65532")
		}

		platform := d.Platform.OS + "-" + d.Platform.Architecture
		tb, err := tarball.ImageFromPath(filepath.Join(out, "mirror-"+platform+".tar"), nil)
		if err != nil {
			t.Fatal(err)
		}
		// A docker tarball stores no manifest (docker load makes its own): the same image is
		// the same config blob and the same layers.
		if a, b := configOf(t, tb), configOf(t, img); a != b {
			t.Errorf("%s: the tarball's config is %s, the layout's %s", platform, a, b)
		}

		if d.Platform.Architecture != runtime.GOARCH {
			continue
		}
		bin := filepath.Join(t.TempDir(), "manager")
		if err := os.WriteFile(bin, fileData(t, img, "manager"), 0o755); err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command(bin, "manifests", "--image", "kpatterns/mirror:test")
		cmd.Env = append(os.Environ(), "KPATTERNS_NAMESPACE=ops")
		manifests, err := cmd.Output()
		if err != nil {
			t.Fatalf("the image's binary: manifests: %v", err)
		}
		for _, want := range []string{"kind: ClusterRole", "name: kpatterns-mirror", "image: kpatterns/mirror:test", "runAsUser: 65532"} {
			if !strings.Contains(string(manifests), want) {
				t.Errorf("manifests from the image's binary lack %q", want)
			}
		}
	}
}

func configOf(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	h, err := img.ConfigName()
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// filesOf lists the image's flattened filesystem.
func filesOf(t *testing.T, img v1.Image) map[string]*tar.Header {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	out := map[string]*tar.Header{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out[h.Name] = h
	}
}

func fileData(t *testing.T, img v1.Image, name string) []byte {
	t.Helper()
	rc := mutate.Extract(img)
	defer func() { _ = rc.Close() }()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("%s not in the image: %v", name, err)
		}
		if h.Name == name {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
}
