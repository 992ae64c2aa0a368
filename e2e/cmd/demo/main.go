// Command demo shows the patterns on the running local cluster (go tool task demo starts it):
// it installs each pattern with its generated manifests, runs it in the background as its
// ServiceAccount, and walks through what it does as a user would see it with kubectl.
package main

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/mirror/controller"
)

const ns = "default"

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "demo:", err)
		os.Exit(1)
	}
}

func run() error {
	dir, err := filepath.Abs(".cluster")
	if err != nil {
		return err
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return fmt.Errorf("no local cluster (%v): run go tool task cluster:up", err)
	}
	c, err := client.New(cfg, client.Options{})
	if err != nil {
		return err
	}
	ctx := context.Background()

	step("Install the mirror: its ServiceAccount, least-privilege RBAC and leader-election Role (server-side apply)")
	if err := sh(dir, "bin/mirror", "install", "--kubeconfig", kubeconfig); err != nil {
		return err
	}
	step("Run it in the background as its ServiceAccount, so only the generated RBAC is used")
	if err := background(dir, kubeconfig, "mirror"); err != nil {
		return err
	}

	step("Apply a ConfigMap labelled " + controller.Label + "=true")
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "demo-settings", Namespace: ns,
		Labels: map[string]string{controller.Label: controller.Source}},
		Data: map[string]string{"color": "blue", "size": "large", "debug": "false"}}
	_ = c.Delete(ctx, src) // a rerun starts clean; the garbage collector removes the old child
	if err := waitGone(ctx, c, "demo-settings-mirror"); err != nil {
		return err
	}
	if err := c.Create(ctx, src); err != nil {
		return err
	}
	show(src)
	step("The controller created demo-settings-mirror, owned by the source:")
	child, err := waitData(ctx, c, "demo-settings-mirror", src.Data)
	if err != nil {
		return err
	}
	show(child)

	step("Remove the key 'debug' from the source: the child's data is replaced as a whole")
	delete(src.Data, "debug")
	if err := c.Update(ctx, src); err != nil {
		return err
	}
	if child, err = waitData(ctx, c, "demo-settings-mirror", src.Data); err != nil {
		return err
	}
	show(child)

	fmt.Printf(`
The mirror keeps running in the background (log: %[1]s/logs/mirror.log). Try it yourself:
  export KUBECONFIG=%[1]s/kubeconfig
  kubectl label configmap demo-settings %[2]s-          # the child is deleted
  kubectl get configmaps -l %[2]s
Stop everything with: go tool task cluster:down
`, dir, controller.Label)
	return nil
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

func sh(dir, name string, args ...string) error {
	cmd := exec.Command(filepath.Join(filepath.Dir(dir), name), args...)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// background (re)starts a pattern as a detached process that cluster:down stops with the cluster
// (its command line names the cluster's kubeconfig).
func background(dir, kubeconfig, pattern string) error {
	pidFile := filepath.Join(dir, pattern+".pid")
	if b, err := os.ReadFile(pidFile); err == nil {
		if pid, err := strconv.Atoi(strings.TrimSpace(string(b))); err == nil {
			_ = syscall.Kill(pid, syscall.SIGTERM)
			for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	log, err := os.OpenFile(filepath.Join(dir, "logs", pattern+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer log.Close()
	p, err := localcluster.RunPattern(context.Background(), filepath.Join(filepath.Dir(dir), "bin", pattern),
		kubeconfig, ns, log, true)
	if err != nil {
		return fmt.Errorf("%w; see %s", err, log.Name())
	}
	fmt.Printf("%s running (pid %d), ready on http://%s/readyz\n", pattern, p.Cmd.Process.Pid, p.ProbeAddr)
	return os.WriteFile(pidFile, []byte(strconv.Itoa(p.Cmd.Process.Pid)), 0o644)
}

func waitData(ctx context.Context, c client.Client, name string, want map[string]string) (*corev1.ConfigMap, error) {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		cm := &corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, cm)
		if err == nil && maps.Equal(cm.Data, want) {
			return cm, nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s did not get the data %v", name, want)
}

func waitGone(ctx context.Context, c client.Client, name string) error {
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name}, &corev1.ConfigMap{})
		if apierrors.IsNotFound(err) {
			return nil
		}
	}
	return errors.New(name + " was not removed")
}

// show prints an object as `kubectl get -o yaml` would, less the noise.
func show(cm *corev1.ConfigMap) {
	out := map[string]any{"name": cm.Name, "labels": cm.Labels, "data": cm.Data}
	if len(cm.OwnerReferences) > 0 {
		var owners []string
		for _, o := range cm.OwnerReferences {
			owners = append(owners, fmt.Sprintf("%s/%s (controller=%v)", o.Kind, o.Name, o.Controller != nil && *o.Controller))
		}
		slices.Sort(owners)
		out["ownerReferences"] = owners
	}
	b, _ := yaml.Marshal(out)
	fmt.Print(indent(string(b)))
}

func indent(s string) string {
	return "    " + strings.ReplaceAll(strings.TrimRight(s, "\n"), "\n", "\n    ") + "\n"
}
