// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package assets

import (
	"strings"
	"testing"
)

// The SHA-256 files the projects publish: the digest alone (dl.k8s.io), sha256sum lines for
// several files (runc), a binary-mode line; a file that names another file, or nothing, has none.
func TestDigestFor(t *testing.T) {
	d1, d2 := strings.Repeat("a", 64), strings.Repeat("B", 64)
	for _, c := range []struct{ sums, file, want string }{
		{d1 + "\n", "kubelet", d1},
		{d1 + "  runc.arm64\n" + d2 + "  runc.amd64\n", "runc.amd64", strings.ToLower(d2)},
		{d1 + " *cni.tgz\n", "cni.tgz", d1},
		{d1 + "  other.tgz\n", "cni.tgz", ""},
		{"<html>not found</html>\n", "kubelet", ""},
	} {
		got, err := digestFor([]byte(c.sums), c.file)
		if got != c.want || (err == nil) != (c.want != "") {
			t.Errorf("digestFor(%q, %s) = %q, %v; want %q", c.sums, c.file, got, err, c.want)
		}
	}
}

// A mirror takes the place of both release hosts; none means no download; other hosts are not
// mirrored.
func TestMirrored(t *testing.T) {
	t.Setenv(ReleasesEnv, "http://127.0.0.1:1/")
	for _, c := range []struct{ in, want string }{
		{KubernetesReleases + "/release/v1/bin/linux/amd64/kubelet", "http://127.0.0.1:1/release/v1/bin/linux/amd64/kubelet"},
		{GitHub + "/o/r/releases/download/v1/f", "http://127.0.0.1:1/o/r/releases/download/v1/f"},
	} {
		if got, err := mirrored(c.in); got != c.want || err != nil {
			t.Errorf("mirrored(%s) = %s, %v; want %s", c.in, got, err, c.want)
		}
	}
	if _, err := mirrored("https://example.org/f"); err == nil {
		t.Error("a host the mirror does not stand for was mirrored")
	}
	t.Setenv(ReleasesEnv, "none")
	if _, err := mirrored(GitHub + "/f"); err == nil || !strings.Contains(err.Error(), ReleasesEnv+"=none") {
		t.Errorf("with none: %v", err)
	}
}
