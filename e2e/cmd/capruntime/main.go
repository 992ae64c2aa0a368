// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command capruntime is an OCI runtime for dockerd (--add-runtime NAME=PATH) that runs runc after
// removing, from the container's process, every capability this machine's bounding set lacks.
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
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
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
	fail(syscall.Exec(path, append([]string{path}, os.Args[1:]...), os.Environ()))
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
