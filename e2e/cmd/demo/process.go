// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The demo's hands: pattern processes, waits on objects, and what it prints.

import (
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/e2e/workspace"
	"github.com/kpatterns/kpatterns/shared/conditions"
)

// start installs a pattern and (re)starts it in the background as its ServiceAccount.
func (d *demo) start(pattern string) error {
	step(fmt.Sprintf("Install %s (server-side apply of its generated manifests: what it needs and nothing more) and run it as its ServiceAccount", pattern))
	bin := filepath.Join(filepath.Dir(d.dir), "bin", pattern)
	var install, run []string
	if workspace.ServesWebhooks(filepath.Dir(d.dir), pattern) { // served here, called by the API server on 127.0.0.1
		w, err := localcluster.PrepareWebhook(bin, ns, filepath.Join(d.dir, pattern+"-certs"), d.webhookHost)
		if err != nil {
			return err
		}
		install, run = w.InstallArgs(), w.RunArgs()
		fmt.Printf("%s certs --dir %s --hosts %s   # a development CA and serving certificate\n", pattern, w.Dir, w.Host)
	}
	if err := d.install(pattern, install...); err != nil {
		return err
	}
	return d.run(pattern, pattern, run...)
}

// run (re)starts the process name (a pattern, or one replica of it) of pattern in the background,
// as the pattern's ServiceAccount, with args added to its run command.
func (d *demo) run(name, pattern string, args ...string) error {
	// A rerun replaces the previous process; cluster:down stops it with the cluster (its command
	// line names the cluster's kubeconfig).
	d.stop(name)
	log, err := os.OpenFile(filepath.Join(d.dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	defer func() { _ = log.Close() }() // the pattern process keeps its own handle
	p, err := localcluster.RunPattern(d.ctx, filepath.Join(filepath.Dir(d.dir), "bin", pattern), d.kubeconfig, ns, log, true, args...)
	if err != nil {
		return fmt.Errorf("%w; see %s", err, log.Name())
	}
	fmt.Printf("%s running (pid %d), ready on http://%s/readyz\n", name, p.Cmd.Process.Pid, p.ProbeAddr)
	return os.WriteFile(filepath.Join(d.dir, name+".pid"), []byte(strconv.Itoa(p.Cmd.Process.Pid)), 0o644)
}

// install runs the pattern's install with args, its output shown.
func (d *demo) install(pattern string, args ...string) error {
	cmd := exec.Command(filepath.Join(filepath.Dir(d.dir), "bin", pattern), append([]string{"install", "--kubeconfig", d.kubeconfig}, args...)...)
	cmd.Env = append(os.Environ(), "KPATTERNS_NAMESPACE="+ns)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}

// pid is the pattern process the demo started, 0 if none.
func (d *demo) pid(pattern string) int {
	b, err := os.ReadFile(filepath.Join(d.dir, pattern+".pid"))
	if err != nil {
		return 0
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(b)))
	return pid
}

// stop stops a pattern process the demo started, waiting up to 10 s for it to exit.
func (d *demo) stop(pattern string) {
	if pid := d.pid(pattern); pid > 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for i := 0; i < 100 && syscall.Kill(pid, 0) == nil; i++ {
			time.Sleep(100 * time.Millisecond)
		}
		_ = os.Remove(filepath.Join(d.dir, pattern+".pid"))
	}
}

// rss is a process's resident set size in MiB, from /proc (0 if unknown).
func rss(pid int) float64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(rest), " kB"))
			return float64(kib) / 1024
		}
	}
	return 0
}

// recreate creates obj after deleting what a previous run left, waiting until child (which the
// garbage collector removes with it) is gone too.
func (d *demo) recreate(obj, child client.Object) error {
	_ = d.c.Delete(d.ctx, obj.DeepCopyObject().(client.Object))
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(200 * time.Millisecond) {
		err1 := d.c.Get(d.ctx, client.ObjectKeyFromObject(obj), obj.DeepCopyObject().(client.Object))
		err2 := d.c.Get(d.ctx, client.ObjectKeyFromObject(child), child)
		if apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2) {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s from a previous run was not removed", obj.GetName())
		}
	}
	return d.c.Create(d.ctx, obj)
}

// waitFor reads ns/name into obj until done() holds. Every 5 s of waiting it says so, with the
// first condition of obj that is not True (if it has conditions; "as before" when it has not
// changed): a wait is never silent.
func (d *demo) waitFor(name string, obj client.Object, done func() bool) error {
	began, said, last := time.Now(), time.Now(), ""
	for deadline := began.Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		key := client.ObjectKey{Namespace: ns, Name: name}
		if obj.GetNamespace() != "" {
			key.Namespace = obj.GetNamespace()
		}
		err := d.c.Get(d.ctx, key, obj)
		if err == nil && done() {
			return nil
		}
		if err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if time.Since(said) >= 5*time.Second {
			said = time.Now()
			why := pending(obj)
			if why != "" && why == last {
				why = ": as before"
			} else {
				last = why
			}
			fmt.Printf("    … still waiting for %s (%s)%s\n", name, time.Since(began).Round(time.Second), why)
		}
	}
	return fmt.Errorf("%T %s did not reach the expected state", obj, name)
}

// pending is ": Type=Status Reason: message" for obj's first condition that is not True, with
// what a message about a missing RESTMapping means; "" without one.
func pending(obj client.Object) string {
	o, ok := obj.(interface{ GetConditions() []metav1.Condition })
	if !ok {
		return ""
	}
	for _, c := range o.GetConditions() {
		if c.Status == metav1.ConditionTrue {
			continue
		}
		out := fmt.Sprintf(": %s=%s %s: %s", c.Type, c.Status, c.Reason, c.Message)
		if strings.Contains(c.Message, "cannot find RESTMapping") {
			out += "\n      (kube-apiserver's admission learns a new CRD's kind on its 30 s refresh; until then it refuses " +
				"children owned by one with blockOwnerDeletion, and the pattern retries)"
		}
		return out
	}
	return ""
}

func ready(conds []metav1.Condition) bool {
	return meta.IsStatusConditionTrue(conds, conditions.Ready)
}

func step(s string) { fmt.Printf("\n==> %s\n", s) }

func owners(obj client.Object) []string {
	var out []string
	for _, o := range obj.GetOwnerReferences() {
		out = append(out, fmt.Sprintf("%s/%s (controller=%v)", o.Kind, o.Name, o.Controller != nil && *o.Controller))
	}
	slices.Sort(out)
	return out
}

func showConditions(conds []metav1.Condition) {
	for _, c := range conds {
		fmt.Printf("    %-16s %-6s %s\n", c.Type, c.Status, c.Message)
	}
}

// show prints fields of an object as `kubectl get -o yaml` would, less the noise.
func show(name string, fields map[string]any) {
	fields["name"] = name
	b, _ := yaml.Marshal(fields)
	fmt.Print("    " + strings.ReplaceAll(strings.TrimRight(string(b), "\n"), "\n", "\n    ") + "\n")
}

// sample reads one of a pattern's samples (<pattern>/config/samples/<file>, embedded in its config
// package) into obj, in namespace ("" for a cluster-scoped kind), and prints the kubectl command
// that applies it.
func sample(config fs.FS, pattern, file, namespace string, obj client.Object) error {
	b, err := fs.ReadFile(config, "samples/"+file)
	if err != nil {
		return err
	}
	if err := yaml.UnmarshalStrict(b, obj); err != nil {
		return fmt.Errorf("%s/config/samples/%s: %w", pattern, file, err)
	}
	obj.SetNamespace(namespace)
	fmt.Printf("    kubectl apply -f %s/config/samples/%s\n", pattern, file)
	return nil
}
