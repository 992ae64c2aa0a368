// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package e2e runs every pattern against a full cluster: by default the local cluster
// (localcluster: etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kwok), with each
// pattern binary run as a local process impersonating its generated ServiceAccount; with
// E2E_PROVIDER=kind, a kind cluster with each pattern built into an image and deployed with its
// generated manifests.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/support"
	"sigs.k8s.io/e2e-framework/support/kind"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/e2e/kindnode"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/e2e/workspace"
)

var (
	testEnv env.Environment
	kindRun = os.Getenv("E2E_PROVIDER") == "kind"
	root    = ".." // the repository root, from this package's directory
	bins    string // where the local path builds pattern binaries (removed at the end)
	logs    string // component and pattern logs, kept after the run
	// localProvider is the local cluster (nil on kind): chaos restarts its components.
	localProvider *localcluster.Provider
	// kindConfig is the kind cluster's configuration file (kind only).
	kindConfig string
	// clusterName names the cluster to the provider's env funcs (loading images).
	clusterName string
)

// operatorNamespace is where patterns are installed and run.
const operatorNamespace = "default"

// patterns are the binaries the suite runs: the repository's, from go.work (TestMain).
var patterns []string

// webhookPatterns serve admission webhooks (those with a generated config/webhook, TestMain):
// locally they run outside the cluster, called by URL on 127.0.0.1 with a development certificate
// (webhooks holds it while the pattern runs).
var (
	webhookPatterns = map[string]bool{}
	webhooks        = map[string]*localcluster.Webhook{}
	// processes are the running pattern processes (local path), by pattern.
	processes = map[string]*localcluster.Pattern{}
)

func TestMain(m *testing.M) {
	testEnv = env.New()
	clusterName = envconf.RandomName("kpatterns", 16)
	name := clusterName
	logs = filepath.Join(os.TempDir(), name+"-logs")
	if err := os.MkdirAll(logs, 0o755); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	var err error
	if patterns, err = workspace.Patterns(root); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	for _, p := range patterns {
		webhookPatterns[p] = workspace.ServesWebhooks(root, p)
	}
	provider, err := selectProvider()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		os.Exit(1)
	}
	create := envfuncs.CreateCluster(provider, name)
	if kindConfig != "" {
		create = envfuncs.CreateClusterWithConfig(provider, name, kindConfig)
	}
	testEnv.Setup(create, addFakeNode, applyCRDs, buildPatterns(name), crdsAdmitted)
	testEnv.Finish(envfuncs.ExportClusterLogs(name, logs), stopFakeNode, envfuncs.DestroyCluster(name), stopDocker, removePostgres,
		func(ctx context.Context, _ *envconf.Config) (context.Context, error) { return ctx, os.RemoveAll(bins) })
	os.Exit(testEnv.Run(m))
}

func selectProvider() (support.E2EClusterProvider, error) {
	switch p := os.Getenv("E2E_PROVIDER"); p {
	case "", "local":
		// The real node needs root: without it, or with E2E_REAL_NODE=0 (go tool task test, which
		// runs the deploy tier on kind), the deploy tier (TestDeployed) is skipped.
		realNode := os.Geteuid() == 0 && os.Getenv("E2E_REAL_NODE") != "0"
		localProvider = localcluster.NewProvider(localcluster.Options{RealNode: realNode})
		return localProvider, nil
	case "kind":
		// The Docker engine (yours, or the project's: docker:up), kind from ./tools, and the node
		// image (kindest/node, or built here), as `go tool task kind:up` has them.
		ctx := context.Background()
		ours := !dockerd.Works(ctx, append(os.Environ(), "DOCKER_HOST="+dockerd.Host))
		host, err := dockerd.Up(ctx, root)
		if err != nil {
			return nil, fmt.Errorf("E2E_PROVIDER=kind needs a Docker engine: %w\nrun the suite on the local cluster instead: go tool task e2e:local", err)
		}
		if host != "" {
			_ = os.Setenv("DOCKER_HOST", host) // kind and docker, run by the provider, find it there
			stopEngine = ours                  // started for this run: stopped at its end
		}
		bin, err := kindnode.Binary(ctx, root)
		if err != nil {
			return nil, err
		}
		image, err := kindnode.Image(ctx, root, os.Environ())
		if err != nil {
			return nil, err
		}
		config, err := kindnode.Config()
		if err != nil {
			return nil, err
		}
		kindConfig = filepath.Join(logs, "kind.yaml")
		if err := os.WriteFile(kindConfig, []byte(config), 0o644); err != nil {
			return nil, err
		}
		return kind.NewProvider().WithPath(bin).WithOpts(kind.WithImage(image)), nil
	default:
		return nil, fmt.Errorf("E2E_PROVIDER=%q: want local (default) or kind", p)
	}
}

// buildPatterns builds every pattern binary (local) or image loaded into kind (kind).
func buildPatterns(cluster string) env.Func {
	return func(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
		var err error
		if bins, err = os.MkdirTemp("", "kpatterns-e2e-bin-"); err != nil {
			return ctx, err
		}
		if kindRun { // the images `go tool task image` builds, for this machine's architecture,
			// but one from the Dockerfile, as `go tool task image:docker` builds it
			log, err := os.Create(filepath.Join(logs, "image-docker.log"))
			if err != nil {
				return ctx, err
			}
			err = kindnode.DockerBuild(ctx, root, os.Environ(), dockerfilePattern, image(dockerfilePattern), log)
			_ = log.Close()
			if err != nil {
				return ctx, fmt.Errorf("image:docker: %w (see %s)", err, log.Name())
			}
			if ctx, err = envfuncs.LoadDockerImageToCluster(cluster, image(dockerfilePattern))(ctx, cfg); err != nil {
				return ctx, err
			}
			others := slices.DeleteFunc(slices.Clone(patterns), func(p string) bool { return p == dockerfilePattern })
			out := filepath.Join(bins, "images")
			args := append([]string{"run", "./e2e/cmd/image", "-tag", "e2e", "-platforms", "linux/" + runtime.GOARCH, "-out", out}, others...)
			if err := command(ctx, root, "go", args...).Run(); err != nil {
				return ctx, fmt.Errorf("images: %w", err)
			}
			for _, p := range others { // every feature deploys its pattern from its image on kind
				archive := filepath.Join(out, p+"-linux-"+runtime.GOARCH+".tar")
				if ctx, err = envfuncs.LoadImageArchiveToCluster(cluster, archive)(ctx, cfg); err != nil {
					return ctx, err
				}
				deployArchives = append(deployArchives, archive)
			}
			close(deployImages) // TestDeployed's: built and loaded already
		} else if localProvider != nil && localProvider.Cluster().HasRealNode() {
			go buildDeployImages() // for TestDeployed, while the tests before it run
		} else {
			close(deployImages)
		}
		// One go build for every pattern: shared packages are compiled once, links run in parallel.
		// Static and -trimpath, as the images' binaries and bin/ are (go tool task build): their
		// compiled packages in Go's build cache serve this build, in any clone.
		args := []string{"build", "-trimpath", "-o", bins + string(filepath.Separator)}
		for _, p := range patterns {
			args = append(args, "./"+p)
		}
		cmd := command(ctx, root, "go", args...)
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if err := cmd.Run(); err != nil {
			return ctx, fmt.Errorf("building the patterns: %w", err)
		}
		return ctx, nil
	}
}

// dockerfilePattern is the pattern whose kind image is built from the Dockerfile.
const dockerfilePattern = "mirror"

func image(pattern string) string { return "kpatterns/" + pattern + ":e2e" }

func command(ctx context.Context, dir, name string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
	return cmd
}

// kindKwok is kwok's fake node beside kind's (kind only): the local cluster has its own.
var kindKwok *localcluster.Cluster

// addFakeNode gives a kind cluster what the local cluster has: this machine's routes to its Pods
// (and Services) through the node, kwok's fake node (tainted) for the suite's workloads, and its
// nodes labelled as the real node is.
func addFakeNode(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	if !kindRun {
		return ctx, nil
	}
	var err error
	if unroute, err = kindnode.RouteThroughNode(ctx, os.Environ(), clusterName+"-control-plane"); err != nil {
		return ctx, err
	}
	kindKwok, err = localcluster.AddFakeNode(ctx, cfg.KubeconfigFile(), filepath.Join(logs, "kwok"))
	return ctx, err
}

// unroute removes the routes to kind's Pod and Service ranges (kind only); stopEngine says the
// run started the project's Docker engine, which its end stops.
var (
	unroute    func() error
	stopEngine bool
)

func stopDocker(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	if !stopEngine {
		return ctx, nil
	}
	return ctx, dockerd.Down(ctx)
}

func stopFakeNode(ctx context.Context, _ *envconf.Config) (context.Context, error) {
	var errs []error
	if kindKwok != nil {
		errs = append(errs, kindKwok.Stop())
	}
	if unroute != nil {
		errs = append(errs, unroute())
	}
	return ctx, errors.Join(errs...)
}

// installPattern applies a pattern's generated manifests (with --image, its Deployment on kind).
func installPattern(ctx context.Context, t testing.TB, cfg *envconf.Config, pattern string, extra ...string) {
	t.Helper()
	install := append([]string{"install"}, extra...)
	if kindRun {
		install = append(install, "--image", image(pattern))
	}
	patternCommand(ctx, t, cfg, pattern, install...)
}

// patternCommand runs one command of the pattern's binary (install, uninstall) with the cluster's
// kubeconfig in the operator namespace; an error fails the test.
func patternCommand(ctx context.Context, t testing.TB, cfg *envconf.Config, pattern string, args ...string) {
	t.Helper()
	cmd := command(ctx, root, filepath.Join(bins, pattern), args...)
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile(), "KPATTERNS_NAMESPACE="+operatorNamespace)
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s %s: %v", pattern, args[0], err)
	}
}

// runPattern installs a pattern with its generated manifests and runs it until the returned stop
// is called: locally as a process impersonating its ServiceAccount (so its RBAC is what is
// tested), on kind as the generated Deployment.
func runPattern(ctx context.Context, t testing.TB, cfg *envconf.Config, pattern string, runArgs ...string) (stop func()) {
	t.Helper()
	bin := filepath.Join(bins, pattern)
	var install, run []string
	// Locally a webhook pattern runs outside the cluster, called by URL with a development
	// certificate; on kind its Deployment serves the Service with the certificate it keeps itself
	// (--certs=self, the default), as the deploy tier installs it.
	if webhookPatterns[pattern] && !kindRun {
		w, err := localcluster.PrepareWebhook(bin, operatorNamespace, filepath.Join(logs, pattern+"-certs"), "127.0.0.1")
		if err != nil {
			t.Fatal(err)
		}
		webhooks[pattern] = w
		install, run = w.InstallArgs(), w.RunArgs()
	}
	for _, a := range runArgs { // a feature enabled is granted at install too (and run so on kind)
		if strings.HasPrefix(a, "--with=") {
			install = append(install, a)
		}
	}
	installPattern(ctx, t, cfg, pattern, install...)
	if kindRun {
		c := clientFor(t, cfg)
		d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: pattern, Namespace: operatorNamespace}}
		waitRolledOut(t, c, d, 3*time.Minute)
		// Stopped as the local process is: no later feature meets it (a reloader left running
		// would act on that feature's workloads). Its next install creates the Deployment again.
		return func() {
			if err := c.Delete(ctx, d); client.IgnoreNotFound(err) != nil {
				t.Errorf("%s: deleting its Deployment: %v", pattern, err)
				return
			}
			err := pollUntil(pattern+"'s Pods gone", 2*time.Minute, func(ctx context.Context) (bool, error) {
				pods, err := podsOf(ctx, c, d)
				return err == nil && len(pods) == 0, err
			})
			if err != nil {
				t.Error(err)
			}
		}
	}
	log, err := os.Create(filepath.Join(logs, pattern+".log"))
	if err != nil {
		t.Fatal(err)
	}
	p, err := localcluster.RunPattern(ctx, bin, cfg.KubeconfigFile(), operatorNamespace, log, false, append(run, runArgs...)...)
	if err != nil {
		b, _ := os.ReadFile(log.Name())
		t.Fatalf("%v\n%s", err, b)
	}
	processes[pattern] = p
	return func() {
		if err := p.Stop(30 * time.Second); err != nil {
			t.Errorf("%s after SIGTERM: %v (log %s)", pattern, err, log.Name())
		}
		_ = log.Close()
	}
}
