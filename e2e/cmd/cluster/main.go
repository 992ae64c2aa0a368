// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command cluster starts and stops the local cluster in the background:
//
//	cluster up [--dir .cluster] [--node real]   start it (or report the running one); writes DIR/kubeconfig
//	cluster down [--dir .cluster]               stop every process it started, remove the real node, remove DIR
//	cluster load-image [--dir .cluster] FILE... import image archives into the real node's containerd
//	                                            (into the kind cluster's nodes where no local cluster runs)
//	cluster binaries [--node real]              build the binaries into the cache (once per version)
//	cluster kwok                                kwok in the cache (the control plane's, or built alone):
//	                                            kind's clusters get its fake node (localcluster.AddFakeNode)
//	cluster docker-up                           a Docker engine for kind: yours, or Debian's started for
//	                                            this project (package dockerd); prints its DOCKER_HOST
//	cluster docker-down                         stop the project's engine; the host as before docker-up
//	cluster kind-up [--dir .cluster]            a kind cluster "kpatterns" (Docker engine from docker-up, node
//	                                            image kindest/node or built here); writes DIR/kubeconfig
//	cluster kind-down [--dir .cluster]          delete it, and stop the project's Docker engine
//	cluster image-docker PATTERN [TAG]          build a pattern's image from the Dockerfile (TAG
//	                                            kpatterns/PATTERN:dev); its bases made here where
//	                                            they cannot be pulled (kindnode.DockerBuild)
//	cluster kind-env                            print the exports a pattern's own e2e suite (shared/kindtest)
//	                                            needs here: DOCKER_HOST, KIND, KIND_NODE_IMAGE, KIND_CONFIG
//	cluster envtest                             print a directory with etcd and kube-apiserver for
//	                                            KUBEBUILDER_ASSETS: the user's, setup-envtest's, or built
//
// `up` starts a supervisor process in its own session that owns the cluster's processes and
// stops them on SIGTERM; `down` signals it, kills any leftover process whose command line names
// DIR (a supervisor that was killed cannot clean up itself), and removes what the real node
// added to the host.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/kpatterns/kpatterns/e2e/assets"
	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/e2e/kindnode"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/shared/controlplane"
)

func main() {
	if len(os.Args) < 2 {
		fail(errors.New("usage: cluster up|down|load-image|binaries|kwok|docker-up|docker-down|kind-up|kind-down|image-docker|kind-env|registry-up|registry-down|envtest [--dir DIR] [--node real]"))
	}
	fs := flag.NewFlagSet("cluster "+os.Args[1], flag.ExitOnError)
	dir := fs.String("dir", ".cluster", "state directory: kubeconfig, logs/, pki/, etcd/, node/")
	nodeKind := fs.String("node", "", "real: a node that runs containers beside kwok's fake one (root)")
	_ = fs.Parse(os.Args[2:])
	if *nodeKind != "" && *nodeKind != "real" {
		fail(fmt.Errorf("--node %q: want real (or nothing, for kwok's node alone)", *nodeKind))
	}
	opts := localcluster.Options{RealNode: *nodeKind == "real"}
	abs, err := filepath.Abs(*dir)
	if err != nil {
		fail(err)
	}
	switch os.Args[1] {
	case "up":
		err = up(abs, opts, *nodeKind)
	case "down":
		err = down(abs)
	case "supervise":
		err = supervise(abs, opts)
	case "load-image":
		if _, local := running(abs); !local {
			err = kindLoad(context.Background(), fs.Args()...)
		} else if err = localcluster.LoadImages(context.Background(), abs, fs.Args()...); err == nil {
			fmt.Printf("loaded %s into %s\n", strings.Join(fs.Args(), ", "), localcluster.RealNodeName)
		}
	case "binaries":
		err = binaries(opts)
	case "kwok":
		var dir string
		if dir, err = localcluster.KwokDir(context.Background()); err == nil {
			fmt.Println("kwok:", dir)
		}
	case "docker-up":
		var host string
		if host, err = dockerd.Up(context.Background(), "."); err == nil && host == "" {
			fmt.Fprintln(os.Stderr, "docker: your engine answers `docker info`; using it as it is")
		} else if err == nil {
			fmt.Fprintf(os.Stderr, "docker: the project's engine runs (data in %s); for the docker CLI and kind:\n", dockerd.DataRoot)
			fmt.Printf("export DOCKER_HOST=%s\n", host)
		}
	case "docker-down":
		err = dockerd.Down(context.Background())
	case "kind-up":
		err = kindUp(context.Background(), abs)
	case "kind-down":
		err = kindDown(context.Background(), abs)
	case "image-docker":
		err = imageDocker(context.Background(), fs.Args())
	case "kind-env":
		err = kindExports(context.Background())
	case "registry-up":
		err = registryUp(context.Background(), abs)
	case "registry-serve":
		err = registryServe(abs, fs.Args())
	case "registry-down":
		err = registryDown(abs)
	case "envtest":
		var dir string
		if dir, err = assets.Resolve(context.Background(), os.Stderr); err == nil {
			fmt.Println(dir)
		}
	default:
		err = fmt.Errorf("unknown command %q (want up, down, load-image, binaries, kwok, docker-up, docker-down, kind-up, kind-down, image-docker, kind-env, registry-up, registry-down or envtest)", os.Args[1])
	}
	if err != nil {
		fail(err)
	}
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "cluster:", err)
	os.Exit(1)
}

func pidFile(dir string) string   { return filepath.Join(dir, "supervisor.pid") }
func readyFile(dir string) string { return filepath.Join(dir, "ready") }

// running returns the supervisor's PID if it is alive.
func running(dir string) (int, bool) {
	b, err := os.ReadFile(pidFile(dir))
	if err != nil {
		return 0, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid, err == nil && syscall.Kill(pid, 0) == nil
}

func binaries(opts localcluster.Options) error {
	dir, err := controlplane.EnsureOf(context.Background(), localcluster.ControlPlane)
	if err != nil {
		return err
	}
	fmt.Println("control-plane binaries:", dir)
	if opts.RealNode {
		if dir, err = controlplane.EnsureSet(context.Background(), localcluster.NodeSet); err != nil {
			return err
		}
		fmt.Println("node binaries:", dir)
	}
	return nil
}

func up(dir string, opts localcluster.Options, nodeKind string) error {
	if _, ok := running(dir); ok {
		if _, err := os.Stat(readyFile(dir)); err == nil {
			if _, err := os.Stat(filepath.Join(dir, "node")); opts.RealNode && err != nil {
				return errors.New("the local cluster is running without the real node: go tool task cluster:down first")
			}
			fmt.Printf("local cluster already running\n%s", howTo(dir))
			return nil
		}
	} else if _, err := os.Stat(dir); err == nil {
		_ = down(dir) // leftovers of a crashed cluster
	}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return err
	}
	// Build (first run only) in the foreground, where its progress message is seen.
	if err := binaries(opts); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	log, err := os.Create(filepath.Join(dir, "logs", "supervisor.log"))
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }() // a log file: nothing to do about a failed close
	start := time.Now()
	cmd := exec.Command(self, "supervise", "--dir", dir, "--node", nodeKind)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true} // outlives this command and its terminal
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	for {
		if _, err := os.Stat(readyFile(dir)); err == nil {
			nodes := localcluster.NodeName
			if opts.RealNode {
				nodes += " and " + localcluster.RealNodeName
			}
			fmt.Printf("local cluster ready in %.1fs (nodes %s Ready)\n%s", time.Since(start).Seconds(), nodes, howTo(dir))
			return nil
		}
		select {
		case err := <-exited:
			b, _ := os.ReadFile(filepath.Join(dir, "logs", "supervisor.log"))
			return fmt.Errorf("the cluster did not start (%v):\n%s\ncomponent logs: %s", err, b, filepath.Join(dir, "logs"))
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func howTo(dir string) string {
	return fmt.Sprintf(`  kubeconfig: %[1]s/kubeconfig
  use it:     export KUBECONFIG=%[1]s/kubeconfig   (kubectl, or any pattern's install/run)
  logs:       %[1]s/logs/
  stop it:    go tool task cluster:down
`, dir)
}

func kindHowTo(dir string) string {
	return fmt.Sprintf(`  kubeconfig: %[1]s/kubeconfig
  use it:     export KUBECONFIG=%[1]s/kubeconfig   (kubectl, or any pattern's install/run)
  images:     go tool task image:load PATTERN=<pattern>   (after go tool task image)
  stop it:    go tool task kind:down
`, dir)
}

// supervise runs the cluster until SIGTERM or SIGINT.
func supervise(dir string, opts localcluster.Options) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if err := os.WriteFile(pidFile(dir), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	c, err := localcluster.Start(ctx, dir, opts)
	if err != nil {
		return err
	}
	if err := os.WriteFile(readyFile(dir), nil, 0o644); err != nil {
		return errors.Join(err, c.Stop())
	}
	fmt.Println("cluster ready; kubeconfig", c.Kubeconfig)
	<-ctx.Done()
	fmt.Println("stopping")
	return c.Stop()
}

func down(dir string) error {
	if pid, ok := running(dir); ok {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); {
			if syscall.Kill(pid, 0) != nil {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	killed := killLeftovers(dir)
	if err := localcluster.RemoveNode(dir); err != nil {
		return err
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	fmt.Printf("local cluster stopped and %s removed", dir)
	if killed > 0 {
		fmt.Printf(" (%d leftover processes killed)", killed)
	}
	fmt.Println()
	return nil
}

// killLeftovers kills processes whose command line names dir: every component is started with a
// path inside it (etcd's data dir, the API server's cert dir, the others' kubeconfig).
func killLeftovers(dir string) int {
	entries, _ := os.ReadDir("/proc")
	n := 0
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil || !strings.Contains(string(b), dir+"/") {
			continue
		}
		if syscall.Kill(pid, syscall.SIGKILL) == nil {
			n++
		}
	}
	return n
}

// KindCluster is the name of the cluster kind-up creates.
const KindCluster = "kpatterns"

// kindUp creates the kind cluster (or reports the running one) with its kubeconfig in dir.
func kindUp(ctx context.Context, dir string) error {
	if _, ok := running(dir); ok {
		return errors.New("the local cluster is running in " + dir + ": go tool task cluster:down first")
	}
	env, kind, err := kindEnv(ctx)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if out, err := kindCommand(ctx, env, kind, "get", "clusters").Output(); err == nil && strings.Contains("\n"+string(out), "\n"+KindCluster+"\n") {
		fmt.Printf("kind cluster %s already running\n%s", KindCluster, kindHowTo(dir))
		return kindCommand(ctx, env, kind, "export", "kubeconfig", "--name", KindCluster, "--kubeconfig", kubeconfig).Run()
	}
	image, err := kindnode.Image(ctx, ".", env)
	if err != nil {
		return err
	}
	config, err := kindnode.Config()
	if err != nil {
		return err
	}
	configFile := filepath.Join(dir, "kind.yaml")
	if err := os.WriteFile(configFile, []byte(config), 0o644); err != nil {
		return err
	}
	start := time.Now()
	cmd := kindCommand(ctx, env, kind, "create", "cluster", "--name", KindCluster, "--image", image, "--config", configFile,
		"--kubeconfig", kubeconfig, "--wait", "5m")
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("kind create cluster: %w", err)
	}
	fmt.Printf("kind cluster %s ready in %.1fs (image %s)\n%s", KindCluster, time.Since(start).Seconds(), image, kindHowTo(dir))
	return nil
}

// kindDown deletes the kind cluster and dir, and stops the project's Docker engine if it runs.
func kindDown(ctx context.Context, dir string) error {
	env, kind, err := kindEnv(ctx)
	if err != nil {
		return err
	}
	cmd := kindCommand(ctx, env, kind, "delete", "cluster", "--name", KindCluster, "--kubeconfig", filepath.Join(dir, "kubeconfig"))
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	if n := killLeftovers(dir); n > 0 { // the demo's pattern processes and kwok
		fmt.Printf("%d processes that named %s killed\n", n, dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	return dockerd.Down(ctx)
}

// kindEnv starts (or finds) the Docker engine and builds kind; env reaches the engine.
func kindEnv(ctx context.Context) ([]string, string, error) {
	host, err := dockerd.Up(ctx, ".")
	if err != nil {
		return nil, "", err
	}
	env := os.Environ()
	if host != "" {
		env = append(env, "DOCKER_HOST="+host)
	}
	kind, err := kindnode.Binary(ctx, ".")
	return env, kind, err
}

// kindExports prints, as shell exports, what shared/kindtest needs to create a kind cluster on
// this machine: the engine, kind, the node image and configuration kind-up uses.
func kindExports(ctx context.Context) error {
	env, kind, err := kindEnv(ctx)
	if err != nil {
		return err
	}
	image, err := kindnode.Image(ctx, ".", env)
	if err != nil {
		return err
	}
	config, err := kindnode.Config()
	if err != nil {
		return err
	}
	dir, err := controlplane.CacheDir("kind")
	if err != nil {
		return err
	}
	file := filepath.Join(dir, "kind.yaml")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(file, []byte(config), 0o644); err != nil {
		return err
	}
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "DOCKER_HOST="); ok {
			fmt.Printf("export DOCKER_HOST=%s\n", v)
		}
	}
	fmt.Printf("export KIND=%s KIND_NODE_IMAGE=%s KIND_CONFIG=%s\n", kind, image, file)
	return nil
}

// imageDocker builds a pattern's image with the Docker engine docker-up gives.
func imageDocker(ctx context.Context, args []string) error {
	if len(args) < 1 || len(args) > 2 {
		return errors.New("usage: cluster image-docker PATTERN [TAG]")
	}
	tag := "kpatterns/" + args[0] + ":dev"
	if len(args) == 2 {
		tag = args[1]
	}
	host, err := dockerd.Up(ctx, ".")
	if err != nil {
		return err
	}
	env := os.Environ()
	if host != "" {
		env = append(env, "DOCKER_HOST="+host)
	}
	if err := kindnode.DockerBuild(ctx, ".", env, args[0], tag, os.Stderr); err != nil {
		return err
	}
	fmt.Println(tag)
	return nil
}

func kindCommand(ctx context.Context, env []string, kind string, args ...string) *exec.Cmd {
	cmd := exec.CommandContext(ctx, kind, args...)
	cmd.Env = env
	return cmd
}

// kindLoad loads image archives into the kind cluster's nodes (kind load image-archive).
func kindLoad(ctx context.Context, archives ...string) error {
	env, kind, err := kindEnv(ctx)
	if err != nil {
		return err
	}
	for _, a := range archives {
		cmd := kindCommand(ctx, env, kind, "load", "image-archive", "--name", KindCluster, a)
		cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("kind load image-archive %s: %w", a, err)
		}
	}
	return nil
}
