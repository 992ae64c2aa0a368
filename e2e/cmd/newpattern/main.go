// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command newpattern copies a pattern as the start of your own operator:
//
//	go tool task new NAME=<name> [FROM=<pattern>] [MODULE=<path>] [GROUP=<api group>] [KIND=<Kind>] [DIR=<dir>]
//
// It changes the module path and its imports, the Name constant (so the binary, ServiceAccount,
// RBAC objects and Lease are the new name's), the API group (also the prefix of labels and
// annotations), the kind of a pattern's CRD, and the README title, and regenerates config/ (CRDs,
// RBAC, webhooks) with controller-gen. FROM defaults to mirror.
//
// Inside the workspace (DIR unset: ./<name>) the copy becomes a module of it: added to go.work (the
// e2e suite reads it; the Taskfile's PATTERNS must name it too: lint checks they agree), MODULE
// github.com/kpatterns/kpatterns/<name>, the group and kind kept unless given. With DIR outside the workspace it writes a standalone module that needs nothing
// from this repository: what it uses of shared/ copied under internal/ (see internal/README.md
// there), its own Taskfile (generate, lint, test, e2e, build, image), go.mod with the tools, the
// LICENSE; MODULE defaults to example.com/<name> and GROUP to <name>.example.com.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
)

const modulePrefix = "github.com/kpatterns/kpatterns/"

// validName: a Go package path element, a DNS label and a binary name at once.
var validName = regexp.MustCompile(`^[a-z][a-z0-9]{0,39}$`)

func main() {
	var o Options
	flag.StringVar(&o.Module, "module", "", "module path of the new pattern")
	flag.StringVar(&o.Group, "group", "", "API group of its CRD, and the prefix of its labels and annotations")
	flag.StringVar(&o.Kind, "kind", "", "kind of its CRD (a pattern that owns one)")
	flag.StringVar(&o.Dir, "dir", "", "directory to write it to (default ./NAME, in the workspace)")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: newpattern [-module M] [-group G] [-kind K] [-dir D] NAME [FROM]")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() < 1 || flag.NArg() > 2 {
		flag.Usage()
		os.Exit(2)
	}
	o.Name, o.From = flag.Arg(0), flag.Arg(1)
	if o.From == "" {
		o.From = "mirror"
	}
	standalone := o.Dir != "" && outside(".", o.Dir)
	o.defaults(standalone)
	if !standalone {
		if o.Dir != "" && filepath.Clean(o.Dir) != o.Name {
			fmt.Fprintln(os.Stderr, "newpattern: inside the workspace a pattern's directory is its name; DIR outside it writes a standalone module")
			os.Exit(2)
		}
		if err := New(".", o); err != nil {
			fmt.Fprintln(os.Stderr, "newpattern:", err)
			os.Exit(1)
		}
		fmt.Printf("created %s from %s: go test ./%s/...  then  go tool task build && bin/%s manifests\n", o.Name, o.From, o.Name, o.Name)
		return
	}
	if err := Standalone(".", o); err != nil {
		fmt.Fprintln(os.Stderr, "newpattern:", err)
		os.Exit(1)
	}
	fmt.Printf("created %s (module %s) from %s in %s: cd %s && go tool task test  (KUBEBUILDER_ASSETS: etcd and kube-apiserver)\n", o.Name, o.Module, o.From, o.Dir, o.Dir)
}

// Options are what a new pattern is named and where it goes.
type Options struct {
	Name, From          string
	Module, Group, Kind string // empty: the defaults (see the package doc)
	Dir                 string
}

// defaults fills in what was not given (see the package doc).
func (o *Options) defaults(standalone bool) {
	switch {
	case o.Module == "" && standalone:
		o.Module = "example.com/" + o.Name
	case o.Module == "":
		o.Module = modulePrefix + o.Name
	}
	if o.Group == "" && standalone {
		o.Group = o.Name + ".example.com"
	}
}

// outside reports whether dir is outside the workspace whose root is root.
func outside(root, dir string) bool {
	r, err1 := filepath.Abs(root)
	d, err2 := filepath.Abs(dir)
	if err1 != nil || err2 != nil {
		return false
	}
	rel, err := filepath.Rel(r, d)
	return err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator))
}

// New copies pattern o.From into o.Name under the repository root, as a module of the workspace.
func New(root string, o Options) error {
	name, from := o.Name, o.From
	src, dst := filepath.Join(root, from), filepath.Join(root, name)
	if err := check(o, src, dst); err != nil {
		return err
	}
	o.defaults(false)
	rename, err := renamer(o, src, nil)
	if err != nil {
		return err
	}
	if err := copyPattern(src, dst, rename, name, from); err != nil {
		return err
	}
	if err := gofmt(dst); err != nil {
		return err
	}
	for _, args := range [][]string{{"work", "use", "./" + name}, generate(root, name, "./"+name)} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr = root, os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s: %w", strings.Join(args, " "), err)
		}
	}
	return nil
}

// check refuses an invalid name or kind, a missing source and a taken destination.
func check(o Options, src, dst string) error {
	if !validName.MatchString(o.Name) {
		return fmt.Errorf("%q is not a valid pattern name: lowercase letters and digits, starting with a letter, at most 40", o.Name)
	}
	if o.Kind != "" && !validKind.MatchString(o.Kind) {
		return fmt.Errorf("%q is not a valid kind: an upper-case letter, then letters and digits", o.Kind)
	}
	if o.Group != "" && !validGroup.MatchString(o.Group) {
		return fmt.Errorf("%q is not a valid API group: a DNS subdomain with a dot, such as quota.example.com", o.Group)
	}
	if _, err := os.Stat(filepath.Join(src, "go.mod")); err != nil {
		return fmt.Errorf("no pattern %q to copy from: %w", o.From, err)
	}
	if _, err := os.Stat(dst); err == nil {
		return fmt.Errorf("%s exists already", dst)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

var (
	validKind  = regexp.MustCompile(`^[A-Z][A-Za-z0-9]{0,62}$`)
	validGroup = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)+$`)
	kindMarker = regexp.MustCompile(`(?m)^type ([A-Z][A-Za-z0-9]*)List struct`)
	// requireLine is one requirement of a go.mod (in a require block or on its own line).
	requireLine = regexp.MustCompile(`(?m)^(?:require )?\s*([a-z0-9.-]+\.[a-z]+/\S*) (v\S+)(?: // indirect)?$`)
)

// sourceGroup is the API group of this repository's CRDs, and the prefix of its labels.
const sourceGroup = "patterns.kpatterns.dev"

// renamer returns the text replacement of a copy: the module path (and, for a standalone module,
// shared's packages, now under internal/), the API group in its dotted and dashed forms, the kind
// in its three forms.
func renamer(o Options, src string, extra []string) (*strings.Replacer, error) {
	pairs := append([]string{modulePrefix + o.From + "/", o.Module + "/", modulePrefix + o.From + "\n", o.Module + "\n",
		modulePrefix + o.From + `"`, o.Module + `"`}, extra...)
	group := sourceGroup
	if o.Group != "" {
		group = o.Group
	}
	// Webhook names (mutate.<pattern>.<group>) are the new pattern's.
	pairs = append(pairs, "."+o.From+"."+sourceGroup, "."+o.Name+"."+group)
	if o.Group != "" && o.Group != sourceGroup {
		pairs = append(pairs, sourceGroup, o.Group, strings.ReplaceAll(sourceGroup, ".", "-"), strings.ReplaceAll(o.Group, ".", "-"))
	}
	if o.Kind != "" {
		from, err := sourceKind(src)
		if err != nil {
			return nil, err
		}
		if from == "" {
			return nil, fmt.Errorf("KIND %s: pattern %s owns no CRD to rename", o.Kind, o.From)
		}
		lower := strings.ToLower
		pairs = append(pairs, from+"s", o.Kind+"s", lower(from)+"s", lower(o.Kind)+"s", from, o.Kind, lower(from), lower(o.Kind))
	}
	return strings.NewReplacer(pairs...), nil
}

// sourceKind is the kind of the pattern's CRD (the type with a List type in api/), "" for none.
func sourceKind(src string) (string, error) {
	files, err := filepath.Glob(filepath.Join(src, "api", "*", "*_types.go"))
	if err != nil {
		return "", err
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			return "", err
		}
		if m := kindMarker.FindSubmatch(b); m != nil {
			return string(m[1]), nil
		}
	}
	return "", nil
}

// copyPattern copies src to dst through rename, but for the generated config/ (regenerated
// after): the Name constant and the command's doc are the new name's, so is the README's title.
func copyPattern(src, dst string, rename *strings.Replacer, name, from string) error {
	nameConst := regexp.MustCompile(`(?m)^(\s*(?:const\s+)?Name\s*=\s*)"` + regexp.QuoteMeta(from) + `"`)
	return filepath.WalkDir(src, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, path)
		// Files named after the pattern or its kind are renamed too: deploypolicy_test.go,
		// widget_types.go.
		dir, base := filepath.Split(rel)
		if rest, ok := strings.CutPrefix(base, from); ok {
			base = name + rest
		}
		target := filepath.Join(dst, dir, rename.Replace(base))
		switch {
		case d.IsDir() && (rel == filepath.Join("config", "crd") || rel == filepath.Join("config", "rbac") || rel == filepath.Join("config", "webhook")):
			if err := os.MkdirAll(target, 0o755); err != nil {
				return err
			}
			return fs.SkipDir // regenerated after
		case d.IsDir():
			return os.MkdirAll(target, 0o755)
		}
		if strings.HasSuffix(path, "zz_generated.deepcopy.go") {
			return nil // regenerated
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		s := string(b)
		switch { // the name first: a kind's rename may share its spelling
		case strings.HasSuffix(path, ".go"):
			s = nameConst.ReplaceAllString(s, `${1}"`+name+`"`)
			s = strings.ReplaceAll(s, "// Command "+from+" ", "// Command "+name+" ")
		case rel == "README.md":
			if first, rest, ok := strings.Cut(s, "\n"); ok && strings.HasPrefix(first, "# "+from) {
				s = "# " + name + strings.TrimPrefix(first, "# "+from) + "\n" + rest
			}
		}
		return os.WriteFile(target, []byte(rename.Replace(s)), 0o644)
	})
}

// generate is the controller-gen command line of `go tool task generate` for one pattern in dir
// (relative to root, where it runs).
func generate(root, name, dir string) []string {
	args := []string{"tool", "controller-gen", "rbac:roleName=" + name, "paths=" + dir + "/...", "output:rbac:artifacts:config=" + dir + "/config/rbac"}
	if _, err := os.Stat(filepath.Join(root, dir, "api")); err == nil {
		args = append(args, "object:headerFile=hack/boilerplate.go.txt", "paths="+dir+"/api/...", "crd", "paths="+dir+"/api/...", "output:crd:artifacts:config="+dir+"/config/crd")
	}
	if out, err := exec.Command("grep", "-rqs", "+kubebuilder:webhook:", filepath.Join(root, dir), "--include=*.go").CombinedOutput(); err == nil && len(out) == 0 {
		args = append(args, "webhook", "output:webhook:artifacts:config="+dir+"/config/webhook")
	}
	return args
}

// Standalone writes pattern o.From as a module of its own in o.Dir, outside the workspace: the
// pattern, the packages of shared/ it uses (not their tests, which run in this repository) under internal/, go.mod and go.sum
// (from this repository's, tidied), a Taskfile with the tools as go.mod tool dependencies, the
// image builder under hack/, the license and its header; then config/ generated there.
func Standalone(root string, o Options) error {
	src := filepath.Join(root, o.From)
	if err := check(o, src, o.Dir); err != nil {
		return err
	}
	o.defaults(true)
	out, err := exec.Command("go", "list", "-C", root, "-deps", "-test", "-tags", "e2e", "-f", "{{.ImportPath}}", "./"+o.From+"/...").Output()
	if err != nil {
		return fmt.Errorf("go list %s: %w", o.From, err)
	}
	var used []string
	for _, pkg := range strings.Fields(string(out)) {
		if rest, ok := strings.CutPrefix(pkg, modulePrefix+"shared/"); ok && !strings.Contains(rest, " ") && !slices.Contains(used, rest) {
			used = append(used, rest)
		}
	}
	rename, err := renamer(o, src, []string{modulePrefix + "shared/", o.Module + "/internal/"})
	if err != nil {
		return err
	}
	if err := copyPattern(src, o.Dir, rename, o.Name, o.From); err != nil {
		return err
	}
	for _, pkg := range used { // shared's packages, flat, without their tests (those run here)
		files, err := filepath.Glob(filepath.Join(root, "shared", pkg, "*.go"))
		if err != nil {
			return err
		}
		for _, f := range files {
			if strings.HasSuffix(f, "_test.go") {
				continue
			}
			if err := copyFile(f, filepath.Join(o.Dir, "internal", pkg, filepath.Base(f)), rename); err != nil {
				return err
			}
		}
	}
	rev, _ := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	notes := map[string]string{
		"internal/README.md": fmt.Sprintf("# internal\n\nCopied from github.com/kpatterns/kpatterns/shared (commit %s) by `go tool task new`:\n"+
			"the packages of it that %s uses (%s), under the Apache License 2.0 (../LICENSE). They are yours\n"+
			"now: nothing here is updated from there.\n", strings.TrimSpace(string(rev)), o.Name, strings.Join(used, ", ")),
		"Taskfile.yml": fmt.Sprintf(starterTaskfile, o.Name),
		".gitignore":   "bin/\ndist/\n",
	}
	for name, data := range notes {
		if err := os.WriteFile(filepath.Join(o.Dir, name), []byte(data), 0o644); err != nil {
			return err
		}
	}
	source := strings.NewReplacer(`"https://github.com/kpatterns/kpatterns"`, `"https://`+o.Module+`"`) // the image's source label
	for from, to := range map[string]string{"LICENSE": "LICENSE", "hack/boilerplate.go.txt": "hack/boilerplate.go.txt", "e2e/cmd/image/main.go": "hack/image/main.go"} {
		if err := copyFile(filepath.Join(root, from), filepath.Join(o.Dir, to), source); err != nil {
			return err
		}
	}
	if err := starterGoMod(root, o); err != nil {
		return err
	}
	if err := gofmt(o.Dir); err != nil {
		return err
	}
	for _, args := range [][]string{generate(o.Dir, o.Name, ".")} {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.Env = o.Dir, os.Stdout, os.Stderr, append(os.Environ(), "GOWORK=off")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), o.Dir, err)
		}
	}
	return nil
}

// starterGoMod writes the standalone module's go.mod and go.sum: the pattern's and shared's
// requirements, the tools of tools/ as tool dependencies, then go mod tidy. go.sum starts as this
// repository's sums, so no checksum needs to be looked up anew.
func starterGoMod(root string, o Options) error {
	var sums []byte
	for _, m := range []string{o.From, "shared", "tools", "e2e"} {
		b, err := os.ReadFile(filepath.Join(root, m, "go.sum"))
		if err != nil {
			return err
		}
		sums = append(sums, b...)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "go.sum"), sums, 0o644); err != nil {
		return err
	}
	gomod := exec.Command("go", "mod", "edit", "-json")
	gomod.Dir = filepath.Join(root, o.From)
	goVersion, err := gomod.Output()
	if err != nil {
		return err
	}
	version := regexp.MustCompile(`"Go": "([^"]+)"`).FindSubmatch(goVersion)
	if version == nil {
		return fmt.Errorf("%s/go.mod names no go version", o.From)
	}
	if err := os.WriteFile(filepath.Join(o.Dir, "go.mod"), []byte("module "+o.Module+"\n\ngo "+string(version[1])+"\n"), 0o644); err != nil {
		return err
	}
	steps := [][]string{}
	for _, m := range []string{o.From, "shared"} { // the versions this repository tests with
		b, err := os.ReadFile(filepath.Join(root, m, "go.mod"))
		if err != nil {
			return err
		}
		for _, req := range requireLine.FindAllSubmatch(b, -1) {
			if !strings.HasPrefix(string(req[1]), modulePrefix) {
				steps = append(steps, []string{"mod", "edit", "-require", string(req[1]) + "@" + string(req[2])})
			}
		}
	}
	tools, err := os.ReadFile(filepath.Join(root, "tools", "go.mod"))
	if err != nil {
		return err
	}
	for _, tool := range []string{"github.com/go-task/task/v3", "sigs.k8s.io/controller-tools", "sigs.k8s.io/kind"} {
		v := regexp.MustCompile(`(?m)^\s*` + regexp.QuoteMeta(tool) + ` (v\S+)`).FindSubmatch(tools)
		if v == nil {
			return fmt.Errorf("tools/go.mod requires no %s", tool)
		}
		steps = append(steps, []string{"mod", "edit", "-require", tool + "@" + string(v[1])})
	}
	steps = append(steps, []string{"mod", "edit", "-tool", "github.com/go-task/task/v3/cmd/task", "-tool", "sigs.k8s.io/controller-tools/cmd/controller-gen",
		"-tool", "sigs.k8s.io/kind"},
		[]string{"mod", "tidy"})
	for _, args := range steps {
		cmd := exec.Command("go", args...)
		cmd.Dir, cmd.Stdout, cmd.Stderr, cmd.Env = o.Dir, os.Stdout, os.Stderr, append(os.Environ(), "GOWORK=off")
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("go %s in %s: %w", strings.Join(args, " "), o.Dir, err)
		}
	}
	return nil
}

// gofmt puts the renamed imports back in order.
func gofmt(dir string) error {
	if out, err := exec.Command("gofmt", "-w", dir).CombinedOutput(); err != nil {
		return fmt.Errorf("gofmt -w %s: %w: %s", dir, err, out)
	}
	return nil
}

func copyFile(from, to string, rename *strings.Replacer) error {
	b, err := os.ReadFile(from)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	return os.WriteFile(to, []byte(rename.Replace(string(b))), 0o644)
}

// starterTaskfile is a standalone pattern's Taskfile (%[1]s: its name).
const starterTaskfile = `# Every entry point: go tool task <name> (go-task and controller-gen are tools of go.mod).
version: '3'

tasks:
  generate:
    desc: config/ (CRDs, RBAC, webhooks) and API deep-copy code from the kubebuilder markers
    cmds:
      - |
        crd=""; hooks=""
        if [ -d api ]; then crd="object:headerFile=hack/boilerplate.go.txt paths=./api/... crd paths=./api/... output:crd:artifacts:config=config/crd"; fi
        if grep -rqs "+kubebuilder:webhook:" . --include=*.go; then hooks="webhook output:webhook:artifacts:config=config/webhook"; fi
        go tool controller-gen rbac:roleName=%[1]s paths=./... output:rbac:artifacts:config=config/rbac $crd $hooks

  lint:
    desc: gofmt and go vet (the e2e suite too)
    cmds:
      - test -z "$(gofmt -l .)" || { gofmt -l .; exit 1; }
      - go vet -tags e2e ./...

  test:
    desc: "Unit and integration tests with -race; KUBEBUILDER_ASSETS names a directory with etcd and kube-apiserver (setup-envtest use)"
    cmds:
      - go test -race -count=1 ./...

  e2e:
    desc: "The e2e suite on kind (test/e2e, where the pattern has one): image built and loaded, installed, Available, /metrics served, its job done; on failure its Pods, events and logs. A Docker engine; kind from go.mod unless KIND names one; KIND_CLUSTER reuses a cluster, KIND_NODE_IMAGE and KIND_CONFIG shape a new one"
    cmds:
      - |
        [ -d test/e2e ] || { echo "e2e: no test/e2e in this pattern"; exit 0; }
        KIND="${KIND:-$(go tool -n kind)}" go test -tags e2e -count=1 -timeout 20m -v ./test/e2e/

  build:
    desc: The binary into bin/
    cmds:
      - go build -o bin/%[1]s .

  image:
    desc: "The OCI image without Docker (TAG=dev, PLATFORMS=linux/amd64,linux/arm64, REGISTRY=host/path to push): dist/"
    cmds:
      - go run ./hack/image -root .. -tag {{.TAG | default "dev"}} -platforms {{.PLATFORMS | default "linux/amd64,linux/arm64"}} {{if .REGISTRY}}-registry {{.REGISTRY}}{{end}} -out dist "$(basename "$PWD")"
`
