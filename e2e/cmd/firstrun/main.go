// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command firstrun measures what `go tool task demo` costs a new user, and writes it to
// docs/first-run.md (one section per cluster, the other's kept):
//
//	go run ./e2e/cmd/firstrun -cluster kind|local [-downloads=false]
//
// It clones this repository's HEAD and runs the demo there twice: first cold — Go's module and
// build caches and the project's cache (KPATTERNS_CACHE) empty, so every module is downloaded and
// every binary built as on a new machine — then warm, after the cluster's down task, with the
// caches the first run left. For each it records the time from the command to the cluster ready,
// to the first pattern acting (the mirror's child created) and to the end.
//
// kind: a user's machine pulls kindest/node. Here nothing reaches a registry, so the node image
// built here (kindnode.Build) is pushed to a registry served on 127.0.0.1 (package registry) and
// removed from the Docker engine, and the demo is given that registry's copy (KPATTERNS_KIND_IMAGE):
// kind pulls it, as it would pull kindest/node. The Docker engine itself (Debian's docker.io) is
// installed before the cold run.
//
// Both: a user's machine downloads the binaries the local cluster runs, and kwok, where this one
// reaches no download site. The binaries built here are served on 127.0.0.1 in their place —
// setup-envtest's index of etcd and kube-apiserver, and the release files of the rest at
// dl.k8s.io's and GitHub's paths (localcluster.Releases) — and the demo is pointed at them
// (KPATTERNS_ENVTEST_INDEX, KPATTERNS_RELEASES). With -downloads=false both are none instead: the
// cost where nothing can be downloaded, every binary built from Go modules (its own section).
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"time"

	"github.com/kpatterns/kpatterns/e2e/assets"
	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/e2e/kindnode"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/e2e/registry"
	"github.com/kpatterns/kpatterns/shared/controlplane"
)

func main() {
	cluster := flag.String("cluster", "kind", "kind or local")
	out := flag.String("out", "docs/first-run.md", "the page to write")
	downloads := flag.Bool("downloads", true, "serve the downloads on 127.0.0.1; false: none, everything built")
	flag.Parse()
	if err := run(context.Background(), *cluster, *out, *downloads); err != nil {
		fmt.Fprintln(os.Stderr, "firstrun:", err)
		os.Exit(1)
	}
}

// A timing is one demo run's: when go-task ran its first command, the cluster was ready, the first
// pattern acted, and it ended.
type timing struct {
	task, ready, firstAct, total time.Duration
	steps                        []string // the lines that report a step's own duration, as printed
}

var (
	readyLine = regexp.MustCompile(`^(local|kind) cluster .*ready in`)
	stepLine  = regexp.MustCompile(` done in | ready in | downloaded in |not downloaded`)
)

const firstAct = "The mirror created" // the demo's first step that shows a pattern's work

func run(ctx context.Context, cluster, out string, downloads bool) error {
	if cluster != "kind" && cluster != "local" {
		return errors.New("-cluster: want kind or local")
	}
	root, err := os.Getwd()
	if err != nil {
		return err
	}
	rev, err := exec.CommandContext(ctx, "git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return fmt.Errorf("git rev-parse: %w", err)
	}
	tmp, err := os.MkdirTemp("", "kpatterns-firstrun-")
	if err != nil {
		return err
	}
	repo := filepath.Join(tmp, "repo")
	env := append(withoutProject(os.Environ()), "CLUSTER="+cluster, "KPATTERNS_CACHE="+filepath.Join(tmp, "cache"),
		"GOCACHE="+filepath.Join(tmp, "gocache"), "GOMODCACHE="+filepath.Join(tmp, "gomod"))
	defer func() {
		clean := exec.Command("go", "clean", "-modcache") // read-only files: go removes its own
		clean.Env = env
		_ = clean.Run()
		_ = os.RemoveAll(tmp)
	}()
	if err := exec.CommandContext(ctx, "git", "clone", "-q", root, repo).Run(); err != nil {
		return fmt.Errorf("git clone: %w", err)
	}
	name, how := cluster, "the binaries downloaded from servers on 127.0.0.1 standing in for setup-envtest's index, dl.k8s.io and GitHub's releases, as root with the real node"
	if downloads {
		served, stopServing, err := downloadable(ctx)
		if err != nil {
			return err
		}
		defer stopServing()
		env = append(env, served...)
	} else {
		env = append(env, assets.IndexEnv+"=none", assets.ReleasesEnv+"=none")
		name += " -downloads=false"
		how = "nothing downloaded (" + assets.IndexEnv + " and " + assets.ReleasesEnv + " none): every binary built from Go modules, as root with the real node"
	}
	if os.Geteuid() != 0 {
		how = strings.Replace(how, "as root with the real node", "without the real node (not root)", 1)
	}
	if cluster == "kind" {
		image, stop, err := pullable(ctx, root, filepath.Join(tmp, "registry"))
		if err != nil {
			return err
		}
		defer stop()
		env = append(env, kindnode.ImageEnv+"="+image)
		how = "the node image pulled from a registry on 127.0.0.1 standing in for kindest/node (" + image + "), kwok downloaded from a server on 127.0.0.1 standing in for GitHub's releases; Debian's docker.io installed"
	}
	down := "cluster:down"
	if cluster == "kind" {
		down = "kind:down"
	}
	var runs [2]timing
	for i, label := range []string{"cold", "warm"} {
		fmt.Fprintf(os.Stderr, "firstrun: the %s demo on %s\n", label, cluster)
		log, err := os.CreateTemp("", "kpatterns-firstrun-"+label+"-*.log") // kept: it outlives tmp
		if err != nil {
			return err
		}
		t, err := demo(ctx, repo, env, log)
		downErr := task(ctx, repo, env, down) // after a failed demo too: nothing left running
		if err != nil {
			return fmt.Errorf("the %s demo: %w", label, err)
		}
		if downErr != nil {
			return downErr
		}
		_ = os.Remove(log.Name())
		runs[i] = t
	}
	section := page(name, how, strings.TrimSpace(string(rev)), runs)
	return writeSection(out, name, section)
}

// withoutProject is env without what would make the run less than new: a user's
// KUBEBUILDER_ASSETS, the project's own settings, and a Docker host of the project's engine.
func withoutProject(env []string) []string {
	var keep []string
	for _, kv := range env {
		if strings.HasPrefix(kv, "KPATTERNS_") || strings.HasPrefix(kv, "KUBEBUILDER_ASSETS=") ||
			strings.HasPrefix(kv, "GOCACHE=") || strings.HasPrefix(kv, "GOMODCACHE=") || kv == "DOCKER_HOST="+dockerd.Host {
			continue
		}
		keep = append(keep, kv)
	}
	return keep
}

// downloadable serves what the demo downloads on a user's machine, made from the binaries built
// here (built first where they are not cached; the node's only as root, when the demo runs it):
// setup-envtest's index, and the release files whose binaries are at hand. It returns the
// environment that points the demo at them, and stop.
func downloadable(ctx context.Context) (env []string, stop func(), err error) {
	cp, err := controlplane.EnsureSet(ctx, localcluster.ControlPlane)
	if err != nil {
		return nil, nil, err
	}
	dirs := []string{cp}
	if os.Geteuid() == 0 {
		node, err := controlplane.EnsureSet(ctx, localcluster.NodeSet)
		if err != nil {
			return nil, nil, err
		}
		dirs = append(dirs, node)
	}
	all, err := localcluster.Releases(".")
	if err != nil {
		return nil, nil, err
	}
	var have []assets.Asset
	for _, a := range all {
		if allIn(dirs, a.Binaries) {
			have = append(have, a)
		}
	}
	index, err := assets.ServeIndex(cp)
	if err != nil {
		return nil, nil, err
	}
	rel, err := assets.ServeReleases(dirs, have...)
	if err != nil {
		_ = index.Close()
		return nil, nil, err
	}
	return []string{assets.IndexEnv + "=" + index.URL, assets.ReleasesEnv + "=" + rel.URL},
		func() { _ = index.Close(); _ = rel.Close() }, nil
}

func allIn(dirs []string, binaries map[string]string) bool {
	for name := range binaries {
		found := false
		for _, d := range dirs {
			if _, err := os.Stat(filepath.Join(d, name)); err == nil {
				found = true
			}
		}
		if !found {
			return false
		}
	}
	return true
}

// pullable serves the node image built here from a registry on 127.0.0.1 and removes it from the
// Docker engine, which it leaves stopped: kind must pull it, as a user's machine pulls
// kindest/node. stop stops the registry.
func pullable(ctx context.Context, root, dir string) (image string, stop func(), err error) {
	host, err := dockerd.Up(ctx, root)
	if err != nil {
		return "", nil, err
	}
	env := os.Environ()
	if host != "" {
		env = append(env, "DOCKER_HOST="+host)
	}
	built, err := kindnode.Image(ctx, root, env)
	if err != nil {
		return "", nil, err
	}
	srv, err := registry.Start(dir, "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	image = srv.Addr() + "/kindest/node:v" + controlplane.KubernetesVersion
	for _, args := range [][]string{{"tag", built, image}, {"push", "-q", image}, {"rmi", image, built}} {
		if _, err := dockerd.Docker(ctx, env, args...); err != nil {
			_ = srv.Close()
			return "", nil, err
		}
	}
	if err := dockerd.Down(ctx); err != nil {
		_ = srv.Close()
		return "", nil, err
	}
	return image, func() { _ = srv.Close() }, nil
}

// demo runs `go tool task demo` in repo, each line of its output copied to f (then closed) and
// stderr, and times it.
func demo(ctx context.Context, repo string, env []string, f *os.File) (timing, error) {
	defer func() { _ = f.Close() }()
	log := f.Name()
	cmd := exec.CommandContext(ctx, "go", "tool", "task", "demo")
	cmd.Dir, cmd.Env = repo, env
	r, w := io.Pipe()
	cmd.Stdout, cmd.Stderr = w, w
	start := time.Now()
	if err := cmd.Start(); err != nil {
		return timing{}, err
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); _ = w.Close() }()
	var t timing
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line, at := sc.Text(), time.Since(start)
		_, _ = fmt.Fprintf(io.MultiWriter(f, os.Stderr), "%7.1fs %s\n", at.Seconds(), line)
		switch {
		case t.task == 0 && strings.HasPrefix(line, "task: ["):
			t.task = at
		case t.ready == 0 && readyLine.MatchString(line):
			t.ready = at
		case t.firstAct == 0 && strings.Contains(line, firstAct):
			t.firstAct = at
		}
		if stepLine.MatchString(line) && !strings.HasPrefix(line, "  ") && len(t.steps) < 40 {
			t.steps = append(t.steps, fmt.Sprintf("%6.0fs %s", at.Seconds(), strings.TrimSpace(line)))
		}
	}
	t.total = time.Since(start)
	if err := <-done; err != nil {
		return t, fmt.Errorf("%w (its output: %s)", err, log)
	}
	if t.firstAct == 0 {
		return t, fmt.Errorf("no line %q in its output (%s)", firstAct, log)
	}
	return t, nil
}

func task(ctx context.Context, repo string, env []string, name string) error {
	cmd := exec.CommandContext(ctx, "go", "tool", "task", name)
	cmd.Dir, cmd.Env, cmd.Stdout, cmd.Stderr = repo, env, os.Stderr, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("go tool task %s: %w", name, err)
	}
	return nil
}

func minutes(d time.Duration) string {
	return fmt.Sprintf("%d min %02d s", int(d.Minutes()), int(d.Seconds())%60)
}

// page is the cluster's section of the page.
func page(cluster, how, rev string, runs [2]timing) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## CLUSTER=%s\n\nWritten by `go run ./e2e/cmd/firstrun -cluster %s` (%s, commit %s) on %s/%s, %d cores: %s.\n\n",
		cluster, cluster, time.Now().UTC().Format("2006-01-02"), rev, runtime.GOOS, runtime.GOARCH, runtime.NumCPU(), how)
	b.WriteString("| `go tool task demo` | go-task built | cluster ready | first pattern acting | whole demo |\n|---|---|---|---|---|\n")
	for i, label := range []string{"cold: a fresh clone, Go's and the project's caches empty", "warm: the same clone, again"} {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", label, minutes(runs[i].task), minutes(runs[i].ready), minutes(runs[i].firstAct), minutes(runs[i].total))
	}
	b.WriteString("\nThe cold run's steps that report their own time, as printed (each line: seconds since the command):\n\n```\n")
	for _, s := range runs[0].steps {
		b.WriteString(s + "\n")
	}
	b.WriteString("```\n")
	return b.String()
}

const header = `# What a first run costs

What ` + "`go tool task demo`" + ` takes on a new machine and on the next run, one section per cluster,
each written by the command it names.

`

// writeSection replaces the cluster's section of the page (or adds it), keeping the other.
func writeSection(path, cluster, section string) error {
	old, err := os.ReadFile(path)
	if err != nil && !os.IsNotExist(err) {
		return err
	}
	sections := map[string]string{cluster: section}
	for _, s := range strings.Split(string(old), "\n## CLUSTER=")[1:] {
		name, _, _ := strings.Cut(s, "\n")
		if name != cluster {
			sections[name] = "## CLUSTER=" + strings.TrimRight(s, "\n") + "\n"
		}
	}
	b := header
	for _, name := range []string{"kind", "local", "local -downloads=false"} {
		if s, ok := sections[name]; ok {
			b += s + "\n"
		}
	}
	return os.WriteFile(path, []byte(strings.TrimRight(b, "\n")+"\n"), 0o644)
}
