// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	childsetv1alpha1 "github.com/kpatterns/kpatterns/childset/api/v1alpha1"
)

// hasRealNode says whether the demo's cluster runs the real node (cluster:up NODE=real, as root).
func (d *demo) hasRealNode() bool {
	_, err := os.Stat(filepath.Join(d.dir, "node", "index"))
	return err == nil || d.kind
}

// buildImage builds a pattern's image for this machine in the background, as `go tool task image`
// does (its output goes to the cluster's logs/), when the cluster has a real node to run it.
func (d *demo) buildImage(pattern string) <-chan error {
	done := make(chan error, 1)
	if !d.hasRealNode() {
		done <- nil
		return done
	}
	go func() {
		log, err := os.Create(filepath.Join(d.dir, "logs", "image-"+pattern+".log"))
		if err != nil {
			done <- err
			return
		}
		defer func() { _ = log.Close() }()
		cmd := exec.CommandContext(d.ctx, "go", "run", "./e2e/cmd/image", "-platforms", "linux/"+runtime.GOARCH, "-tag", "dev", pattern)
		cmd.Dir, cmd.Stdout, cmd.Stderr = filepath.Dir(d.dir), log, log
		if err := cmd.Run(); err != nil {
			done <- fmt.Errorf("building %s's image: %w; see %s", pattern, err, log.Name())
			return
		}
		done <- nil
	}()
	return done
}

// deployed runs a pattern as users run an operator: a Pod from its image on the real node, in a
// namespace that enforces Pod Security "restricted", its log read through the API server; then it
// acts on the Bundle its process handled before.
func (d *demo) deployed(pattern string, image <-chan error) error {
	if !d.hasRealNode() {
		step("No real node in this cluster (go tool task cluster:up NODE=real, as root): the patterns ran as processes only")
		return nil
	}
	step(fmt.Sprintf("%s as users run an operator: a Pod from its image on a node that runs containers, with no placement flags", pattern))
	fmt.Printf("    go tool task image PATTERN=%s PLATFORMS=linux/%s   # built while the demo ran\n", pattern, runtime.GOARCH)
	if err := <-image; err != nil {
		return err
	}
	fmt.Printf("    go tool task image:load PATTERN=%s                # into the node's containerd: no registry\n", pattern)
	if err := d.loadImage(d.ctx, filepath.Join(filepath.Dir(d.dir), "dist", pattern+"-linux-"+runtime.GOARCH+".tar")); err != nil {
		return err
	}
	nsObj := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: deployedNS, Labels: map[string]string{
		"pod-security.kubernetes.io/enforce": "restricted"}}}
	if err := d.c.Create(d.ctx, nsObj); client.IgnoreAlreadyExists(err) != nil {
		return err
	}
	d.stop(pattern) // its process: the Pod takes over
	args := []string{"install", "--kubeconfig", d.kubeconfig, "--image", "kpatterns/" + pattern + ":dev"}
	fmt.Printf("    KPATTERNS_NAMESPACE=%s %s install %s\n", deployedNS, pattern, strings.Join(args[3:], " "))
	cmd := exec.Command(filepath.Join(filepath.Dir(d.dir), "bin", pattern), args...)
	cmd.Env = append(os.Environ(), "KPATTERNS_NAMESPACE="+deployedNS)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	if err := cmd.Run(); err != nil {
		return err
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: pattern, Namespace: deployedNS}}
	err := d.waitFor(pattern, dep, func() bool {
		return dep.Status.ReadyReplicas == 1 && dep.Status.UpdatedReplicas == 1 && dep.Status.Replicas == 1
	})
	if err != nil {
		return err
	}
	step("kubectl -n " + deployedNS + " get pods -o wide")
	pods := &corev1.PodList{}
	if err := d.c.List(d.ctx, pods, client.InNamespace(deployedNS), client.MatchingLabels(dep.Spec.Selector.MatchLabels)); err != nil {
		return err
	}
	fmt.Printf("    %-32s %-7s %-9s %-12s %s\n", "NAME", "READY", "STATUS", "IP", "NODE")
	var pod corev1.Pod
	for _, p := range pods.Items {
		if p.DeletionTimestamp == nil {
			pod = p
			fmt.Printf("    %-32s %-7s %-9s %-12s %s\n", p.Name, "1/1", p.Status.Phase, p.Status.PodIP, p.Spec.NodeName)
		}
	}
	step("kubectl -n " + deployedNS + " logs " + pod.Name + " --tail=4   # read from the kubelet through the API server")
	cs, err := kubernetes.NewForConfig(d.cfg)
	if err != nil {
		return err
	}
	logs, err := cs.CoreV1().Pods(deployedNS).GetLogs(pod.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](4)}).DoRaw(d.ctx)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(logs)), "\n") {
		fmt.Printf("    %.150s\n", line)
	}
	step("Add entry FEATURE_Y to demo-bundle: the Pod, with its ServiceAccount's in-cluster credentials, creates its ConfigMap")
	fmt.Println(`    kubectl patch bundle demo-bundle --type=merge -p '{"spec":{"entries":{"FEATURE_Y":"on"}}}'`)
	b := &childsetv1alpha1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "demo-bundle", Namespace: ns}}
	if err := d.c.Patch(d.ctx, b, client.RawPatch(types.MergePatchType, []byte(`{"spec":{"entries":{"FEATURE_Y":"on"}}}`))); err != nil {
		return err
	}
	return d.bundleChildren(b, 3)
}
