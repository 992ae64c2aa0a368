// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package kindnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// The Dockerfile's default bases (its BUILDER_IMAGE and BASE_IMAGE arguments).
const (
	DefaultBuilder = "golang:1.26"
	DefaultBase    = "gcr.io/distroless/static:nonroot"
)

// DockerBuild builds one pattern's image from the repository's Dockerfile (root) with the engine
// env reaches, tagged tag. Where the Dockerfile's bases are neither in the engine nor pullable
// (the registry's name does not resolve), it builds stand-ins once (a Debian base with this
// machine's Go toolchain; a static base with the nonroot user) and lets the build's go command
// fetch modules from this machine's module cache, served on 127.0.0.1 (--network host): the
// build reaches nothing else. The docker CLI must drive BuildKit (the Dockerfile mounts caches):
// with the buildx plugin, or a client older than 23 (Debian's docker.io) with DOCKER_BUILDKIT=1.
func DockerBuild(ctx context.Context, root string, env []string, pattern, tag string, out io.Writer) error {
	client, cenv, err := buildkitClient(ctx, env)
	if err != nil {
		return err
	}
	args := []string{"build", "--build-arg", "PATTERN=" + pattern, "-t", tag}
	if !basesReachable(ctx, env) {
		builder, base, err := localBases(ctx, env)
		if err != nil {
			return err
		}
		proxy, stop, err := serveModuleCache(ctx)
		if err != nil {
			return err
		}
		defer stop()
		_, _ = fmt.Fprintf(controlplane.Progress, "image: %s and %s cannot be pulled here; building on %s and %s, modules from this machine's cache\n",
			DefaultBuilder, DefaultBase, builder, base)
		args = append(args, "--network", "host", "--build-arg", "BUILDER_IMAGE="+builder, "--build-arg", "BASE_IMAGE="+base,
			"--build-arg", "GOPROXY="+proxy, "--build-arg", "GOSUMDB=off")
	}
	cmd := exec.CommandContext(ctx, client, append(args, root)...)
	cmd.Env, cmd.Stdout, cmd.Stderr = cenv, out, out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s %s: %w", client, strings.Join(args, " "), err)
	}
	return nil
}

// buildkitClient is a docker CLI that builds with BuildKit, and its environment.
func buildkitClient(ctx context.Context, env []string) (string, []string, error) {
	candidates := []string{"docker"}
	if p, err := exec.LookPath("docker"); err != nil || p != "/usr/bin/docker" {
		candidates = append(candidates, "/usr/bin/docker") // Debian's docker.io, beside another client
	}
	for _, c := range candidates {
		buildx := exec.CommandContext(ctx, c, "buildx", "version")
		buildx.Env = env
		if buildx.Run() == nil {
			return c, env, nil
		}
		version := exec.CommandContext(ctx, c, "version", "--format", "{{.Client.Version}}")
		version.Env = env
		v, err := version.Output()
		if err != nil {
			continue
		}
		major, _, _ := strings.Cut(strings.TrimSpace(string(v)), ".")
		if m, err := strconv.Atoi(major); err == nil && m < 23 {
			return c, append(env, "DOCKER_BUILDKIT=1"), nil
		}
	}
	return "", nil, fmt.Errorf("docker build needs BuildKit (the Dockerfile mounts caches): install the buildx plugin")
}

// basesReachable tells whether both default bases are in the engine, or the registry can be asked.
func basesReachable(ctx context.Context, env []string) bool {
	return (docker(ctx, env, "image", "inspect", DefaultBuilder) == nil && docker(ctx, env, "image", "inspect", DefaultBase) == nil) ||
		registryResolves(ctx)
}

// localBases returns the stand-in bases, loading them into the engine the first time: the kind
// node's Debian root filesystem with this machine's GOROOT at /usr/local/go, and a static base of
// /etc/passwd, /etc/group (nonroot, 65532), /tmp and the host's CA bundle, user 65532.
func localBases(ctx context.Context, env []string) (string, string, error) {
	goroot, err := exec.CommandContext(ctx, "go", "env", "GOROOT", "GOVERSION").Output()
	if err != nil {
		return "", "", fmt.Errorf("go env: %w", err)
	}
	f := strings.Fields(string(goroot))
	if len(f) != 2 {
		return "", "", fmt.Errorf("go env GOROOT GOVERSION: %q", goroot)
	}
	rootfs, err := baseRootfs(ctx)
	if err != nil {
		return "", "", err
	}
	h := sha256.Sum256([]byte(layout + rootfs + f[0]))
	builder := "kpatterns/go-builder:" + strings.TrimPrefix(f[1], "go") + "-" + hex.EncodeToString(h[:])[:12]
	if docker(ctx, env, "image", "inspect", builder) != nil {
		if err := loadBuilder(ctx, env, rootfs, f[0], builder); err != nil {
			return "", "", err
		}
	}
	base := "kpatterns/static:nonroot-" + layout
	if docker(ctx, env, "image", "inspect", base) != nil {
		if err := loadStatic(ctx, env, base); err != nil {
			return "", "", err
		}
	}
	return builder, base, nil
}

func loadBuilder(ctx context.Context, env []string, rootfs, goroot, tag string) error {
	work, err := os.MkdirTemp("", "kpatterns-builder-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	goTar := filepath.Join(work, "go.tar")
	if err := run(ctx, "tar", "--numeric-owner", "--owner=0", "--group=0", "-C", goroot, "--transform", `s,^\.,usr/local/go,`, "-cf", goTar, "."); err != nil {
		return err
	}
	img := empty.Image
	for _, f := range []string{rootfs, goTar} {
		l, err := tarball.LayerFromFile(f, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return err
		}
	}
	return writeAndLoad(ctx, env, work, tag, img, func(c *v1.Config) {
		c.Env = []string{"PATH=/usr/local/go/bin:" + strings.TrimPrefix(path, "PATH="), "GOTOOLCHAIN=local"}
		c.WorkingDir = "/"
	})
}

func loadStatic(ctx context.Context, env []string, tag string) error {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	files := []struct {
		name string
		mode int64
		body []byte
	}{
		{"etc/", 0o755, nil},
		{"etc/passwd", 0o644, []byte("root:x:0:0:root:/root:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n")},
		{"etc/group", 0o644, []byte("root:x:0:\nnonroot:x:65532:\n")},
		{"tmp/", 0o1777, nil},
		{"home/nonroot/", 0o700, nil},
	}
	if ca, err := os.ReadFile("/etc/ssl/certs/ca-certificates.crt"); err == nil {
		files = append(files, struct {
			name string
			mode int64
			body []byte
		}{"etc/ssl/certs/ca-certificates.crt", 0o644, ca})
	}
	for _, f := range files {
		hdr := &tar.Header{Name: f.name, Mode: f.mode, Size: int64(len(f.body)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}
		if strings.HasSuffix(f.name, "/") {
			hdr.Typeflag = tar.TypeDir
		}
		if f.name == "home/nonroot/" {
			hdr.Uid, hdr.Gid = 65532, 65532
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if _, err := tw.Write(f.body); err != nil {
			return err
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil })
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "kpatterns-static-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	return writeAndLoad(ctx, env, work, tag, img, func(c *v1.Config) { c.User = "65532:65532" })
}

// serveModuleCache serves this machine's module cache as a Go module proxy on 127.0.0.1.
func serveModuleCache(ctx context.Context) (string, func(), error) {
	dir, err := exec.CommandContext(ctx, "go", "env", "GOMODCACHE").Output()
	if err != nil {
		return "", nil, fmt.Errorf("go env GOMODCACHE: %w", err)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	srv := &http.Server{Handler: http.FileServer(http.Dir(filepath.Join(strings.TrimSpace(string(dir)), "cache", "download"))),
		ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(l) }()
	return "http://" + l.Addr().String(), func() { _ = srv.Close() }, nil
}

// writeAndLoad gives img the platform and what edit sets, writes it and loads it into the engine.
func writeAndLoad(ctx context.Context, env []string, work, tag string, img v1.Image, edit func(*v1.Config)) error {
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	edit(&cfg.Config)
	if img, err = mutate.ConfigFile(img, cfg); err != nil {
		return err
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	archive := filepath.Join(work, "image.tar")
	if err := tarball.WriteToFile(archive, ref, img); err != nil {
		return err
	}
	return docker(ctx, env, "load", "-i", archive)
}
