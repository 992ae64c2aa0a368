// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

func TestRepositoryPasses(t *testing.T) {
	problems, err := Check("../../..")
	if err != nil {
		t.Fatal(err)
	}
	if len(problems) > 0 {
		t.Errorf("the repository's documents name what it lacks:\n%s", strings.Join(problems, "\n"))
	}
}

func TestPlantedNamesFail(t *testing.T) {
	root := t.TempDir()
	write(t, root, "Taskfile.yml", "version: '3'\ntasks:\n  test: {cmds: [go test ./...]}\n  cluster:up: {cmds: [true]}\n")
	write(t, root, "main.go", Header+"\npackage main\n\nvar _ = \"KPATTERNS_BENCH_OUT\"\n\nfunc bind() { fs.StringVar(&o.Image, \"image\", \"\", \"\"); fs.Bool(\"crds\", false, \"\") }\n")
	write(t, root, "bad.go", "package main\n")
	write(t, root, "docs/page.md", "# page\n")
	write(t, root, "README.md", strings.Join([]string{
		"`KPATTERNS_BENCH_OUT=docs/x.md go tool task test` and `go tool task cluster:up`, [page](docs/page.md#top), [web](https://example.com)",
		"`KPATTERNS_4.9× (mirror)_OUT` and `go tool task bench`",
		"[gone](docs/gone.md)",
		"| [alpha](alpha/README.md) | one |",
		"| [gamma](gamma/README.md) | not in go.work |",
		"`alpha install --image x --crds --zap-log-level 2`; `alpha run --frobnicate`",
		"kubectl apply --dry-run=server -f x.yaml # kubectl's flags are not checked",
	}, "\n"))
	write(t, root, "alpha/main.go", Header+"\npackage main\n\nimport _ \"github.com/kpatterns/kpatterns/shared/app\"\n\nfunc bind() { fs.Duration(\"alpha-window\", 0, \"\") }\n")
	write(t, root, "beta/main.go", Header+"\npackage main\n\nfunc bind() { fs.Int(\"beta-only\", 0, \"\") }\n")
	write(t, root, "alpha/README.md", "# alpha\n\n`alpha run --alpha-window 5s --image x --beta-only 3`\n")
	write(t, root, "go.work", "go 1.26\n\nuse (\n\t./alpha\n\t./beta\n\t./shared\n)\n")
	problems, err := Check(root)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"README.md:2: KPATTERNS_4 is read by no code or script",
		"README.md:2: go tool task bench: no such task in Taskfile.yml",
		"README.md:3: link to docs/gone.md: no such file",
		"README.md:5: link to gamma/README.md: no such file",
		"README.md:6: --frobnicate: no command of the repository defines this flag",
		"alpha/README.md:3: --beta-only: not a flag of alpha (defined in beta)",
		"README.md:5: gamma in the pattern table is not a pattern of go.work (or is listed twice)",
		"README.md: pattern beta (go.work) is missing from the pattern table",
		`bad.go:1: no license header ("` + Header + `", as hack/boilerplate.go.txt)`,
	}
	if !slices.Equal(want, problems) {
		t.Errorf("problems:\n%s\nwant:\n%s", strings.Join(problems, "\n"), strings.Join(want, "\n"))
	}
}

func write(t *testing.T, root, name, data string) {
	t.Helper()
	p := filepath.Join(root, name)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
}
