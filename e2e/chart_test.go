// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"bytes"
	"context"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/yaml"

	"github.com/kpatterns/kpatterns/shared/app"
	"github.com/kpatterns/kpatterns/shared/testenv"
	widgetv1 "github.com/kpatterns/kpatterns/widget/api/v1alpha1"
)

// chartNamespace is the release namespace the chart tests render and install into.
const chartNamespace = "kpatterns-chart"

// TestChart checks every pattern's Helm chart with Helm's own CLI (helm.sh/helm/v4, a tool of
// tools/helm): helm lint passes; helm template renders, with the chart's default values, what
// `manifests` renders with the flags the chart was made with, and with values set what
// `manifests` renders with the matching flags; a value the schema refuses fails with its name.
func TestChart(t *testing.T) {
	helm := helmBinary(t)
	ctx := t.Context()
	for _, p := range patterns {
		t.Run(p, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), p)
			if b, err := combined(command(ctx, root, filepath.Join(bins, p), "chart", "--dir", dir, "--image", image(p))); err != nil {
				t.Fatalf("%s chart: %v\n%s", p, err, b)
			}
			if b, err := combined(command(ctx, root, helm, "lint", "--strict", dir)); err != nil {
				t.Fatalf("helm lint: %v\n%s", err, b)
			}
			values := map[string]any{}
			if b, err := os.ReadFile(filepath.Join(dir, "values.yaml")); err != nil || yaml.Unmarshal(b, &values) != nil {
				t.Fatalf("values.yaml: %v", err)
			}
			_, hooks := values["certs"]
			_, policies := values["admission"]
			// Each case: the flags of manifests, and the values that ask for the same.
			cases := [][2][]string{{nil, nil}, {
				{"--replicas", "3", "--watch-namespaces", "team-a,team-b", "--service-monitor", "--network-policies=false",
					"--node-selector", "disk=ssd", "--tolerations", "dedicated=ops:NoSchedule",
					"--cpu-request", "50m", "--memory-request", "100Mi", "--memory-limit", "300Mi"},
				{"--set", "replicas=3,watchNamespaces={team-a,team-b},serviceMonitor=true,networkPolicies=false,nodeSelector.disk=ssd",
					"--set-json", `tolerations=[{"key":"dedicated","operator":"Equal","value":"ops","effect":"NoSchedule"}]`,
					"--set", "resources.requests.cpu=50m,resources.requests.memory=100Mi,resources.limits.memory=300Mi"},
			}}
			if hooks {
				cases = append(cases, [2][]string{{"--certs", "cert-manager", "--replicas", "1"}, {"--set", "certs=cert-manager,replicas=1"}})
			}
			if policies {
				cases = append(cases,
					[2][]string{{"--admission", "policy"}, {"--set", "admission=policy"}},
					[2][]string{{"--admission", "both", "--certs", "cert-manager"}, {"--set", "admission=both,certs=cert-manager"}})
			}
			if with, ok := values["with"].(map[string]any); ok { // the pattern's optional features
				for _, name := range slices.Sorted(maps.Keys(with)) {
					cases = append(cases, [2][]string{{"--with", name}, {"--set", "with." + name + "=true"}})
				}
			}
			for _, c := range cases {
				manifests := renderManifests(ctx, t, p, c[0]...)
				chart := helmTemplate(ctx, t, helm, dir, c[1]...)
				if diff := cmp.Diff(manifests, chart); diff != "" {
					t.Errorf("manifests %v and the chart with %v differ (-manifests +chart):\n%s", c[0], c[1], diff)
				}
			}
			b, err := combined(command(ctx, root, helm, "template", "r", dir, "--set", "replicas=-1"))
			if err == nil || !strings.Contains(string(b), "replicas") {
				t.Errorf("helm template --set replicas=-1: want the schema's refusal naming replicas, got %v:\n%s", err, b)
			}
		})
	}
}

// helmBinary is Helm's CLI built from its module (tools/helm): go tool builds it once and caches it.
func helmBinary(t *testing.T) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), "go", "tool", "-n", "helm")
	cmd.Dir, cmd.Env = filepath.Join(root, "tools", "helm"), append(os.Environ(), "GOWORK=off")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("building helm (tools/helm): %v", err)
	}
	return strings.TrimSpace(string(out))
}

// renderManifests is what `p manifests --image image(p) flags` prints for chartNamespace, by
// object, without the Namespace (which helm install --create-namespace makes).
func renderManifests(ctx context.Context, t *testing.T, p string, flags ...string) map[string]map[string]any {
	t.Helper()
	cmd := command(ctx, root, filepath.Join(bins, p), append([]string{"manifests", "--image", image(p)}, flags...)...)
	var out bytes.Buffer
	cmd.Env, cmd.Stdout = append(os.Environ(), "KPATTERNS_NAMESPACE="+chartNamespace), &out
	if err := cmd.Run(); err != nil {
		t.Fatalf("%s manifests %v: %v", p, flags, err)
	}
	return byObject(t, out.Bytes(), "Namespace")
}

// helmTemplate is what helm template renders of the chart in dir for chartNamespace, CRDs
// included, by object.
func helmTemplate(ctx context.Context, t *testing.T, helm, dir string, args ...string) map[string]map[string]any {
	t.Helper()
	cmd := command(ctx, root, helm, append([]string{"template", "r", dir, "--namespace", chartNamespace, "--include-crds"}, args...)...)
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template %v: %v\n%s", args, err, errs.Bytes())
	}
	return byObject(t, out.Bytes())
}

func byObject(t *testing.T, b []byte, skipKinds ...string) map[string]map[string]any {
	t.Helper()
	objs, err := decodeYAML(b)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]map[string]any{}
	for _, o := range objs {
		if slices.Contains(skipKinds, o.GetKind()) {
			continue
		}
		out[objectKey(o)] = o.Object
	}
	return out
}

func objectKey(o *unstructured.Unstructured) string {
	return o.GetKind() + " " + o.GetNamespace() + "/" + o.GetName()
}

// chartPattern is the pattern the deploy tier also installs with its Helm chart: a CRD, webhooks
// with the certificate it keeps itself, two replicas and a PodDisruptionBudget. (The upgrade's
// admission check is widget's.)
const chartPattern = "widget"

// installedByChart installs p's chart (default values, its e2e image) with helm install into
// deployedNamespace, where p was installed and uninstalled before; checks that its Pods run and
// it does its job, in a namespace of its own; and that helm uninstall leaves nothing the chart
// rendered but the CRDs.
func installedByChart(ctx context.Context, t *testing.T, cfg *envconf.Config, p string) {
	t.Helper()
	helm := helmBinary(t)
	dir := filepath.Join(t.TempDir(), p)
	if b, err := combined(command(ctx, root, filepath.Join(bins, p), "chart", "--dir", dir, "--image", image(p))); err != nil {
		t.Fatalf("%s chart: %v\n%s", p, err, b)
	}
	var rendered bytes.Buffer
	cmd := command(ctx, root, helm, "template", "kpatterns-"+p, dir, "--namespace", deployedNamespace, "--include-crds")
	cmd.Stdout = &rendered
	if err := cmd.Run(); err != nil {
		t.Fatalf("helm template: %v", err)
	}
	objs, err := decodeYAML(rendered.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	helmCmd := func(args ...string) {
		t.Helper()
		args = append(args, "--kubeconfig", cfg.KubeconfigFile(), "--namespace", deployedNamespace)
		if b, err := combined(command(ctx, root, helm, args...)); err != nil {
			t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	began := time.Now()
	helmCmd("install", "kpatterns-"+p, dir)
	waitRunning(t, cfg, p)
	t.Logf("%s installed by helm install of its chart (%d objects, its CRDs in crds/): Pods ready in %s", p, len(objs), time.Since(began).Round(time.Second))
	work := "e2e-chart"
	c := clientFor(t, cfg)
	if err := c.Create(ctx, testNamespace(work)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Delete(ctx, testNamespace(work)) }()
	deployedBehaviour[p](ctx, t, fastClient(t, cfg), work)

	// An upgrade that changes a value keeps what the Pods made at run time: the certificate in
	// the Secret and the CA in the webhook configurations (the chart renders neither), so the new
	// replica serves at once and admission keeps working.
	secret := &corev1.Secret{}
	key := client.ObjectKey{Namespace: deployedNamespace, Name: app.WebhookSecretName(p)}
	if err := c.Get(ctx, key, secret); err != nil {
		t.Fatal(err)
	}
	helmCmd("upgrade", "kpatterns-"+p, dir, "--set", "replicas=3")
	waitRunning(t, cfg, p)
	upgraded := &corev1.Secret{}
	if err := c.Get(ctx, key, upgraded); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(secret.Data[corev1.TLSCertKey], upgraded.Data[corev1.TLSCertKey]) || len(upgraded.Data[corev1.TLSCertKey]) == 0 {
		t.Fatalf("helm upgrade replaced or emptied the serving certificate in %s", key)
	}
	outlaw := &widgetv1.Widget{ObjectMeta: metav1.ObjectMeta{Name: "outlaw-after-upgrade", Namespace: work}, Spec: widgetv1.WidgetSpec{Image: "busybox:1.36"}}
	testenv.Denied(t, c.Create(ctx, outlaw), "is not allowed by ConfigMap widget-policy") // the policy deployedBehaviour made
	t.Logf("%s upgraded to 3 replicas with helm upgrade: the certificate kept, admission working", p)
	helmCmd("uninstall", "kpatterns-"+p, "--wait")
	nothingLeft(t, cfg, p, objs)
	t.Logf("%s did its job installed by the chart; helm uninstall left nothing but its CRDs", p)
}

// bundlePattern is installed once more, on kind, from the one-file bundle `go tool task
// build-installer` writes, into a namespace of its own (the bundle's Namespace, which
// `kubectl delete -f` deletes with the rest).
const bundlePattern, bundleNamespace = "summary", "kpatterns-bundle"

// installedByBundle writes p's install bundle with `go tool task build-installer`, applies it with
// `kubectl apply -f` (the kubectl of kind's node, with its admin kubeconfig), checks that its
// Pods run and it does its job, then deletes it with `kubectl delete -f`: nothing the bundle
// holds is left, its CRDs and Namespace included.
func installedByBundle(ctx context.Context, t *testing.T, cfg *envconf.Config, p string) {
	t.Helper()
	if !kindRun {
		t.Logf("the install bundle is applied by kind's kubectl: not on the local cluster")
		return
	}
	dist := t.TempDir()
	cmd := command(ctx, root, "go", "tool", "task", "build-installer", "PATTERN="+p, "IMAGE="+image(p),
		"NAMESPACE="+bundleNamespace, "DIST="+dist)
	if b, err := combined(cmd); err != nil {
		t.Fatalf("build-installer: %v\n%s", err, b)
	}
	bundle, err := os.ReadFile(filepath.Join(dist, p+"-install.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	objs, err := decodeYAML(bundle)
	if err != nil {
		t.Fatal(err)
	}
	kubectl := func(args ...string) {
		t.Helper()
		cmd := command(ctx, root, "docker", append([]string{"exec", "-i", clusterName + "-control-plane",
			"kubectl", "--kubeconfig", "/etc/kubernetes/admin.conf"}, args...)...)
		cmd.Stdin = bytes.NewReader(bundle)
		b, err := combined(cmd)
		if err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, b)
		}
	}
	began := time.Now()
	kubectl("apply", "-f", "-")
	waitRunningIn(t, cfg, bundleNamespace, p)
	t.Logf("%s installed by kubectl apply -f of its bundle (%d objects): Pods ready in %s", p, len(objs), time.Since(began).Round(time.Second))
	work := "e2e-bundle"
	c := clientFor(t, cfg)
	if err := c.Create(ctx, testNamespace(work)); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Delete(ctx, testNamespace(work)) }()
	deployedBehaviour[p](ctx, t, fastClient(t, cfg), work)
	kubectl("delete", "-f", "-") // waits until each object is gone
	var left []string
	for _, o := range objs {
		got := &unstructured.Unstructured{}
		got.SetGroupVersionKind(o.GroupVersionKind())
		if err := c.Get(ctx, client.ObjectKeyFromObject(o), got); !apierrors.IsNotFound(err) {
			left = append(left, fmt.Sprintf("%s/%s (%v)", o.GetKind(), o.GetName(), err))
		}
	}
	if len(left) > 0 {
		t.Fatalf("kubectl delete -f of the bundle left %v", left)
	}
	t.Logf("%s did its job installed by its bundle; kubectl delete -f left nothing", p)
}
