// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command doccheck fails when a document names something the repository does not have: an
// environment variable KPATTERNS_* that no code or script reads, a `go tool task <target>` the
// Taskfile lacks, a command-line flag (--name) that no command of the repository defines, a
// relative link to a missing file, a Go file without the license header, or a README pattern
// table that is not go.work's list of patterns.
// `go tool task lint` runs it from the repository root:
//
//	go run ./e2e/cmd/doccheck .
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	"sigs.k8s.io/yaml"

	"github.com/kpatterns/kpatterns/e2e/workspace"
)

// self is this command's directory: the names its tests plant are no code's.
const self = "e2e/cmd/doccheck/"

// Header opens every Go file (hack/boilerplate.go.txt).
const Header = "// Copyright 2026 The kpatterns Authors."

var (
	envName  = regexp.MustCompile(`KPATTERNS_[A-Z0-9_]*[A-Z0-9]`)
	taskRef  = regexp.MustCompile("go tool task ([a-z][a-z0-9:-]*)")
	linkRef  = regexp.MustCompile(`\]\(([^)#\s]+)(#[^)]*)?\)`)
	external = regexp.MustCompile(`^[a-z]+:`)
	tableRow = regexp.MustCompile(`^\| \[([a-z0-9]+)\]\(([a-z0-9]+)/README\.md\) \|`)
	// flagRef is a --flag a document names; flagDef a flag a Go file defines on a flag.FlagSet
	// (fs.StringVar(&v, "name", …), fs.Bool("name", …), …).
	flagRef = regexp.MustCompile(`(?:^|[^A-Za-z0-9-])--([a-z][a-z0-9-]*)`)
	// repoImport is an import of a package of another directory of this repository.
	repoImport = regexp.MustCompile(`"github\.com/kpatterns/kpatterns/([a-z0-9]+)/`)
	flagDef    = regexp.MustCompile(`\.(?:String|Bool|Int|Int64|Uint|Float64|Duration|Func|BoolFunc|Var|TextVar)(?:Var)?\((?:[^"()]*,\s*)?"([a-z][a-z0-9-]*)"`)
)

// otherFlags are flags the documents name that are not this repository's own: those a dependency
// binds on its commands (controller-runtime's zap options), and other tools' (on lines naming
// kubectl, helm or kubebuilder, the flags are that tool's and are not checked).
var otherFlags = map[string]string{
	"zap-devel": "controller-runtime", "zap-encoder": "controller-runtime", "zap-log-level": "controller-runtime",
	"zap-stacktrace-level": "controller-runtime", "zap-time-encoding": "controller-runtime",
	"feature-gates": "kube-apiserver", "max-requests-inflight": "kube-apiserver",
	"max-mutating-requests-inflight": "kube-apiserver", "enable-aggregator-routing": "kube-apiserver",
	"list-all": "go-task", "reload-strategy": "Stakater Reloader",
}

var otherTool = regexp.MustCompile(`\b(kubectl|helm|kubebuilder) `)

func main() {
	root := "."
	if len(os.Args) > 1 {
		root = os.Args[1]
	}
	problems, err := Check(root)
	if err != nil {
		fmt.Fprintln(os.Stderr, "doccheck:", err)
		os.Exit(1)
	}
	for _, p := range problems {
		fmt.Println(p)
	}
	if len(problems) > 0 {
		fmt.Printf("doccheck: %d problems\n", len(problems))
		os.Exit(1)
	}
}

// Check reads the files git tracks (and untracked ones it does not ignore) under root and returns
// one line per problem, as file:line: what.
func Check(root string) ([]string, error) {
	files, err := tracked(root)
	if err != nil {
		return nil, err
	}
	code := map[string]bool{}               // KPATTERNS_* names that code or scripts mention
	flags := map[string]map[string]bool{}   // flags a command of the repository defines → the top directories defining it
	imports := map[string]map[string]bool{} // top directory → the top directories its Go files import
	var docs, goFiles []string
	for _, f := range files {
		switch {
		case strings.HasSuffix(f, ".md"):
			docs = append(docs, f)
			continue
		case strings.HasSuffix(f, ".go"):
			goFiles = append(goFiles, f)
			if strings.HasPrefix(f, self) {
				continue // its tests plant bad names
			}
		}
		b, err := os.ReadFile(filepath.Join(root, f))
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree, not yet in git
		}
		if err != nil {
			return nil, err
		}
		for _, n := range envName.FindAll(b, -1) {
			code[string(n)] = true
		}
		if strings.HasSuffix(f, ".go") && !strings.HasSuffix(f, "_test.go") {
			top := topDir(f)
			for _, m := range flagDef.FindAllSubmatch(b, -1) {
				if flags[string(m[1])] == nil {
					flags[string(m[1])] = map[string]bool{}
				}
				flags[string(m[1])][top] = true
			}
			if imports[top] == nil {
				imports[top] = map[string]bool{}
			}
			for _, m := range repoImport.FindAllSubmatch(b, -1) {
				imports[top][string(m[1])] = true
			}
		}
	}
	targets, err := taskTargets(filepath.Join(root, "Taskfile.yml"))
	if err != nil {
		return nil, err
	}
	var problems []string
	for _, f := range docs {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		for i, line := range strings.Split(string(b), "\n") {
			at := fmt.Sprintf("%s:%d", f, i+1)
			for _, n := range envName.FindAllString(line, -1) {
				if !code[n] {
					problems = append(problems, fmt.Sprintf("%s: %s is read by no code or script", at, n))
				}
			}
			for _, m := range flagRef.FindAllStringSubmatch(line, -1) {
				_, other := otherFlags[m[1]]
				switch {
				case other || otherTool.MatchString(line):
				case len(flags[m[1]]) == 0:
					problems = append(problems, fmt.Sprintf("%s: --%s: no command of the repository defines this flag", at, m[1]))
				case !definedFor(f, flags[m[1]], imports):
					problems = append(problems, fmt.Sprintf("%s: --%s: not a flag of %s (defined in %s)", at, m[1], topDir(f), strings.Join(slices.Sorted(maps.Keys(flags[m[1]])), ", ")))
				}
			}
			for _, m := range taskRef.FindAllStringSubmatch(line, -1) {
				if !targets[m[1]] {
					problems = append(problems, fmt.Sprintf("%s: go tool task %s: no such task in Taskfile.yml", at, m[1]))
				}
			}
			for _, m := range linkRef.FindAllStringSubmatch(line, -1) {
				if external.MatchString(m[1]) {
					continue
				}
				if _, err := os.Stat(filepath.Join(root, filepath.Dir(f), m[1])); err != nil {
					problems = append(problems, fmt.Sprintf("%s: link to %s: no such file", at, m[1]))
				}
			}
		}
	}
	if _, err := os.Stat(filepath.Join(root, "go.work")); err == nil {
		tableProblems, err := patternTable(root)
		if err != nil {
			return nil, err
		}
		problems = append(problems, tableProblems...)
	}
	for _, f := range goFiles {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			return nil, err
		}
		if !bytes.Contains(b[:min(len(b), 512)], []byte(Header)) { // controller-gen puts it below //go:build
			problems = append(problems, fmt.Sprintf("%s:1: no license header (%q, as hack/boilerplate.go.txt)", f, Header))
		}
	}
	return problems, nil
}

// definedFor says whether a flag defined in the top directories where may be named by document
// doc: anywhere outside a pattern; in a pattern's directory, if that pattern, shared/, e2e/ (the
// project's commands), a file at the root or a package the pattern imports defines it.
func definedFor(doc string, where map[string]bool, imports map[string]map[string]bool) bool {
	top := topDir(doc)
	if top == "" || imports[top] == nil || top == "shared" || top == "e2e" || top == "tools" {
		return true // a document of the repository, not of one pattern
	}
	for dir := range where {
		if dir == top || dir == "" || dir == "shared" || dir == "e2e" || imports[top][dir] {
			return true
		}
	}
	return false
}

// topDir is the first directory of a repository path ("" for a file at the root).
func topDir(path string) string {
	top, _, found := strings.Cut(path, "/")
	if !found {
		return ""
	}
	return top
}

// patternTable checks that README.md's pattern table lists go.work's patterns, each once.
func patternTable(root string) ([]string, error) {
	patterns, err := workspace.Patterns(root)
	if err != nil {
		return nil, err
	}
	b, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		return nil, err
	}
	var problems []string
	listed := map[string]bool{}
	for i, line := range strings.Split(string(b), "\n") {
		m := tableRow.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if !slices.Contains(patterns, m[1]) || m[1] != m[2] || listed[m[1]] {
			problems = append(problems, fmt.Sprintf("README.md:%d: %s in the pattern table is not a pattern of go.work (or is listed twice)", i+1, m[1]))
		}
		listed[m[1]] = true
	}
	for _, p := range patterns {
		if !listed[p] {
			problems = append(problems, fmt.Sprintf("README.md: pattern %s (go.work) is missing from the pattern table", p))
		}
	}
	return problems, nil
}

// tracked is the files under root that git tracks or would track, relative to root; outside a
// git checkout, every file.
func tracked(root string) ([]string, error) {
	out, err := exec.Command("git", "-C", root, "ls-files", "-co", "--exclude-standard").Output()
	if err == nil {
		return strings.Fields(string(out)), nil
	}
	var files []string
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, p)
		files = append(files, rel)
		return err
	})
	slices.Sort(files)
	return files, err
}

// taskTargets is the names of the Taskfile's tasks.
func taskTargets(path string) (map[string]bool, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var tf struct {
		Tasks map[string]any `json:"tasks"`
	}
	if err := yaml.Unmarshal(b, &tf); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	out := map[string]bool{}
	for name := range tf.Tasks {
		out[name] = true
	}
	return out, nil
}
