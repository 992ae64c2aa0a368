// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package kindnode

import (
	"bufio"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// suite and packages make the node's Debian base: what kind's images/base installs (jq for its
// product-files hook), less what
// only its rootless and storage variants use (fuse-overlayfs, NFS, iSCSI, e2fsprogs).
const suite = "bookworm"

var packages = []string{"systemd", "systemd-sysv", "dbus", "conntrack", "iptables", "nftables", "iproute2",
	"ethtool", "util-linux", "mount", "kmod", "libseccomp2", "pigz", "bash", "ca-certificates", "procps", "findutils", "jq"}

// baseRootfs returns a tar of a Debian root filesystem made with debootstrap from this machine's
// own Debian mirror (its apt sources), cached by suite and packages.
func baseRootfs(ctx context.Context) (string, error) {
	h := sha256.Sum256([]byte(suite + " " + strings.Join(packages, ",")))
	cache, err := controlplane.CacheDir("kindnode")
	if err != nil {
		return "", err
	}
	out := filepath.Join(cache, "rootfs-"+suite+"-"+hex.EncodeToString(h[:])[:12]+".tar")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	if err := controlplane.EnsurePackage("debootstrap", "debootstrap"); err != nil {
		return "", err
	}
	mirror, err := aptMirror()
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	dir, err := os.MkdirTemp(cache, "rootfs-")
	if err != nil {
		return "", err
	}
	defer func() { _ = os.RemoveAll(dir) }()
	_, _ = fmt.Fprintf(controlplane.Progress, "kindnode: debootstrap %s from %s (about 1.5 minutes)\n", suite, mirror)
	if err := run(ctx, "debootstrap", "--variant=minbase", "--include="+strings.Join(packages, ","), suite, dir, mirror); err != nil {
		return "", err
	}
	if err := run(ctx, "tar", "--numeric-owner", "-C", dir, "-cf", out+".part", "."); err != nil {
		return "", err
	}
	return out, os.Rename(out+".part", out)
}

// aptMirror is the first Debian archive this machine's apt sources name (deb822 or one-line).
func aptMirror() (string, error) {
	files, _ := filepath.Glob("/etc/apt/sources.list.d/*.sources")
	files = append(files, "/etc/apt/sources.list")
	for _, f := range files {
		fh, err := os.Open(f)
		if err != nil {
			continue
		}
		sc := bufio.NewScanner(fh)
		for sc.Scan() {
			fields := strings.Fields(sc.Text())
			var uri string
			switch {
			case len(fields) >= 2 && fields[0] == "URIs:":
				uri = fields[1]
			case len(fields) >= 3 && fields[0] == "deb":
				uri = fields[1]
			}
			if uri != "" && strings.HasSuffix(strings.TrimSuffix(uri, "/"), "/debian") {
				_ = fh.Close()
				return uri, nil
			}
		}
		_ = fh.Close()
	}
	return "", fmt.Errorf("no Debian archive in /etc/apt/sources.list{,.d}: debootstrap needs one for the kind node's base")
}

func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, dockerd.Tail(string(out), 20))
	}
	return nil
}
