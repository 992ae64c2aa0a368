// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command demo shows the patterns on the running cluster, the local one or kind's (go tool task
// demo starts one):
// it installs each pattern with its generated manifests, runs it in the background as its
// ServiceAccount, and walks through what it does as a user would see it with kubectl.
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	childsetv1alpha1 "github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	conditionalv1alpha1 "github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/e2e/workspace"
	finalizersv1alpha1 "github.com/kpatterns/kpatterns/finalizers/api/v1alpha1"
	lifespanv1alpha1 "github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	summaryv1alpha1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	widgetv1alpha1 "github.com/kpatterns/kpatterns/widget/api/v1alpha1"
)

const (
	ns         = "default"
	policyNS   = "demo-policy"      // the operator's own namespace is never sent to its webhooks
	deployedNS = "kpatterns-system" // where the last part deploys a pattern as a Pod
)

// scene is one pattern's part of the demo (pattern "": one that shows several).
type scene struct {
	pattern string
	show    func() error
}

type demo struct {
	ctx         context.Context
	dir         string // the cluster's state directory
	kubeconfig  string
	cfg         *rest.Config
	c           client.Client
	kind        bool         // the cluster is kind's (kind:up), not the local one (cluster:up)
	webhookHost string       // where kube-apiserver calls the webhooks the demo serves
	fakeNode    func() error // waits until kwok's fake node has joined kind's cluster (nil: the local cluster's has)
}

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
	d := &demo{ctx: context.Background(), dir: dir, kubeconfig: filepath.Join(dir, "kubeconfig")}
	cfg, err := clientcmd.BuildConfigFromFlags("", d.kubeconfig)
	if err != nil {
		return fmt.Errorf("no cluster (%v): run go tool task cluster:up or kind:up", err)
	}
	s, err := app.NewScheme(widgetv1alpha1.AddToScheme, conditionalv1alpha1.AddToScheme, summaryv1alpha1.AddToScheme,
		childsetv1alpha1.AddToScheme, finalizersv1alpha1.AddToScheme, lifespanv1alpha1.AddToScheme)
	if err != nil {
		return err
	}
	d.cfg = cfg
	cfg.WarningHandlerWithContext = kubectlWarnings{} // admission warnings printed as kubectl prints them
	if d.c, err = client.New(cfg, client.Options{Scheme: s}); err != nil {
		return err
	}
	d.webhookHost = "127.0.0.1"
	if d.kind = onKind(dir); d.kind {
		if err := d.prepareKind(); err != nil {
			return err
		}
	}
	step("Apply every pattern's CRDs first: kube-apiserver's admission learns a new kind on its 30 s refresh, so one wait serves them all")
	_, crds, err := localcluster.PatternCRDs(filepath.Dir(d.dir))
	if err != nil {
		return err
	}
	if err := app.Install(d.ctx, cfg, crds, os.Stdout); err != nil {
		return err
	}
	step("Namespace " + ns + " is annotated so its Pods run on kwok's node (the PodNodeSelector and PodTolerationRestriction admission plugins): the demo's workloads need no kubelet")
	onKwok := localcluster.OnFakeNode(&corev1.Namespace{})
	patch, err := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": onKwok.Annotations}})
	if err != nil {
		return err
	}
	if err := d.c.Patch(d.ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, client.RawPatch(types.MergePatchType, patch)); err != nil {
		return err
	}
	for _, p := range []string{"multi", "sharding-a", "sharding-b", "sharding-c"} {
		d.stop(p) // a previous run's: the three patterns run on their own first, mirror alone
	}
	image := d.buildImage("childset") // for the last part, while the others run
	// First the scenes whose controllers give no custom resource children: kube-apiserver's
	// admission refuses children owned by a custom resource (blockOwnerDeletion) until its next
	// RESTMapper refresh after the CRDs were applied, up to 30 s, and these fill that time.
	scenes := []scene{{"mirror", d.mirror}, {"reloader", d.reloader}, {"summary", d.summary}, {"deploypolicy", d.deploypolicy},
		{"podpolicy", d.podpolicy}, {"widget", d.widget}, {"conditional", d.conditional}, {"childset", d.childset},
		{"finalizers", d.finalizers}, {"lifespan", d.lifespan}, {"dbpolicy", d.dbpolicy}, {"multi", d.multi}, {"sharding", d.sharding},
		{"", func() error { return d.deployed("childset", image) }}}
	all, err := workspace.Patterns(filepath.Dir(d.dir))
	if err != nil {
		return err
	}
	for _, p := range all { // go.work's list: a new pattern needs its scene here
		if !slices.ContainsFunc(scenes, func(s scene) bool { return s.pattern == p }) {
			return fmt.Errorf("pattern %s has no scene in the demo", p)
		}
	}
	for i, s := range scenes {
		if i == 1 && d.fakeNode != nil { // the mirror's scene runs no Pod: it needs no fake node yet
			if err := d.fakeNode(); err != nil {
				return err
			}
		}
		if err := s.show(); err != nil {
			return err
		}
	}
	fmt.Printf(`
The patterns keep running in the background (logs: %[1]s/logs/). Try them yourself:
  export KUBECONFIG=%[1]s/kubeconfig
  kubectl label configmap demo-settings %[2]s-                       # the mirror child is deleted
  kubectl scale deployment demo-shop --replicas=5                      # the Widget puts 2 back
  kubectl patch configprofile demo-profile --type=merge -p '{"spec":{"maintenance":true}}'
  kubectl get widgets,configprofiles,workloads,bundles,replicasets
  kubectl -n demo-policy scale deployment demo-api --replicas=9        # denied by the namespace policy
  kubectl -n demo-pods run shell --image=busybox --privileged        # denied by the namespace's labels
  kubectl -n demo-policy patch database demo-orders --type=merge -p '{"spec":{"version":"15.0"}}'   # denied: no downgrade
  kubectl -n %[3]s get pods -o wide; kubectl -n %[3]s logs deploy/childset   # with the real node
Stop everything with: go tool task %[4]s
`, d.dir, mirror.Label, deployedNS, map[bool]string{false: "cluster:down", true: "kind:down"}[d.kind])
	return nil
}
