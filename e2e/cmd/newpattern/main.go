// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command newpattern copies a pattern into a new module of this repository — the start of your
// own operator:
//
//	go tool task new NAME=<name> [FROM=<pattern>]     # FROM defaults to mirror
//
// It changes the module path and its imports, the Name constant (so the binary, ServiceAccount,
// RBAC objects and Lease are the new name's), the README title, adds the module to go.work and to
// the Taskfile's PATTERNS, and regenerates config/ (CRDs, RBAC, webhooks) with controller-gen.
// A copied CRD keeps its group and kind: rename them before installing both patterns.
package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

const modulePrefix = "github.com/kpatterns/kpatterns/"

// validName: a Go package path element, a DNS label and a binary name at once.
var validName = regexp.MustCompile(`^[a-z][a-z0-9]{0,39}$`)

func main() {
	if len(os.Args) < 2 || len(os.Args) > 3 {
		fmt.Fprintln(os.Stderr, "usage: newpattern NAME [FROM]")
		os.Exit(2)
	}
	from := "mirror"
	if len(os.Args) == 3 && os.Args[2] != "" {
		from = os.Args[2]
	}
	if err := New(".", os.Args[1], from); err != nil {
		fmt.Fprintln(os.Stderr, "newpattern:", err)
		os.Exit(1)
	}
	fmt.Printf("created %s from %s: go test ./%s/...  then  go tool task build && bin/%s manifests\n", os.Args[1], from, os.Args[1], os.Args[1])
}

// New copies pattern from into name under the repository root.
func New(root, name, from string) error {
	if !validName.MatchString(name) {
		return fmt.Errorf("%q is not a valid pattern name: lowercase letters and digits, starting with a letter, at most 40", name)
	}
	src, dst := filepath.Join(root, from), filepath.Join(root, name)
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		return fmt.Errorf("no pattern %q to copy from: %w", from, err)
	}
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("%s exists already", dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	replacer := strings.NewReplacer(modulePrefix+from+"/", modulePrefix+name+"/", modulePrefix+from+"\n", modulePrefix+name+"\n",
		modulePrefix+from+`"`, modulePrefix+name+`"`)
	nameConst := regexp.MustCompile(`(?m)^(\s*(?:const\s+)?Name\s*=\s*)"` + regexp.QuoteMeta(from) + `"`)
	err := filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		target := filepath.Join(dst, rel)
		switch {
		case d.IsDir() && (rel == filepath.Join("config", "crd") || rel == filepath.Join("config", "rbac") || rel == filepath.Join("config", "webhook")):
			return os.MkdirAll(target, 0o755) // regenerated below
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := replacer.Replace(string(b))
		switch {
		case strings.HasSuffix(path, ".go"):
			s = nameConst.ReplaceAllString(s, `${1}"`+name+`"`)
			s = strings.ReplaceAll(s, "// Command "+from+" ", "// Command "+name+" ")
		case rel == "README.md":
			if first, rest, ok := strings.Cut(s, "\n"); ok && strings.HasPrefix(first, "# "+from) {
				s = "# " + name + strings.TrimPrefix(first, "# "+from) + "\n" + rest
			}
		}
		return os.WriteFile(target, []byte(s), 0o644)
	})
	if err != nil {
		return err
	}
	if err := addToTaskfile(filepath.Join(root, "Taskfile.yml"), name); err != nil {
		return err
	}
	for _, args := range [][]string{{"work", "use", "./" + name}, generate(root, name)} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}

// addToTaskfile appends name to the PATTERNS variable, so generate, lint and test include it.
func addToTaskfile(path, name string) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	patterns := regexp.MustCompile(`(?m)^(  PATTERNS: .*)$`)
	if !patterns.Match(b) {
		return fmt.Errorf("%s has no PATTERNS variable", path)
	}
	return os.WriteFile(path, patterns.ReplaceAll(b, []byte("${1} "+name)), 0o644)
}

// generate is the controller-gen command line of `go tool task generate` for one pattern.
func generate(root, name string) []string {
	args := []string{"tool", "controller-gen", "rbac:roleName=" + name, "paths=./" + name + "/...", "output:rbac:artifacts:config=" + name + "/config/rbac"}
	if _, err := os.Stat(filepath.Join(root, name, "api")); err == nil {
		args = append(args, "object:headerFile=hack/boilerplate.go.txt", "paths=./"+name+"/api/...", "crd", "paths=./"+name+"/api/...", "output:crd:artifacts:config="+name+"/config/crd")
	}
	if out, err := exec.Command("grep", "-rqs", "+kubebuilder:webhook:", filepath.Join(root, name), "--include=*.go").CombinedOutput(); err == nil && len(out) == 0 {
		args = append(args, "webhook", "output:webhook:artifacts:config="+name+"/config/webhook")
	}
	return args
}
