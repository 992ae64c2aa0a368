// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command capruntime is an OCI runtime for dockerd (--add-runtime NAME=PATH) that runs runc after
// removing, from the container's process, every capability this machine's bounding set lacks, and
// that thaws, after a kill or delete, what a runc inside the container left frozen.
//
// A privileged container (kind runs every node as one) asks for every capability. Where the host
// itself runs without one — a VM whose bounding set lacks CAP_SYS_RESOURCE — runc cannot grant it
// and refuses to start the container ("unable to apply caps: operation not permitted"). What the
// host does not have, no container on it could use; everything else is passed through unchanged.
// runc's create and run read the capabilities from the bundle's config.json (--bundle), exec from
// its --process file; both are edited in place before runc reads them.
package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
)

func main() {
	runc := os.Getenv("KPATTERNS_RUNC")
	if runc == "" {
		runc = "runc"
	}
	path, err := exec.LookPath(runc)
	if err != nil {
		fail(err)
	}
	missing, err := dockerd.MissingCaps()
	if err != nil {
		fail(err)
	}
	if len(missing) > 0 {
		if err := edit(os.Args[1:], missing); err != nil {
			fail(err)
		}
	}
	if ids := stopping(os.Args[1:]); len(ids) > 0 {
		// runc kills every process of a container by freezing its cgroup, signalling, thawing it;
		// on cgroup v1 that thaws no child cgroup frozen by a runc inside the container (a kind
		// node's, updating device rules), whose processes then never die. Thaw them after.
		cmd := exec.Command(path, os.Args[1:]...)
		cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
		err := cmd.Run()
		thaw(ids)
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			os.Exit(exit.ExitCode())
		} else if err != nil {
			fail(err)
		}
		return
	}
	fail(syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ()))
}

// freezerRoot is where dockerd's cgroupfs driver puts its containers' freezer cgroups (v1).
const freezerRoot = "/sys/fs/cgroup/freezer/docker"

// stopping returns the containers that a kill or delete names: its arguments with a freezer
// cgroup of that name.
func stopping(args []string) []string {
	if !slices.Contains(args, "kill") && !slices.Contains(args, "delete") {
		return nil
	}
	var ids []string
	for _, a := range args {
		if fi, err := os.Stat(filepath.Join(freezerRoot, a)); err == nil && fi.IsDir() && !strings.ContainsAny(a, "/.") {
			ids = append(ids, a)
		}
	}
	return ids
}

// thaw writes THAWED to every frozen freezer cgroup below the containers'.
func thaw(ids []string) {
	for _, id := range ids {
		_ = filepath.WalkDir(filepath.Join(freezerRoot, id), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.Name() != "freezer.state" {
				return nil
			}
			if b, _ := os.ReadFile(path); strings.TrimSpace(string(b)) != "THAWED" {
				_ = os.WriteFile(path, []byte("THAWED"), 0o644)
			}
			return nil
		})
	}
}

// fail reports on stderr, which runc's caller (containerd's shim) passes back to dockerd.
func fail(err error) {
	fmt.Fprintln(os.Stderr, "capruntime:", err)
	os.Exit(1)
}

// edit removes the missing capabilities from the files runc is about to read: the bundle's
// config.json (its "process" object) for create and run, the --process file for exec.
func edit(args []string, missing map[string]bool) error {
	for i, a := range args {
		name, value, hasValue := strings.Cut(a, "=")
		if !hasValue && i+1 < len(args) {
			value = args[i+1]
		}
		switch name {
		case "--bundle", "-b":
			if err := editFile(filepath.Join(value, "config.json"), "process", missing); err != nil {
				return err
			}
		case "--process", "-p":
			if err := editFile(value, "", missing); err != nil {
				return err
			}
		}
	}
	return nil
}

// editFile rewrites the JSON file at path with the missing capabilities removed from the
// "capabilities" of the object at key (the document itself if key is empty). Every other field
// is kept as it was.
func editFile(path, key string, missing map[string]bool) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var doc map[string]json.RawMessage
	if err := json.Unmarshal(b, &doc); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	process := doc
	if key != "" {
		if len(doc[key]) == 0 {
			return nil
		}
		if err := json.Unmarshal(doc[key], &process); err != nil {
			return fmt.Errorf("%s: %s: %w", path, key, err)
		}
	}
	if len(process["capabilities"]) == 0 {
		return nil
	}
	var caps map[string][]string // bounding, effective, inheritable, permitted, ambient
	if err := json.Unmarshal(process["capabilities"], &caps); err != nil {
		return fmt.Errorf("%s: capabilities: %w", path, err)
	}
	changed := false
	for set, names := range caps {
		kept := names[:0]
		for _, n := range names {
			if missing[n] {
				changed = true
				continue
			}
			kept = append(kept, n)
		}
		caps[set] = kept
	}
	if !changed {
		return nil
	}
	if process["capabilities"], err = json.Marshal(caps); err != nil {
		return err
	}
	if key != "" {
		if doc[key], err = json.Marshal(process); err != nil {
			return err
		}
	}
	if b, err = json.Marshal(doc); err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}
