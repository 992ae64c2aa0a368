// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command importcheck fails when a package of shared/ or of a pattern imports a package of this
// repository that docs/architecture.md does not allow it (tests are not checked: they may use the
// test support). `go tool task lint` runs it from the repository root:
//
//	go run ./e2e/cmd/importcheck .
package main

import (
	"bufio"
	"bytes"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"slices"
	"strings"

	"github.com/kpatterns/kpatterns/e2e/workspace"
)

// module is the repository's module path prefix.
const module = "github.com/kpatterns/kpatterns/"

// sharedImports are the packages of shared/ each package of shared/ may import besides its own.
// The primitives import none; stages builds on conditions and status; the runtime (app) none; the
// test support (controlplane, postgres, testenv, kindtest) what it drives.
var sharedImports = map[string][]string{
	"admit": nil, "conditions": nil, "digest": nil, "index": nil, "rollout": nil, "shard": nil, "status": nil,
	"stages":       {"conditions", "status"},
	"app":          nil,
	"controlplane": nil,
	"postgres":     {"controlplane"},
	"testenv":      {"app", "controlplane"},
	"kindtest":     {"app"},
}

// testSupport are the packages of shared/ only tests may import.
var testSupport = []string{"controlplane", "postgres", "testenv", "kindtest"}

// compositions are the patterns made of other patterns, and those they may import (their api,
// config and controller packages).
var compositions = map[string][]string{"multi": {"mirror", "reloader", "summary"}, "sharding": {"mirror"}}

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	patterns, err := workspace.Patterns(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "importcheck:", err)
		os.Exit(1)
	}
	dirs := []string{"./shared/..."}
	for _, p := range patterns {
		dirs = append(dirs, "./"+p+"/...")
	}
	cmd := exec.Command("go", append([]string{"list", "-f", "{{.ImportPath}}{{range .Imports}} {{.}}{{end}}"}, dirs...)...)
	cmd.Dir, cmd.Stderr = root, os.Stderr
	out, err := cmd.Output()
	if err != nil {
		fmt.Fprintln(os.Stderr, "importcheck: go list:", err)
		os.Exit(1)
	}
	imports := map[string][]string{}
	for sc := bufio.NewScanner(bytes.NewReader(out)); sc.Scan(); {
		fields := strings.Fields(sc.Text())
		imports[fields[0]] = fields[1:]
	}
	problems := check(imports, patterns)
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("importcheck: %d imports docs/architecture.md does not allow\n", len(problems))
		os.Exit(1)
	}
}

// check returns, for each package of imports (import path → its imports), each import of the
// repository its place does not allow.
func check(imports map[string][]string, patterns []string) []string {
	var problems []string
	for _, pkg := range slices.Sorted(maps.Keys(imports)) {
		from := strings.TrimPrefix(pkg, module)
		top, rest, _ := strings.Cut(from, "/")
		for _, imp := range imports[pkg] {
			to, ok := strings.CutPrefix(imp, module)
			if !ok {
				continue
			}
			if why := disallowed(top, rest, to, patterns); why != "" {
				problems = append(problems, fmt.Sprintf("%s imports %s: %s", from, to, why))
			}
		}
	}
	return problems
}

// disallowed says why the package top/rest may not import to ("" when it may).
func disallowed(top, rest, to string, patterns []string) string {
	toTop, toRest, _ := strings.Cut(to, "/")
	toPkg, _, _ := strings.Cut(toRest, "/")
	if toTop == top && (top != "shared" || strings.SplitN(rest, "/", 2)[0] == toPkg) {
		return "" // its own module (a pattern) or its own package (shared)
	}
	if top == "shared" {
		pkg := strings.SplitN(rest, "/", 2)[0]
		allowed, known := sharedImports[pkg]
		switch {
		case !known:
			return "shared/" + pkg + " is not in importcheck's table (docs/architecture.md): add it there"
		case toTop != "shared":
			return "shared/ imports no pattern"
		case !slices.Contains(allowed, toPkg) && len(allowed) == 0:
			return fmt.Sprintf("shared/%s imports no other package of shared/", pkg)
		case !slices.Contains(allowed, toPkg):
			return fmt.Sprintf("shared/%s imports only %s of shared/", pkg, strings.Join(allowed, ", "))
		}
		return ""
	}
	switch {
	case toTop == "shared" && slices.Contains(testSupport, toPkg):
		return "test support, for tests only"
	case toTop == "shared":
		return ""
	case slices.Contains(compositions[top], toTop) && slices.Contains([]string{"api", "config", "controller"}, toPkg):
		return ""
	case slices.Contains(patterns, toTop):
		return "a pattern imports no other pattern (but the compositions' members)"
	}
	return ""
}
