// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/pkg/features"

	childsetv1 "github.com/kpatterns/kpatterns/childset/api/v1alpha1"
	childset "github.com/kpatterns/kpatterns/childset/controller"
	conditionalv1 "github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
	dbpolicy "github.com/kpatterns/kpatterns/dbpolicy/webhook"
	deploypolicy "github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
	finalizers "github.com/kpatterns/kpatterns/finalizers/controller"
	lifespanv1 "github.com/kpatterns/kpatterns/lifespan/api/v1alpha1"
	lifespan "github.com/kpatterns/kpatterns/lifespan/controller"
	mirror "github.com/kpatterns/kpatterns/mirror/controller"
	podpolicy "github.com/kpatterns/kpatterns/podpolicy/webhook"
	reloader "github.com/kpatterns/kpatterns/reloader/controller"
	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
	summaryv1 "github.com/kpatterns/kpatterns/summary/api/v1alpha1"
	widgetv1 "github.com/kpatterns/kpatterns/widget/api/v1alpha1"
	widget "github.com/kpatterns/kpatterns/widget/controller"
)

// deployedNamespace is where the deploy tier installs the patterns: it enforces Pod Security
// "restricted", as an operator's namespace should.
const deployedNamespace = "kpatterns-system"

// TestDeployed is the deploy tier on the local cluster's real node. For every pattern, one after
// another: its image, built by e2e/cmd/image as `go tool task image` builds it and loaded into the
// node's containerd, is installed with `install --image` (webhooks served through their Service,
// with the certificate and caBundle the pattern keeps itself: --certs=self, the default) into a
// namespace enforcing Pod Security "restricted"; its Pods
// must run and be Ready on the real node, and do the pattern's job through the API server with
// the in-cluster configuration of its ServiceAccount. Then `uninstall` must leave none of the
// objects `manifests` rendered. Installing into another namespace re-points the patterns'
// cluster-scoped bindings there, so the teardown installs every pattern back into the operator
// namespace.
func TestDeployed(t *testing.T) {
	if !kindRun && (localProvider.Cluster() == nil || !localProvider.Cluster().HasRealNode()) {
		t.Skip("the deploy tier needs a node that runs containers: kind, or the local cluster's real node (it starts when the suite runs as root)")
	}
	const work = "e2e-deployed"
	f := features.New("deployed").
		Setup(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			for _, ns := range []*corev1.Namespace{
				{ObjectMeta: metav1.ObjectMeta{Name: deployedNamespace, Labels: map[string]string{
					"pod-security.kubernetes.io/enforce": "restricted", "pod-security.kubernetes.io/warn": "restricted"}}},
				testNamespace(work),
			} {
				if err := c.Create(ctx, ns); err != nil {
					t.Fatal(err)
				}
			}
			began := time.Now()
			<-deployImages
			if deployImagesErr != nil {
				t.Fatal(deployImagesErr)
			}
			if !kindRun { // kind's node has them from the suite's setup; the real node's containerd not yet
				for _, archive := range deployArchives {
					var err error
					if ctx, err = envfuncs.LoadImageArchiveToCluster(clusterName, archive)(ctx, cfg); err != nil {
						t.Fatal(err)
					}
				}
				t.Logf("%d images (built while the tests before ran) loaded in %s", len(deployArchives), time.Since(began).Round(time.Second))
			}
			installDatabaseCRD(ctx, t, cfg)
			installServiceMonitorCRD(ctx, t, cfg)
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			for _, ns := range []string{work, deployedNamespace} {
				_ = c.Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			}
			for _, p := range patterns {
				installPattern(ctx, t, cfg, p)
				removeWebhooks(ctx, t, cfg, p)
			}
			return ctx
		})
	f = f.Assess("an image pushed to a registry on this machine is pulled by the node and runs", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
		pulledFromRegistry(ctx, t, cfg)
		return ctx
	})
	for _, p := range patterns {
		f = f.Assess(p+" runs as a Pod on the real node and does its job", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := fastClient(t, cfg) // the load of the rolling restarts is not throttled on this side
			rendered := deploy(ctx, t, cfg, p, deployExtra[p]...)
			secretScope(ctx, t, c, p)
			deployedBehaviour[p](ctx, t, c, work)
			if slices.Contains(deployExtra[p], "--service-monitor") {
				scrapedThroughServiceMonitor(ctx, t, cfg, p, work)
			}
			if restart, ok := duringRollingRestart[p]; ok {
				restart(ctx, t, c, work)
			}
			undeploy(ctx, t, cfg, p, rendered)
			if p == chartPattern {
				installedByChart(ctx, t, cfg, p)
			}
			if p == bundlePattern {
				installedByBundle(ctx, t, cfg, p)
			}
			return ctx
		})
	}
	testEnv.Test(t, f.Feature())
}

// secretScope checks, with the API server's authorizer, that a deployed pattern's ServiceAccount
// cannot list the Secrets of its namespace (but secretWatchers), and that a webhook pattern (--certs=self) can list and
// watch its own certificate's Secret by name, as its cert rotation does.
func secretScope(ctx context.Context, t *testing.T, c client.Client, p string) {
	t.Helper()
	allowed := func(verb, name string) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + deployedNamespace + ":" + p,
			ResourceAttributes: &authorizationv1.ResourceAttributes{Namespace: deployedNamespace, Verb: verb, Resource: "secrets", Name: name}}}
		if err := c.Create(ctx, sar); err != nil {
			t.Fatal(err)
		}
		return sar.Status.Allowed
	}
	if !secretWatchers[p] && (allowed("list", "") || allowed("watch", "")) {
		t.Errorf("%s's ServiceAccount may list or watch every Secret of %s", p, deployedNamespace)
	}
	if webhookPatterns[p] && (!allowed("list", app.WebhookSecretName(p)) || !allowed("watch", app.WebhookSecretName(p))) {
		t.Errorf("%s's ServiceAccount may not list and watch its certificate's Secret %s by name", p, app.WebhookSecretName(p))
	}
}

// secretWatchers list and watch Secrets by design: reloader rolls workloads when data they read in
// a Secret changes, and multi runs reloader's controller.
var secretWatchers = map[string]bool{"reloader": true, "multi": true}

// deployImages is closed once the patterns' image archives for the real node are built, or failed
// to build: buildPatterns starts the build, which then runs while the tests before TestDeployed do.
var (
	deployImages    = make(chan struct{})
	deployArchives  []string
	deployImagesErr error
)

// buildDeployImages builds every pattern's image for this machine with e2e/cmd/image, as
// `go tool task image` does, into bins/images (its output in the run's logs).
func buildDeployImages() {
	defer close(deployImages)
	out := filepath.Join(bins, "images")
	args := append([]string{"run", "./e2e/cmd/image", "-tag", "e2e", "-platforms", "linux/" + runtime.GOARCH, "-out", out}, patterns...)
	log, err := os.Create(filepath.Join(logs, "images.log"))
	if err != nil {
		deployImagesErr = err
		return
	}
	defer func() { _ = log.Close() }()
	cmd := exec.Command("go", args...)
	cmd.Dir, cmd.Stdout, cmd.Stderr = root, log, log
	if err := cmd.Run(); err != nil {
		deployImagesErr = fmt.Errorf("building the images: %w (see %s)", err, log.Name())
		return
	}
	for _, p := range patterns {
		deployArchives = append(deployArchives, filepath.Join(out, p+"-linux-"+runtime.GOARCH+".tar"))
	}
}

// deployExtra are install flags of a pattern beyond --image: mirror runs a standby for its
// rolling restart and is scraped through its ServiceMonitor; sharding runs three active replicas.
var deployExtra = map[string][]string{"mirror": {"--replicas", "2", "--service-monitor"}, "sharding": {"--replicas", "3"}}

// duringRollingRestart checks a pattern through a rolling restart of its Deployment
// (`kubectl rollout restart`): a webhook pattern answers a steady stream of admission requests
// with none failed, a controller pattern loses no update to its sources.
var duringRollingRestart = map[string]func(ctx context.Context, t *testing.T, c client.Client, work string){
	"deploypolicy": func(ctx context.Context, t *testing.T, c client.Client, work string) {
		stop := admissionLoad(ctx, c, work)
		began := time.Now()
		rolloutRestart(ctx, t, c, "deploypolicy")
		took := time.Since(began)
		time.Sleep(2 * time.Second) // requests sent just after the old Pods went
		sent, failed, first := stop()
		t.Logf("deploypolicy rolling restart (%s): %d admission requests sent, %d failed", took.Round(100*time.Millisecond), sent, failed)
		if failed > 0 {
			t.Errorf("%d of %d admission requests failed during the rolling restart; the first: %v", failed, sent, first)
		}

		// A rotation: with the serving certificate gone from the Secret, cert-controller issues a new
		// one from the same CA, which reaches the Pods through their Secret volume and is served
		// without a restart, while requests go on.
		secret := &corev1.Secret{}
		key := client.ObjectKey{Namespace: deployedNamespace, Name: "deploypolicy-webhook-tls"}
		if err := c.Get(ctx, key, secret); err != nil {
			t.Fatal(err)
		}
		before := secret.Data[corev1.TLSCertKey]
		stop = admissionLoad(ctx, c, work)
		began = time.Now()
		delete(secret.Data, corev1.TLSCertKey)
		delete(secret.Data, corev1.TLSPrivateKeyKey)
		if err := c.Update(ctx, secret); err != nil {
			t.Fatal(err)
		}
		var leaf *x509.Certificate
		waitFor(t, "a new serving certificate in the Secret", func(ctx context.Context) (bool, error) {
			if err := c.Get(ctx, key, secret); err != nil {
				return false, err
			}
			cert := secret.Data[corev1.TLSCertKey]
			if len(cert) == 0 || bytes.Equal(cert, before) {
				return false, nil
			}
			block, _ := pem.Decode(cert)
			if block == nil {
				return false, fmt.Errorf("the Secret's %s is not PEM", corev1.TLSCertKey)
			}
			var err error
			leaf, err = x509.ParseCertificate(block.Bytes)
			return err == nil, err
		})
		waitFor(t, "every deploypolicy Pod serving the renewed certificate", func(ctx context.Context) (bool, error) {
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.InNamespace(deployedNamespace), client.MatchingLabels{"app.kubernetes.io/name": "deploypolicy"}); err != nil {
				return false, err
			}
			for _, pod := range pods.Items {
				served, err := servedCertificate(net.JoinHostPort(pod.Status.PodIP, "9443"))
				if err != nil || served.SerialNumber.Cmp(leaf.SerialNumber) != 0 {
					return false, nil
				}
			}
			return len(pods.Items) > 0, nil
		})
		took = time.Since(began)
		sent, failed, first = stop()
		t.Logf("deploypolicy certificate rotation, served by every Pod %s after the Secret lost it: %d admission requests sent, %d failed",
			took.Round(100*time.Millisecond), sent, failed)
		if failed > 0 {
			t.Errorf("%d of %d admission requests failed during the certificate rotation; the first: %v", failed, sent, first)
		}
	},
	"mirror": func(ctx context.Context, t *testing.T, c client.Client, work string) {
		const n = 10
		var srcs []*corev1.ConfigMap
		for i := range n {
			src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("rolling-%d", i), Namespace: work,
				Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"v": "0"}}
			if err := c.Create(ctx, src); err != nil {
				t.Fatal(err)
			}
			srcs = append(srcs, src)
		}
		stop := make(chan struct{})
		var updates int
		var writer sync.WaitGroup
		writer.Go(func() { // one source changed every 50 ms, round robin
			for i := 1; ; i++ {
				select {
				case <-stop:
					return
				case <-time.After(50 * time.Millisecond):
				}
				src := srcs[i%n]
				src.Data["v"] = strconv.Itoa(i)
				if err := c.Update(ctx, src); err != nil {
					t.Errorf("updating %s: %v", src.Name, err)
					return
				}
				updates++
			}
		})
		holders := watchLease(ctx, c, lease("mirror"))
		rolloutRestart(ctx, t, c, "mirror")
		waitFor(t, "a Pod of the new ReplicaSet holding the Lease", func(ctx context.Context) (bool, error) {
			l := &coordinationv1.Lease{}
			if err := c.Get(ctx, lease("mirror"), l); err != nil || l.Spec.HolderIdentity == nil {
				return false, client.IgnoreNotFound(err)
			}
			pods := &corev1.PodList{}
			if err := c.List(ctx, pods, client.InNamespace(deployedNamespace), client.MatchingLabels{"app.kubernetes.io/name": "mirror"}); err != nil {
				return false, err
			}
			return slices.ContainsFunc(pods.Items, func(p corev1.Pod) bool {
				return strings.HasPrefix(*l.Spec.HolderIdentity, p.Name+"_")
			}), nil
		})
		time.Sleep(time.Second) // updates after the new leader took over
		close(stop)
		writer.Wait()
		seen, handovers := holders()
		waitFor(t, "every child with its source's last data", func(ctx context.Context) (bool, error) {
			for _, src := range srcs {
				child := &corev1.ConfigMap{}
				if err := c.Get(ctx, client.ObjectKey{Namespace: work, Name: src.Name + "-mirror"}, child); err != nil {
					return false, client.IgnoreNotFound(err)
				}
				if child.Data["v"] != src.Data["v"] {
					return false, nil
				}
			}
			return true, nil
		})
		t.Logf("mirror rolling restart, 2 replicas: %d source updates, 0 lost; %d Lease holders in turn, handovers %v", updates, len(seen), handovers)
		for _, src := range srcs {
			if err := c.Delete(ctx, src); err != nil {
				t.Fatal(err)
			}
		}
	},
}

// admissionLoad sends 20 server dry-run creates of a Deployment a second into work (each in its own
// goroutine, each admitted by deploypolicy's webhooks) until the returned stop is called, which
// returns how many were sent and failed, and the first failure.
func admissionLoad(ctx context.Context, c client.Client, work string) (stop func() (sent, failed int64, first any)) {
	done := make(chan struct{})
	var nSent, nFailed atomic.Int64
	var firstErr atomic.Value
	var load sync.WaitGroup
	load.Go(func() {
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for i := 0; ; i++ {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			nSent.Add(1)
			load.Go(func() {
				if err := c.Create(ctx, deploymentUsing(work, fmt.Sprintf("load-%d", i), "none", false), client.DryRunAll); err != nil {
					nFailed.Add(1)
					firstErr.CompareAndSwap(nil, err.Error())
				}
			})
		}
	})
	return func() (int64, int64, any) {
		close(done)
		load.Wait()
		return nSent.Load(), nFailed.Load(), firstErr.Load()
	}
}

// servedCertificate is the certificate a TLS server at addr serves.
func servedCertificate(addr string) (*x509.Certificate, error) {
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: time.Second}, "tcp", addr, &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // reads the served certificate
	if err != nil {
		return nil, err
	}
	defer func() { _ = conn.Close() }()
	return conn.ConnectionState().PeerCertificates[0], nil
}

// lease is a pattern's leader-election Lease in deployedNamespace.
func lease(pattern string) client.ObjectKey {
	return client.ObjectKey{Namespace: deployedNamespace, Name: "kpatterns-" + pattern}
}

// watchLease polls a Lease every 100 ms until the returned function is called, which returns the
// holders seen in turn and each handover: the time from the last sight of one holder to the first
// of the next.
func watchLease(ctx context.Context, c client.Client, key client.ObjectKey) func() ([]string, []time.Duration) {
	type result struct {
		holders   []string
		handovers []time.Duration
	}
	done := make(chan result)
	stop := make(chan struct{})
	go func() {
		var r result
		var seen time.Time
		for {
			l := &coordinationv1.Lease{}
			if err := c.Get(ctx, key, l); err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				if h := *l.Spec.HolderIdentity; len(r.holders) == 0 || h != r.holders[len(r.holders)-1] {
					if len(r.holders) > 0 {
						r.handovers = append(r.handovers, time.Since(seen).Round(10*time.Millisecond))
					}
					r.holders = append(r.holders, h)
				}
				seen = time.Now()
			}
			select {
			case <-stop:
				done <- r
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return func() ([]string, []time.Duration) { close(stop); r := <-done; return r.holders, r.handovers }
}

// rolloutRestart restarts a Deployment in deployedNamespace as `kubectl rollout restart` does and
// waits until only its new Pods run, all Ready.
func rolloutRestart(ctx context.Context, t *testing.T, c client.Client, name string) {
	t.Helper()
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: deployedNamespace}}
	patch := fmt.Sprintf(`{"spec":{"template":{"metadata":{"annotations":{"kubectl.kubernetes.io/restartedAt":%q}}}}}`, time.Now().Format(time.RFC3339Nano))
	if err := c.Patch(ctx, d, client.RawPatch(types.StrategicMergePatchType, []byte(patch))); err != nil {
		t.Fatal(err)
	}
	waitRolledOut(t, c, d, 2*time.Minute)
}

// waitRolledOut waits, up to limit, until only the Pods of d's current template run, all Ready:
// its rollout done and no older Pod left, a terminating one included.
func waitRolledOut(t testing.TB, c client.Client, d *appsv1.Deployment, limit time.Duration) {
	t.Helper()
	err := pollUntil(d.Name+" rolled out", limit, func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKeyFromObject(d), d); err != nil {
			return false, err
		}
		pods, err := podsOf(ctx, c, d)
		if err != nil {
			return false, err
		}
		want := *d.Spec.Replicas
		return d.Status.ObservedGeneration == d.Generation && d.Status.UpdatedReplicas == want &&
			d.Status.ReadyReplicas == want && int32(len(pods)) == want, nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// podsOf are the Pods d's selector matches, terminating ones included.
func podsOf(ctx context.Context, c client.Client, d *appsv1.Deployment) ([]corev1.Pod, error) {
	pods := &corev1.PodList{}
	err := c.List(ctx, pods, client.InNamespace(d.Namespace), client.MatchingLabels(d.Spec.Selector.MatchLabels))
	return pods.Items, err
}

func deploy(ctx context.Context, t *testing.T, cfg *envconf.Config, p string, extra ...string) []*unstructured.Unstructured {
	t.Helper()
	bin := filepath.Join(bins, p)
	env := append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile(), "KPATTERNS_NAMESPACE="+deployedNamespace)
	args := append([]string{"--image", image(p)}, extra...) // no placement flags: kwok's node is the tainted one
	var rendered bytes.Buffer
	cmd := command(ctx, root, bin, append([]string{"manifests"}, args...)...)
	cmd.Env, cmd.Stdout = env, &rendered
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s manifests: %v", p, err)
	}
	cmd = command(ctx, root, bin, append([]string{"install"}, args...)...)
	cmd.Env = env
	if b, err := combined(cmd); err != nil {
		t.Fatalf("%s install --image: %v\n%s", p, err, b)
	}
	waitRunning(t, cfg, p)
	objs, err := decodeYAML(rendered.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// waitRunning waits for p's Deployment in deployedNamespace to have every replica Running and
// Ready, never restarted, none on kwok's node.
func waitRunning(t *testing.T, cfg *envconf.Config, p string) {
	waitRunningIn(t, cfg, deployedNamespace, p)
}

// waitRunningIn is waitRunning in namespace ns.
func waitRunningIn(t *testing.T, cfg *envconf.Config, ns, p string) {
	t.Helper()
	c := clientFor(t, cfg)
	d := &appsv1.Deployment{}
	waitFor(t, p+"'s Pods Running and Ready on the real node", func(ctx context.Context) (bool, error) {
		if err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: p}, d); err != nil {
			return false, err
		}
		if refused := refusedPods(ctx, t, c, ns); refused != "" {
			return false, errors.New(refused)
		}
		pods := &corev1.PodList{}
		if err := c.List(ctx, pods, client.InNamespace(ns), client.MatchingLabels(d.Spec.Selector.MatchLabels)); err != nil {
			return false, err
		}
		ready := 0
		for _, pod := range pods.Items {
			if pod.Spec.NodeName == localcluster.NodeName {
				return false, fmt.Errorf("Pod %s runs on kwok's node, which runs no container", pod.Name)
			}
			for _, cs := range pod.Status.ContainerStatuses {
				if cs.RestartCount > 0 {
					return false, fmt.Errorf("Pod %s restarted: %+v", pod.Name, cs.LastTerminationState)
				}
			}
			if pod.Status.Phase == corev1.PodRunning && podReady(&pod) {
				ready++
			}
		}
		return ready == int(*d.Spec.Replicas) && d.Status.ReadyReplicas == *d.Spec.Replicas, nil
	})
}

// combined runs cmd (from command) and returns its output and errors together.
func combined(cmd *exec.Cmd) ([]byte, error) {
	cmd.Stdout, cmd.Stderr = nil, nil
	return cmd.CombinedOutput()
}

func podReady(pod *corev1.Pod) bool {
	for _, c := range pod.Status.Conditions {
		if c.Type == corev1.PodReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// undeploy runs `uninstall` and checks that nothing it applied is left (nothingLeft).
func undeploy(ctx context.Context, t *testing.T, cfg *envconf.Config, p string, rendered []*unstructured.Unstructured) {
	t.Helper()
	cmd := command(ctx, root, filepath.Join(bins, p), "uninstall")
	cmd.Env = append(os.Environ(), "KUBECONFIG="+cfg.KubeconfigFile(), "KPATTERNS_NAMESPACE="+deployedNamespace)
	if b, err := combined(cmd); err != nil {
		t.Fatalf("%s uninstall: %v\n%s", p, err, b)
	}
	nothingLeft(t, cfg, p, rendered)
}

// nothingLeft waits until none of the rendered objects is left but the CRDs (uninstall deletes
// them only with --crds, helm never) and the namespace (other patterns may live there), and none
// of p's Pods.
func nothingLeft(t *testing.T, cfg *envconf.Config, p string, rendered []*unstructured.Unstructured) {
	t.Helper()
	c := clientFor(t, cfg)
	waitFor(t, p+": nothing installed is left", func(ctx context.Context) (bool, error) {
		var left []string
		for _, o := range rendered {
			if o.GetKind() == "CustomResourceDefinition" || o.GetKind() == "Namespace" {
				continue
			}
			got := &unstructured.Unstructured{}
			got.SetGroupVersionKind(o.GroupVersionKind())
			err := c.Get(ctx, client.ObjectKeyFromObject(o), got)
			if err == nil && got.GetDeletionTimestamp() == nil || err != nil && !apierrors.IsNotFound(err) {
				left = append(left, o.GetKind()+"/"+o.GetName())
			}
		}
		if len(left) > 0 {
			t.Logf("%s: still there: %v", p, left)
		}
		return len(left) == 0, nil
	})
	pods := &corev1.PodList{}
	waitFor(t, p+"'s Pods gone", func(ctx context.Context) (bool, error) {
		err := c.List(ctx, pods, client.InNamespace(deployedNamespace), client.MatchingLabels{"app.kubernetes.io/name": p})
		return err == nil && len(pods.Items) == 0, err
	})
}

func decodeYAML(b []byte) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(b), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if err.Error() == "EOF" {
				return out, nil
			}
			return nil, err
		}
		if len(u.Object) > 0 {
			out = append(out, u)
		}
	}
}

// deployedBehaviour is one real behaviour of each pattern, checked through the API server in the
// namespace work while the pattern runs as a Pod; each names its objects after its pattern.
var deployedBehaviour = map[string]func(ctx context.Context, t *testing.T, c client.Client, work string){
	"mirror": mirrored,
	"sharding": func(ctx context.Context, t *testing.T, c client.Client, work string) { // the ring: its three Pods
		var pods corev1.PodList
		waitFor(t, "the ring settled on sharding's three Pods", func(ctx context.Context) (bool, error) {
			if err := c.List(ctx, &pods, client.InNamespace(deployedNamespace), client.MatchingLabels{"app.kubernetes.io/name": "sharding"}); err != nil {
				return false, err
			}
			var members []string
			for _, p := range pods.Items {
				if p.DeletionTimestamp == nil {
					members = append(members, p.Name)
				}
			}
			return len(members) == 3 && ringSettled(ctx, c, deployedNamespace, members...) == nil, nil
		})
		mirrored(ctx, t, c, work)
	},
	"multi": func(ctx context.Context, t *testing.T, c client.Client, work string) { // three patterns, one process
		mirrored(ctx, t, c, work)
		reloaded(ctx, t, c, work)
		summarizedDeployed(ctx, t, c, work)
	},
	"widget": func(ctx context.Context, t *testing.T, c client.Client, work string) {
		w := &widgetv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "widget", Namespace: work},
			Spec: widgetv1.WidgetSpec{Image: "nginx:1.27", Replicas: ptr.To[int32](1)}}
		if err := c.Create(ctx, w); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the Widget Ready (its ConfigMap, Deployment and Service)", func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(w), w)
			return err == nil && meta.IsStatusConditionTrue(w.Status.Conditions, "Ready"), err
		})
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: widget.PolicyConfigMap, Namespace: work},
			Data: map[string]string{widget.AllowedImagesKey: "nginx:"}}); err != nil {
			t.Fatal(err)
		}
		outlaw := &widgetv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "outlaw", Namespace: work}, Spec: widgetv1.WidgetSpec{Image: "busybox:1.36"}}
		testenv.Denied(t, c.Create(ctx, outlaw), "is not allowed by ConfigMap widget-policy")
	},
	"conditional": func(ctx context.Context, t *testing.T, c client.Client, work string) {
		p := &conditionalv1.ConfigProfile{ObjectMeta: metav1.ObjectMeta{Name: "conditional", Namespace: work},
			Spec: conditionalv1.ConfigProfileSpec{Image: "nginx:1.27", Environment: "staging"}}
		if err := c.Create(ctx, p); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the ConfigProfile Ready", func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(p), p)
			return err == nil && meta.IsStatusConditionTrue(p.Status.Conditions, "Ready"), err
		})
	},
	"reloader": reloaded,
	"summary":  summarizedDeployed,
	"childset": func(ctx context.Context, t *testing.T, c client.Client, work string) {
		b := &childsetv1.Bundle{ObjectMeta: metav1.ObjectMeta{Name: "childset", Namespace: work},
			Spec: childsetv1.BundleSpec{Entries: map[string]string{"a": "1", "b": "2"}}}
		if err := c.Create(ctx, b); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "one ConfigMap per entry", func(ctx context.Context) (bool, error) {
			list := &corev1.ConfigMapList{}
			err := c.List(ctx, list, client.InNamespace(work), client.MatchingLabels{childset.BundleUIDLabel: string(b.UID)})
			return err == nil && len(list.Items) == 2, err
		})
	},
	"finalizers": func(ctx context.Context, t *testing.T, c client.Client, work string) {
		serverObject(ctx, t, c, deployedNamespace, work, hostIPForPods(t)) // the Pod reaches the host's server there
		db := pgDatabase(work, "deployed")
		if err := c.Create(ctx, db); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the database created, under the finalizer", func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(db), db)
			return err == nil && db.Status.ExternalName != "" && slices.Contains(db.Finalizers, finalizers.Finalizer), err
		})
		if left := ownedIn(t, work); len(left) != 1 {
			t.Errorf("on the server: %v, want the one database", left)
		}
		if err := c.Delete(ctx, db); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the database dropped and the object gone", func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKeyFromObject(db), db)
			return apierrors.IsNotFound(err) && len(ownedIn(t, work)) == 0, client.IgnoreNotFound(err)
		})
	},
	"lifespan": func(ctx context.Context, t *testing.T, c client.Client, _ string) {
		waitFor(t, "the leader's term in the Heartbeat", func(ctx context.Context) (bool, error) {
			hb := &lifespanv1.Heartbeat{}
			err := c.Get(ctx, client.ObjectKey{Namespace: deployedNamespace, Name: lifespan.Name}, hb)
			return err == nil && hb.Current() != nil && strings.HasPrefix(hb.Current().Holder, "lifespan-"), client.IgnoreNotFound(err)
		})
	},
	"deploypolicy": func(ctx context.Context, t *testing.T, c client.Client, work string) {
		if err := c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: deploypolicy.PolicyConfigMap, Namespace: work},
			Data: map[string]string{deploypolicy.MaxReplicasKey: "1"}}); err != nil {
			t.Fatal(err)
		}
		d := deploymentUsing(work, "too-many", "none", false)
		d.Spec.Replicas = ptr.To[int32](3)
		testenv.Denied(t, c.Create(ctx, d, client.DryRunAll), "namespace policy allows at most 1 replicas")
	},
	"dbpolicy": func(ctx context.Context, t *testing.T, c client.Client, work string) {
		db := &unstructured.Unstructured{Object: map[string]any{"spec": map[string]any{"engine": "postgres", "version": "16.2"}}}
		db.SetGroupVersionKind(dbpolicy.DatabaseGVK)
		db.SetNamespace(work)
		db.SetName("orders")
		testenv.Denied(t, c.Create(ctx, db, client.DryRunAll), "spec.storageGiB: Required value")
	},
	"podpolicy": func(ctx context.Context, t *testing.T, c client.Client, work string) {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: work}}
		label := func(v string) {
			patch := fmt.Sprintf(`{"metadata":{"labels":{%q:%s,%q:%s}}}`, podpolicy.EnforceLabel, v, podpolicy.AllowPodsLabel, v)
			if err := c.Patch(ctx, ns, client.RawPatch(types.MergePatchType, []byte(patch))); err != nil {
				t.Fatal(err)
			}
		}
		label(`"true"`)
		defer label("null")
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "privileged", Namespace: work},
			Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx:1.27",
				SecurityContext: &corev1.SecurityContext{Privileged: ptr.To(true)}}}}}
		// The webhook reads the labels from its informer cache, which sees the patch a moment later.
		var err error
		waitFor(t, "the privileged Pod denied", func(ctx context.Context) (bool, error) {
			err = c.Create(ctx, pod.DeepCopy(), client.DryRunAll)
			return err != nil, nil
		})
		testenv.Denied(t, err, "container c is privileged")
	},
}

func mirrored(ctx context.Context, t *testing.T, c client.Client, work string) {
	name := envconf.RandomName("src", 10)
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: work,
		Labels: map[string]string{mirror.Label: mirror.Source}}, Data: map[string]string{"k": "v"}}
	if err := c.Create(ctx, src); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the mirror child", func(ctx context.Context) (bool, error) {
		child := &corev1.ConfigMap{}
		err := c.Get(ctx, client.ObjectKey{Namespace: work, Name: name + "-mirror"}, child)
		return err == nil && child.Data["k"] == "v", client.IgnoreNotFound(err)
	})
	if err := c.Delete(ctx, src); err != nil { // its child goes with it (garbage collection)
		t.Fatal(err)
	}
}

func reloaded(ctx context.Context, t *testing.T, c client.Client, work string) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: envconf.RandomName("reloaded", 14), Namespace: work}, Data: map[string]string{"v": "1"}}
	if err := c.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
	d := deploymentUsing(work, cm.Name, cm.Name, true)
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	annotation := func(ctx context.Context) (string, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(d), d)
		return d.Annotations[reloader.DigestsAnnotation], err
	}
	var before string
	waitFor(t, "the Deployment's digests recorded", func(ctx context.Context) (bool, error) {
		var err error
		before, err = annotation(ctx)
		return before != "", err
	})
	cm.Data["v"] = "2"
	if err := c.Update(ctx, cm); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Deployment rolled for the new data", func(ctx context.Context) (bool, error) {
		after, err := annotation(ctx)
		return after != "" && after != before, err
	})
	if err := c.Delete(ctx, d); err != nil {
		t.Fatal(err)
	}
}

func summarizedDeployed(ctx context.Context, t *testing.T, c client.Client, work string) {
	name := envconf.RandomName("summarized", 14)
	d := deploymentUsing(work, name, "none", false)
	d.Spec.Template.Spec.Containers[0].EnvFrom = nil
	d.Spec.Replicas = ptr.To[int32](2)
	if err := c.Create(ctx, d); err != nil {
		t.Fatal(err)
	}
	w := &summaryv1.Workload{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: work},
		Spec: summaryv1.WorkloadSpec{Selector: map[string]string{"app": name}}}
	if err := c.Create(ctx, w); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the Workload counts 2 Ready Pods", func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, client.ObjectKeyFromObject(w), w)
		return err == nil && w.Status.Total == 2 && w.Status.Ready == 2, err
	})
	for _, o := range []client.Object{w, d} {
		if err := c.Delete(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
}

// refusedPods describes the FailedCreate events of ns ("" if none).
func refusedPods(ctx context.Context, t *testing.T, c client.Client, ns string) string {
	t.Helper()
	events := &corev1.EventList{}
	if err := c.List(ctx, events, client.InNamespace(ns)); err != nil {
		t.Fatal(err)
	}
	var refused []string
	for _, e := range events.Items {
		if e.Reason == "FailedCreate" || strings.Contains(e.Message, "violates PodSecurity") {
			refused = append(refused, e.InvolvedObject.Name+": "+e.Message)
		}
	}
	return strings.Join(refused, "\n")
}
