// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command image builds a pattern's OCI image without a Docker engine and without pulling a base
// image: a static (CGO_ENABLED=0) binary per platform on an empty base, with what a distroless
// static base gives that the binary needs — CA certificates (from the host), an /etc/passwd and
// /etc/group entry for the non-root user 65532, a writable /tmp — as go-containerregistry layers.
// It writes, under -out:
//
//	<pattern>/                       an OCI layout whose index holds one image per platform
//	<pattern>-<os>-<arch>.tar        a tarball per platform for `docker load` and `kind load image-archive`
//
// and pushes the index to -registry when one is given (credentials from the Docker config, as
// go-containerregistry's default keychain reads them).
//
//	go run ./e2e/cmd/image [-out dist] [-platforms linux/amd64,linux/arm64] [-tag dev] [-registry R] PATTERN...
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"
)

const (
	// User is the image's user, as in distroless's nonroot; the Deployment runs as it too.
	User = "65532"
	// Entrypoint is where the binary is in the image; the Deployment's command (`manifests --command`).
	Entrypoint = "/manager"
	// Source is the OCI source label.
	Source = "https://github.com/kpatterns/kpatterns"
	// caFile is where Go's crypto/x509 looks for CA certificates on Linux.
	caFile = "/etc/ssl/certs/ca-certificates.crt"
)

// Options are one build's inputs.
type Options struct {
	Root      string   // the repository root
	Out       string   // output directory
	Platforms []string // os/arch
	Tag       string   // the image version
	Registry  string   // push to <registry>/<pattern>:<tag> when set
	CAFile    string   // the host's CA bundle
	Log       io.Writer
}

func main() {
	o := Options{Log: os.Stdout}
	platforms := flag.String("platforms", "linux/amd64,linux/arm64", "comma-separated os/arch")
	flag.StringVar(&o.Out, "out", "dist", "output directory")
	flag.StringVar(&o.Tag, "tag", "dev", "image version (the tag and the version label)")
	flag.StringVar(&o.Registry, "registry", "", "push the index to REGISTRY/<pattern>:<tag>")
	flag.StringVar(&o.CAFile, "ca-file", caFile, "the host's PEM CA bundle, copied into the image")
	flag.StringVar(&o.Root, "root", ".", "the repository root")
	flag.Parse()
	o.Platforms = strings.Split(*platforms, ",")
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: image [flags] PATTERN...")
		os.Exit(2)
	}
	// Two patterns at a time: a build is mostly its link, which runs on one core.
	var g errgroup.Group
	g.SetLimit(2)
	for _, p := range flag.Args() {
		g.Go(func() error { return Build(p, o) })
	}
	if err := g.Wait(); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// Build builds one pattern's image index and writes (and pushes) it. pattern is the directory of
// its main package, relative to Root; the image is named after the directory's last element.
func Build(pattern string, o Options) error {
	if _, err := os.Stat(filepath.Join(o.Root, pattern, "main.go")); err != nil {
		return fmt.Errorf("%s is not a pattern of this repository: %w", pattern, err)
	}
	dir := pattern
	pattern = filepath.Base(dir)
	revision, created, err := gitRevision(o.Root)
	if err != nil {
		return err
	}
	ca, err := os.ReadFile(o.CAFile)
	if err != nil {
		return fmt.Errorf("CA certificates for the image: %w (install ca-certificates, or pass -ca-file)", err)
	}
	base, err := layer(created, baseFiles(ca))
	if err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "kpatterns-image-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(tmp) }()
	idx := mutate.IndexMediaType(empty.Index, types.OCIImageIndex)
	tarballs := map[string]v1.Image{}
	for _, platform := range o.Platforms {
		goos, arch, ok := strings.Cut(platform, "/")
		if !ok {
			return fmt.Errorf("platform %q: want os/arch", platform)
		}
		bin := filepath.Join(tmp, goos+"-"+arch, "manager")
		began := time.Now()
		cmd := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", bin, ".")
		cmd.Dir, cmd.Stdout, cmd.Stderr = filepath.Join(o.Root, dir), o.Log, o.Log // its module's directory
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+goos, "GOARCH="+arch)
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("building %s for %s: %w", pattern, platform, err)
		}
		b, err := os.ReadFile(bin)
		if err != nil {
			return err
		}
		app, err := layer(created, []file{{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: b}})
		if err != nil {
			return err
		}
		img, err := image(pattern, goos, arch, revision, o.Tag, created, base, app)
		if err != nil {
			return err
		}
		idx = mutate.AppendManifests(idx, mutate.IndexAddendum{Add: img,
			Descriptor: v1.Descriptor{Platform: &v1.Platform{OS: goos, Architecture: arch}}})
		tarballs[goos+"-"+arch] = img
		logf(o.Log, "image: %s %s: %.1f MiB binary, built in %s\n", pattern, platform, float64(len(b))/(1<<20), time.Since(began).Round(100*time.Millisecond))
	}
	oci := filepath.Join(o.Out, pattern)
	if err := os.RemoveAll(oci); err != nil {
		return err
	}
	if _, err := layout.Write(oci, idx); err != nil {
		return fmt.Errorf("OCI layout %s: %w", oci, err)
	}
	ref, err := name.NewTag("kpatterns/" + pattern + ":" + o.Tag)
	if err != nil {
		return err
	}
	for platform, img := range tarballs {
		path := filepath.Join(o.Out, pattern+"-"+platform+".tar")
		if err := tarball.WriteToFile(path, ref, img); err != nil {
			return fmt.Errorf("tarball %s: %w", path, err)
		}
		logf(o.Log, "image: wrote %s (docker load -i, kind load image-archive) as %s\n", path, ref)
	}
	logf(o.Log, "image: wrote %s (OCI layout, %d platforms)\n", oci, len(o.Platforms))
	if o.Registry != "" {
		pushed, err := name.NewTag(strings.TrimSuffix(o.Registry, "/") + "/" + pattern + ":" + o.Tag)
		if err != nil {
			return err
		}
		if err := remote.WriteIndex(pushed, idx, remote.WithAuthFromKeychain(authn.DefaultKeychain)); err != nil {
			return fmt.Errorf("pushing %s: %w", pushed, err)
		}
		logf(o.Log, "image: pushed %s\n", pushed)
	}
	return nil
}

// logf reports progress; a failed write to the log is no reason to fail the build.
func logf(w io.Writer, format string, a ...any) { _, _ = fmt.Fprintf(w, format, a...) }

// image is one platform's image: the base files, the binary, and the run configuration.
func image(pattern, goos, arch, revision, version string, created time.Time, layers ...v1.Layer) (v1.Image, error) {
	img := mutate.ConfigMediaType(mutate.MediaType(empty.Image, types.OCIManifestSchema1), types.OCIConfigJSON)
	img, err := mutate.AppendLayers(img, layers...)
	if err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = goos, arch
	cfg.Created = v1.Time{Time: created}
	cfg.Config.User = User + ":" + User
	cfg.Config.Entrypoint = []string{Entrypoint}
	cfg.Config.Cmd = []string{"run"}
	cfg.Config.WorkingDir = "/"
	cfg.Config.Env = []string{"SSL_CERT_FILE=" + caFile}
	cfg.Config.Labels = map[string]string{
		"org.opencontainers.image.source":   Source,
		"org.opencontainers.image.revision": revision,
		"org.opencontainers.image.version":  version,
		"org.opencontainers.image.title":    pattern,
	}
	return mutate.ConfigFile(img, cfg)
}

type file struct {
	name string
	mode int64
	dir  bool
	data []byte
}

// baseFiles are what a distroless static base gives that the binary needs.
func baseFiles(ca []byte) []file {
	return []file{
		{name: "etc", mode: 0o755, dir: true},
		{name: "etc/passwd", mode: 0o644, data: []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:" + User + ":" + User + ":nonroot:/home/nonroot:/sbin/nologin\n")},
		{name: "etc/group", mode: 0o644, data: []byte("root:x:0:\nnonroot:x:" + User + ":\n")},
		{name: "etc/ssl", mode: 0o755, dir: true},
		{name: "etc/ssl/certs", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(caFile, "/"), mode: 0o644, data: ca},
		{name: "home", mode: 0o755, dir: true},
		{name: "home/nonroot", mode: 0o700, dir: true},
		{name: "tmp", mode: 0o1777, dir: true},
	}
}

// layer is a gzipped OCI layer of files, owned by root (home/nonroot by the user), every time
// the commit's: the same commit gives the same layer digest.
func layer(created time.Time, files []file) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{Name: f.name, Mode: f.mode, ModTime: created, Typeflag: tar.TypeReg, Size: int64(len(f.data)), Format: tar.FormatPAX}
		if f.dir {
			h.Typeflag, h.Name, h.Size = tar.TypeDir, f.name+"/", 0
		}
		if f.name == "home/nonroot" {
			h.Uid, h.Gid = 65532, 65532
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil },
		tarball.WithMediaType(types.OCILayer))
}

// gitRevision is HEAD's commit and time ("unknown" and the epoch outside a git checkout).
func gitRevision(root string) (string, time.Time, error) {
	out, err := exec.Command("git", "-C", root, "log", "-1", "--format=%H %ct").Output()
	if err != nil {
		return "unknown", time.Unix(0, 0).UTC(), nil
	}
	rev, ts, _ := strings.Cut(strings.TrimSpace(string(out)), " ")
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return "", time.Time{}, fmt.Errorf("git log: %q: %w", out, err)
	}
	return rev, time.Unix(sec, 0).UTC(), nil
}
