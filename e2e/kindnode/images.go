// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package kindnode

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/shared/controlplane"
)

const path = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

// preloadImages makes every image kubeadm names for this version and imports them into the
// node's containerd (its root inside rootfs), as kind's node image build does; it returns their
// names once the node's containerd lists each.
func preloadImages(ctx context.Context, root, work, rootfs, base string, bins map[string]string) ([]string, error) {
	out, err := exec.CommandContext(ctx, bins["kubeadm"], "config", "images", "list", "--kubernetes-version", "v"+controlplane.KubernetesVersion).Output()
	if err != nil {
		return nil, fmt.Errorf("kubeadm config images list: %w", err)
	}
	required := strings.Fields(string(out))
	pause, err := buildPause(ctx, root, work)
	if err != nil {
		return nil, err
	}
	images := map[name.Reference]v1.Image{}
	for _, ref := range required {
		repo := ref[:strings.LastIndex(ref, ":")]
		component := repo[strings.LastIndex(repo, "/")+1:]
		var img v1.Image
		switch component {
		case "kube-apiserver", "kube-controller-manager", "kube-scheduler", "etcd":
			img, err = binaryImage(bins[component], "/usr/local/bin/"+component, nil, nil)
		case "kube-proxy": // iptables, nft and conntrack from the Debian base
			img, err = binaryImage(bins[component], "/usr/local/bin/"+component, []string{base}, nil)
		case "coredns":
			img, err = binaryImage(bins[component], "/coredns", nil, []string{"/coredns"})
		case "pause":
			img, err = binaryImage(pause, "/pause", nil, []string{"/pause"})
			if err == nil {
				err = setSandboxImage(filepath.Join(rootfs, "etc", "containerd", "config.toml"), ref)
			}
		default:
			err = fmt.Errorf("kubeadm needs %s, which this builder does not make", ref)
		}
		if err != nil {
			return nil, err
		}
		tag, err := name.NewTag(ref)
		if err != nil {
			return nil, err
		}
		images[tag] = img
	}
	archive := filepath.Join(work, "images.tar")
	if err := tarball.MultiRefWriteToFile(archive, images); err != nil {
		return nil, err
	}
	listed, err := importImages(ctx, work, filepath.Join(rootfs, "var", "lib", "containerd"), bins, archive)
	if err != nil {
		return nil, err
	}
	for _, ref := range required {
		if !slices.Contains(listed, ref) {
			return nil, fmt.Errorf("the node's containerd does not hold %s after the import (it lists %s)", ref, strings.Join(listed, ", "))
		}
	}
	return required, nil
}

// binaryImage is an image of one static binary at dst, on the base layers (tars of root
// filesystems) given, with PATH set and entrypoint when given.
func binaryImage(src, dst string, bases []string, entrypoint []string) (v1.Image, error) {
	img := empty.Image
	for _, b := range bases {
		l, err := tarball.LayerFromFile(b, tarball.WithCompressionLevel(gzip.BestSpeed))
		if err != nil {
			return nil, err
		}
		if img, err = mutate.AppendLayers(img, l); err != nil {
			return nil, err
		}
	}
	b, err := os.ReadFile(src)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(dst, "/"), Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	if _, err := tw.Write(b); err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	l, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(buf.Bytes())), nil },
		tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return nil, err
	}
	if img, err = mutate.AppendLayers(img, l); err != nil {
		return nil, err
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cfg = cfg.DeepCopy()
	cfg.OS, cfg.Architecture = "linux", runtime.GOARCH
	cfg.Config.Env = []string{path}
	cfg.Config.Entrypoint = entrypoint
	return mutate.ConfigFile(img, cfg)
}

var sandboxImage = regexp.MustCompile(`(?m)^(\s*sandbox_image\s*=\s*)"[^"]*"`)

// setSandboxImage points containerd's sandbox image at the pause image kubeadm names.
func setSandboxImage(config, ref string) error {
	b, err := os.ReadFile(config)
	if err != nil {
		return err
	}
	if !sandboxImage.Match(b) {
		return fmt.Errorf("%s sets no sandbox_image", config)
	}
	return os.WriteFile(config, sandboxImage.ReplaceAll(b, []byte(`${1}"`+ref+`"`)), 0o644)
}

// buildPause builds e2e/cmd/pause, the sandbox's process.
func buildPause(ctx context.Context, root, work string) (string, error) {
	out := filepath.Join(work, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-o", out, "./e2e/cmd/pause")
	cmd.Dir = root
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("building the pause binary: %w: %s", err, b)
	}
	return out, nil
}

// importImages runs the node's containerd on this machine with its root at root, imports the
// archive as kind does (pinned, not unpacked: the node unpacks what it runs), and returns what
// it then lists.
func importImages(ctx context.Context, work, root string, bins map[string]string, archive string) ([]string, error) {
	sock := filepath.Join(work, "containerd.sock")
	config := filepath.Join(work, "containerd.toml")
	if err := os.WriteFile(config, []byte("version = 3\ndisabled_plugins = [\"io.containerd.grpc.v1.cri\", \"io.containerd.cri.v1.runtime\", \"io.containerd.cri.v1.images\"]\n"), 0o644); err != nil {
		return nil, err
	}
	var log bytes.Buffer
	d := exec.CommandContext(ctx, bins["containerd"], "--root", root, "--state", filepath.Join(work, "containerd-state"),
		"--address", sock, "--config", config, "--log-level", "warn")
	d.Stdout, d.Stderr = &log, &log
	d.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := d.Start(); err != nil {
		return nil, err
	}
	defer func() { _ = d.Process.Signal(syscall.SIGTERM); _ = d.Wait() }()
	ctr := func(args ...string) ([]byte, error) {
		cmd := exec.CommandContext(ctx, bins["ctr"], append([]string{"--address", sock, "--namespace", "k8s.io"}, args...)...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			return nil, fmt.Errorf("ctr %s: %w: %s (containerd: %s)", strings.Join(args, " "), err, out, dockerd.Tail(log.String(), 5))
		}
		return out, nil
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(200 * time.Millisecond) {
		if _, err := ctr("version"); err == nil {
			break
		} else if time.Now().After(deadline) {
			return nil, err
		}
	}
	if _, err := ctr("images", "import", "--label=io.cri-containerd.pinned=pinned", "--all-platforms", "--no-unpack", "--digests", archive); err != nil {
		return nil, err
	}
	out, err := ctr("images", "list", "-q")
	if err != nil {
		return nil, err
	}
	return strings.Fields(string(out)), nil
}

// load writes the node image (rootfs as one layer, kind's entrypoint, stop signal and
// environment) and loads it into the engine.
func load(ctx context.Context, env []string, work, rootfs, tag string) error {
	layerTar := filepath.Join(work, "node.tar")
	if err := run(ctx, "tar", "--numeric-owner", "-C", rootfs, "-cf", layerTar, "."); err != nil {
		return err
	}
	l, err := tarball.LayerFromFile(layerTar, tarball.WithCompressionLevel(gzip.BestSpeed))
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, l)
	if err != nil {
		return err
	}
	return writeAndLoad(ctx, env, work, tag, img, func(c *v1.Config) {
		c.Entrypoint = []string{"/usr/local/bin/entrypoint", "/sbin/init"}
		c.Env = []string{"container=docker", path}
		c.StopSignal = "SIGRTMIN+3"
	})
}

func copyTree(src, dst string, mode os.FileMode) error {
	entries, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := copyTree(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), mode); err != nil {
				return err
			}
			continue
		}
		if err := copyFile(filepath.Join(src, e.Name()), filepath.Join(dst, e.Name()), mode); err != nil {
			return err
		}
	}
	return nil
}

func copyFile(src, dst string, mode os.FileMode) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	_ = os.Remove(dst) // read-only copies from the module cache
	return os.WriteFile(dst, b, mode)
}

func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
