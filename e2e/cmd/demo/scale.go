// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package main

// The scenes of many patterns or replicas at once, and of patterns as Pods from their images.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	childsetv1alpha1 "github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	"github.com/kpatterns/kpatterns/shared/shard"
)

// multi replaces the mirror, reloader and summary processes by one process running all three.
func (d *demo) multi() error {
	step("multi: the mirror, reloader and summary controllers in one process (app.Compose), replacing the three")
	var three float64
	for _, p := range []string{"mirror", "reloader", "summary"} {
		mib := rss(d.pid(p))
		three += mib
		fmt.Printf("    %-8s pid %-7d RSS %5.1f MiB\n", p, d.pid(p), mib)
		d.stop(p)
	}
	if err := d.start("multi"); err != nil {
		return err
	}
	step("Change demo-settings: multi's mirror controller updates the child")
	src := &corev1.ConfigMap{}
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		if err := d.c.Get(d.ctx, client.ObjectKey{Namespace: ns, Name: "demo-settings"}, src); err != nil {
			return err
		}
		src.Data["color"] = "green"
		return d.c.Update(d.ctx, src)
	})
	if err != nil {
		return err
	}
	child := &corev1.ConfigMap{}
	if err := d.waitFor("demo-settings-mirror", child, func() bool { return child.Data["color"] == "green" }); err != nil {
		return err
	}
	show(child.Name, map[string]any{"data": child.Data})
	fmt.Printf("    RSS: multi %.1f MiB running all three; the three processes had %.1f MiB together\n", rss(d.pid("multi")), three)
	return nil
}

// sharding runs mirror's controller on three active replicas in place of multi's, each caching
// and mirroring only the sources whose range it holds; one replica stops and its share moves.
func (d *demo) sharding() error {
	step("sharding: mirror's controller on three active replicas at once (in place of multi's), each mirroring the sources of its hash ranges (--sharding=label: a source's range is the hash of its UID)")
	d.stop("multi")
	_ = d.c.DeleteAllOf(d.ctx, &corev1.Namespace{}, client.MatchingLabels{"demo": "sharding"}) // a previous run's
	var sources []*corev1.ConfigMap
	for range 6 {
		n := localcluster.OnFakeNode(&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "demo-shard-", Labels: map[string]string{"demo": "sharding"}}})
		if err := d.c.Create(d.ctx, n); err != nil {
			return err
		}
		for i := range 4 {
			src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("settings-%d", i), Namespace: n.Name,
				Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"namespace": n.Name}}
			if err := d.c.Create(d.ctx, src); err != nil {
				return err
			}
			sources = append(sources, src)
		}
	}
	fmt.Printf("    %d sources in 6 namespaces demo-shard-*\n", len(sources))
	if err := d.install("sharding"); err != nil {
		return err
	}
	members := []string{"a", "b", "c"}
	for _, m := range members {
		if err := d.run("sharding-"+m, "sharding", "--member", m, "--sharding", "label"); err != nil {
			return err
		}
	}
	if err := d.shares(sources, members...); err != nil {
		return err
	}
	step("Stop replica b (SIGTERM): it stops its work, deletes its Lease, and its ranges move to a and c at once; then change every source")
	d.stop("sharding-b")
	for _, src := range sources {
		patch := client.MergeFrom(src.DeepCopy()) // the data alone: the sharder labelled the source meanwhile
		src.Data["namespace"] += " (changed)"
		if err := d.c.Patch(d.ctx, src, patch); err != nil {
			return err
		}
	}
	if err := d.shares(sources, "a", "c"); err != nil {
		return err
	}
	step("Stop the replicas; multi takes mirroring back for what follows")
	d.stop("sharding-a")
	d.stop("sharding-c")
	return d.start("multi")
}

// shares waits for the sharding ring to settle on members and every source's data to be in its
// child, and prints each member's share side by side (a source's range: the hash of its UID).
func (d *demo) shares(sources []*corev1.ConfigMap, members ...string) error {
	var a shard.Assignment
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(200 * time.Millisecond) {
		var leases coordinationv1.LeaseList
		if err := d.c.List(d.ctx, &leases, client.InNamespace(ns), client.MatchingLabels{shard.RingLabel: "sharding"}); err != nil {
			return err
		}
		var err error
		if a, err = shard.Settled(leases.Items, "sharding", members...); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the ring did not settle on %v: %w", members, err)
		}
	}
	for _, src := range sources {
		child := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: src.Namespace}}
		if err := d.waitFor(src.Name+mirror.Suffix, child, func() bool { return child.Data["namespace"] == src.Data["namespace"] }); err != nil {
			return err
		}
	}
	fmt.Printf("    assignment %d (Lease sharding):\n    MEMBER  RANGES  SOURCES\n", a.Generation)
	for _, m := range members {
		var mine []string
		for _, src := range sources {
			if a.Ranges[m].Has(shard.RangeOf(string(src.UID))) {
				mine = append(mine, strings.TrimPrefix(src.Namespace, "demo-shard-")+"/"+src.Name)
			}
		}
		fmt.Printf("    %-7s %-7d %-2d %s\n", m, a.Ranges[m].Len(), len(mine), strings.Join(mine, " "))
	}
	fmt.Printf("    every one of the %d children holds its source's data\n", len(sources))
	return nil
}

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
