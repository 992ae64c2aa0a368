// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app_test

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/app"
)

const roleYAML = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: demo
rules:
- apiGroups: [""]
  resources: [configmaps]
  verbs: [get, list, watch]
`

var pattern = app.Pattern{
	Name:   "demo",
	Config: fstest.MapFS{"rbac/role.yaml": {Data: []byte(roleYAML)}},
}

// run is a pattern's run that builds no manager: these tests stop before it.
func run(context.Context, *rest.Config, app.RunOptions) error { return errors.New("run reached") }

func kinds(objs []client.Object) []string {
	var out []string
	for _, o := range objs {
		out = append(out, o.GetObjectKind().GroupVersionKind().Kind+" "+o.GetNamespace()+"/"+o.GetName())
	}
	return out
}

func TestObjectsClusterWide(t *testing.T) {
	objs, err := app.Objects(pattern, app.Options{Namespace: "ops"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Namespace /ops", // Pod Security "restricted"; install leaves an existing one as it is
		"ServiceAccount ops/demo",
		"ClusterRole /kpatterns-demo", "ClusterRoleBinding /kpatterns-demo",
		"Role ops/kpatterns-demo-leader-election", "RoleBinding ops/kpatterns-demo-leader-election",
		"ClusterRole /kpatterns-demo-metrics-auth", "ClusterRoleBinding /kpatterns-demo-metrics-auth",
		"ClusterRole /kpatterns-demo-metrics-reader",
	}
	if d := cmp.Diff(want, kinds(objs)); d != "" {
		t.Fatalf("objects (-want +got):\n%s", d)
	}
	if ns := objs[0].(*corev1.Namespace); ns.Labels["pod-security.kubernetes.io/enforce"] != "restricted" {
		t.Errorf("namespace labels = %v, want Pod Security restricted enforced", ns.Labels)
	}
	role := objs[2].(*rbacv1.ClusterRole)
	if len(role.Rules) != 1 || role.Rules[0].Resources[0] != "configmaps" {
		t.Fatalf("ClusterRole rules = %+v, want the generated ones", role.Rules)
	}
	binding := objs[3].(*rbacv1.ClusterRoleBinding)
	if s := binding.Subjects[0]; s.Kind != "ServiceAccount" || s.Name != "demo" || s.Namespace != "ops" {
		t.Fatalf("binding subject = %+v", s)
	}
}

func TestObjectsWatchNamespacesUseRoles(t *testing.T) {
	objs, err := app.Objects(pattern, app.Options{Namespace: "ops", WatchNamespaces: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"Namespace /ops", "ServiceAccount ops/demo",
		"Role a/kpatterns-demo", "RoleBinding a/kpatterns-demo",
		"Role b/kpatterns-demo", "RoleBinding b/kpatterns-demo",
		"Role ops/kpatterns-demo-leader-election", "RoleBinding ops/kpatterns-demo-leader-election",
		// Token and access reviews are cluster-scoped: the metrics RBAC stays a ClusterRole.
		"ClusterRole /kpatterns-demo-metrics-auth", "ClusterRoleBinding /kpatterns-demo-metrics-auth",
		"ClusterRole /kpatterns-demo-metrics-reader",
	}
	if d := cmp.Diff(want, kinds(objs)); d != "" {
		t.Fatalf("objects (-want +got):\n%s", d)
	}
}

// Rules on a cluster-scoped kind of the pattern, and on Namespaces, stay in a ClusterRole when
// namespaces are watched (a Role cannot grant them); rules marked namespace=system hold in the operator
// namespace only, in a Role of their own. The kind's user roles aggregate into view only.
func TestObjectsClusterScopedAndOperatorRules(t *testing.T) {
	p := app.Pattern{Name: "demo", Config: fstest.MapFS{
		"crd/servers.yaml": {Data: []byte(strings.NewReplacer("gadget", "server", "Gadget", "Server", "Namespaced", "Cluster").Replace(crdYAML))},
		"rbac/role.yaml": {Data: []byte(roleYAML + `- apiGroups: [example.kpatterns.dev]
  resources: [gadgets, servers, servers/status]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [namespaces]
  resourceNames: [kube-system]
  verbs: [get]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata: {name: demo, namespace: system}
rules:
- apiGroups: [""]
  resources: [secrets]
  verbs: [get]
`)}}}
	objs, err := app.Objects(p, app.Options{Namespace: "ops", WatchNamespaces: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"CustomResourceDefinition /servers.example.kpatterns.dev",
		"ClusterRole /kpatterns-demo-servers-admin", "ClusterRole /kpatterns-demo-servers-editor", "ClusterRole /kpatterns-demo-servers-viewer",
		"Namespace /ops", "ServiceAccount ops/demo",
		"ClusterRole /kpatterns-demo", "ClusterRoleBinding /kpatterns-demo",
		"Role a/kpatterns-demo", "RoleBinding a/kpatterns-demo",
		"Role ops/kpatterns-demo-operator", "RoleBinding ops/kpatterns-demo-operator",
		"Role ops/kpatterns-demo-leader-election", "RoleBinding ops/kpatterns-demo-leader-election",
		"ClusterRole /kpatterns-demo-metrics-auth", "ClusterRoleBinding /kpatterns-demo-metrics-auth",
		"ClusterRole /kpatterns-demo-metrics-reader",
	}
	if d := cmp.Diff(want, kinds(objs)); d != "" {
		t.Fatalf("objects (-want +got):\n%s", d)
	}
	rules := map[string][]rbacv1.PolicyRule{}
	for _, i := range []int{6, 8, 10} {
		switch o := objs[i].(type) {
		case *rbacv1.ClusterRole:
			rules[kinds(objs)[i]] = o.Rules
		case *rbacv1.Role:
			rules[kinds(objs)[i]] = o.Rules
		}
	}
	rule := func(group, verbs string, resources ...string) rbacv1.PolicyRule {
		return rbacv1.PolicyRule{APIGroups: []string{group}, Resources: resources, Verbs: strings.Split(verbs, ",")}
	}
	wantRules := map[string][]rbacv1.PolicyRule{
		"ClusterRole /kpatterns-demo": {rule("example.kpatterns.dev", "list,watch", "servers", "servers/status"),
			{APIGroups: []string{""}, Resources: []string{"namespaces"}, ResourceNames: []string{"kube-system"}, Verbs: []string{"get"}}},
		"Role a/kpatterns-demo":            {rule("", "get,list,watch", "configmaps"), rule("example.kpatterns.dev", "list,watch", "gadgets")},
		"Role ops/kpatterns-demo-operator": {rule("", "get", "secrets")},
	}
	if d := cmp.Diff(wantRules, rules); d != "" {
		t.Fatalf("rules (-want +got):\n%s", d)
	}
	for i, want := range []string{"", "", "view"} {
		var got []string
		for k := range objs[1+i].GetLabels() {
			if a, ok := strings.CutPrefix(k, "rbac.authorization.k8s.io/aggregate-to-"); ok {
				got = append(got, a)
			}
		}
		if strings.Join(got, ",") != want {
			t.Errorf("%s aggregates to %q, want %q", objs[1+i].GetName(), got, want)
		}
	}
}

func TestDeploymentIsRestricted(t *testing.T) {
	objs, err := app.Objects(pattern, app.Options{Namespace: "ops", Image: "example/demo:1", Command: "/bin/demo --v=2",
		WatchNamespaces: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	d, ok := objs[len(objs)-1].(*appsv1.Deployment)
	if !ok {
		t.Fatalf("last object is %T, want a Deployment", objs[len(objs)-1])
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	if d := cmp.Diff([]string{"/bin/demo", "--v=2"}, c.Command); d != "" {
		t.Errorf("command (-want +got): %s", d)
	}
	if d := cmp.Diff([]string{"run", "--watch-namespaces=a"}, c.Args); d != "" {
		t.Errorf("args (-want +got): %s", d)
	}
	limitFrom := &corev1.ResourceFieldSelector{ContainerName: "manager", Resource: "limits.memory"}
	if !slices.ContainsFunc(c.Env, func(e corev1.EnvVar) bool {
		return e.Name == app.MemoryLimitEnv && e.ValueFrom != nil && cmp.Equal(e.ValueFrom.ResourceFieldRef, limitFrom)
	}) || c.Resources.Limits.Memory().String() != "256Mi" {
		t.Errorf("env %+v, limits %v: want %s from limits.memory (256Mi)", c.Env, c.Resources.Limits, app.MemoryLimitEnv)
	}
	sc := c.SecurityContext
	switch {
	case pod.ServiceAccountName != "demo":
		t.Errorf("serviceAccountName = %q", pod.ServiceAccountName)
	case sc.RunAsNonRoot == nil || !*sc.RunAsNonRoot, pod.SecurityContext.RunAsNonRoot == nil || !*pod.SecurityContext.RunAsNonRoot:
		t.Error("runAsNonRoot not set")
	case sc.AllowPrivilegeEscalation == nil || *sc.AllowPrivilegeEscalation:
		t.Error("privilege escalation allowed")
	case sc.ReadOnlyRootFilesystem == nil || !*sc.ReadOnlyRootFilesystem:
		t.Error("root filesystem writable")
	case len(sc.Capabilities.Drop) != 1 || sc.Capabilities.Drop[0] != "ALL":
		t.Errorf("capabilities drop = %v", sc.Capabilities.Drop)
	case sc.SeccompProfile == nil || sc.SeccompProfile.Type != "RuntimeDefault":
		t.Error("seccomp profile not RuntimeDefault")
	case c.LivenessProbe.HTTPGet.Path != "/healthz" || c.ReadinessProbe.HTTPGet.Path != "/readyz" || c.Ports[0].ContainerPort != 8081:
		t.Error("probes are not /healthz and /readyz on :8081")
	}
	objs, _ = app.Objects(pattern, app.Options{Namespace: "ops", Image: "example/demo:1"})
	if got := objs[len(objs)-1].(*appsv1.Deployment).Spec.Template.Spec.Containers[0].Command; !cmp.Equal(got, []string{"/manager"}) {
		t.Errorf("default command = %v, want the image's binary /manager", got)
	}
}

// Pods are placed only where the flags say: by default no nodeSelector and no toleration, so
// nothing that only a test cluster needs is rendered; bad values are refused before anything runs.
func TestPlacementFlags(t *testing.T) {
	pod := func(args ...string) (corev1.PodSpec, error) {
		var out bytes.Buffer
		err := app.Execute(context.Background(), pattern, run, nil, append([]string{"manifests", "--image", "x/y:1"}, args...), &out, &bytes.Buffer{})
		if err != nil {
			return corev1.PodSpec{}, err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(&out, 4096)
		for {
			d := &appsv1.Deployment{}
			if err := dec.Decode(d); err != nil {
				return corev1.PodSpec{}, fmt.Errorf("no Deployment rendered: %w", err)
			}
			if d.Kind == "Deployment" {
				return d.Spec.Template.Spec, nil
			}
		}
	}
	spec, err := pod()
	if err != nil || spec.NodeSelector != nil || spec.Tolerations != nil {
		t.Fatalf("default: nodeSelector %v, tolerations %v, err %v; want none", spec.NodeSelector, spec.Tolerations, err)
	}
	spec, err = pod("--node-selector", "pool=ops,zone=a", "--tolerations", "dedicated=ops:NoSchedule,gpu:NoExecute")
	if err != nil {
		t.Fatal(err)
	}
	want := []corev1.Toleration{{Key: "dedicated", Operator: corev1.TolerationOpEqual, Value: "ops", Effect: corev1.TaintEffectNoSchedule},
		{Key: "gpu", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute}}
	if d := cmp.Diff(want, spec.Tolerations); d != "" {
		t.Errorf("tolerations (-want +got):\n%s", d)
	}
	if d := cmp.Diff(map[string]string{"pool": "ops", "zone": "a"}, spec.NodeSelector); d != "" {
		t.Errorf("nodeSelector (-want +got):\n%s", d)
	}
	for _, bad := range [][]string{{"--node-selector", "pool"}, {"--node-selector", "a=b=c"}, {"--tolerations", "dedicated=ops"},
		{"--tolerations", "dedicated=ops:Sometimes"}, {"--tolerations", "=ops:NoSchedule"}, {"--tolerations", "bad key:NoSchedule"}} {
		if _, err := pod(bad...); err == nil {
			t.Errorf("%v accepted", bad)
		}
	}
}

func TestManifestsPrintsParsableYAML(t *testing.T) {
	kinds := func(args ...string) []string {
		t.Helper()
		var out bytes.Buffer
		if err := app.Execute(context.Background(), pattern, run, nil, append([]string{"manifests", "--image", "x/y:1"}, args...), &out, os.Stderr); err != nil {
			t.Fatal(err)
		}
		return decodeKinds(t, &out)
	}
	rbac := []string{"ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding",
		"ClusterRole", "ClusterRoleBinding", "ClusterRole"} // metrics auth, reader
	for _, c := range []struct {
		args []string
		want []string
	}{
		{nil, append(rbac, "Service", "NetworkPolicy", "Deployment")},
		{[]string{"--service-monitor", "--network-policies=false"}, append(rbac, "Service", "ServiceMonitor", "Deployment")},
	} {
		if d := cmp.Diff(c.want, kinds(c.args...)); d != "" {
			t.Errorf("%v: kinds (-want +got):\n%s", c.args, d)
		}
	}
}

// decodeKinds reads a multi-document YAML stream: the kinds in order; no object carries a status.
func decodeKinds(t *testing.T, out *bytes.Buffer) []string {
	t.Helper()
	dec := utilyaml.NewYAMLOrJSONDecoder(out, 4096)
	var got []string
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			break
		}
		if u.Object == nil {
			continue
		}
		got = append(got, u.GetKind())
		if _, found := u.Object["status"]; found {
			t.Errorf("%s carries a status", u.GetKind())
		}
	}
	return got
}

func TestBadUsage(t *testing.T) {
	for _, args := range [][]string{{"frobnicate"}, {"run", "--no-such-flag"}, {"manifests", "extra"}} {
		err := app.Execute(context.Background(), pattern, run, nil, args, &bytes.Buffer{}, &bytes.Buffer{})
		if err == nil || errors.Is(err, flag.ErrHelp) {
			t.Errorf("%v: err = %v, want a usage error", args, err)
		}
	}
}

// A pattern's own flags of run are parsed with the shared ones, before anything runs.
func TestRunFlagsArePatternFlags(t *testing.T) {
	var interval time.Duration
	flags := []func(*flag.FlagSet){func(fs *flag.FlagSet) { fs.DurationVar(&interval, "repair-interval", time.Minute, "") }}
	err := app.Execute(context.Background(), pattern, run, flags, []string{"run", "--repair-interval", "5s", "--kubeconfig", filepath.Join(t.TempDir(), "missing")},
		&bytes.Buffer{}, &bytes.Buffer{})
	if err == nil || interval != 5*time.Second {
		t.Errorf("interval = %v, err = %v: want 5s parsed, then the missing kubeconfig reported", interval, err)
	}
	if err := app.Execute(context.Background(), pattern, run, nil, []string{"run", "--repair-interval", "5s"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil {
		t.Error("a pattern without the flag accepted --repair-interval")
	}
	for _, flag := range []string{"--webhook-port=9443", "--webhook-host=127.0.0.1", "--cert-dir=/tmp", "--admission=policy", "--certs=self"} {
		if err := app.Execute(context.Background(), pattern, run, nil, []string{"run", flag}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil ||
			!strings.Contains(err.Error(), "flag provided but not defined") {
			t.Errorf("a pattern without webhooks: run %s: %v, want the flag unknown", flag, err)
		}
	}
}

// TestMainErrorsAreOneLine runs Main in a child process (this test binary, re-executed) and checks
// exit codes and that failures print one line and no stack trace.
func TestMainErrorsAreOneLine(t *testing.T) {
	if os.Getenv("APP_TEST_MAIN") == "1" {
		os.Args = append([]string{"demo"}, strings.Fields(os.Getenv("APP_TEST_ARGS"))...)
		app.Main(pattern, run)
		os.Exit(0)
	}
	dir := t.TempDir()
	unreachable := filepath.Join(dir, "unreachable")
	if err := os.WriteFile(unreachable, []byte(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: x}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args, kubeconfig string
		code             int
		says             string
	}{
		{"frobnicate", "", 2, `unknown command "frobnicate"`},
		{"run --nope", "", 2, "flag provided but not defined: -nope"},
		{"install", filepath.Join(dir, "missing"), 1, "kubeconfig"},
		{"run", unreachable, 1, "cannot reach the API server at https://127.0.0.1:1"},
		{"install", unreachable, 1, "cannot reach the API server at https://127.0.0.1:1"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestMainErrorsAreOneLine$")
		cmd.Env = append(os.Environ(), "APP_TEST_MAIN=1", "APP_TEST_ARGS="+tc.args, "KUBECONFIG="+tc.kubeconfig, "HOME="+dir)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		err := cmd.Run()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != tc.code {
			t.Errorf("%q: err = %v, want exit code %d", tc.args, err, tc.code)
		}
		msg := strings.TrimRight(stderr.String(), "\n")
		if strings.Count(msg, "\n") != 0 || !strings.Contains(msg, tc.says) || strings.Contains(msg, "goroutine") {
			t.Errorf("%q: stderr = %q, want one line containing %q", tc.args, msg, tc.says)
		}
	}
}

// run's soft memory limit is 90 % of the container's; GOMEMLIMIT, or no limit, leaves it alone.
func TestSetMemoryLimit(t *testing.T) {
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	t.Setenv("GOMEMLIMIT", "")
	t.Setenv(app.MemoryLimitEnv, "268435456") // 256Mi
	if got, limit := app.SetMemoryLimit(), debug.SetMemoryLimit(-1); got != "241591905" || limit != 241591905 {
		t.Errorf("256Mi: SetMemoryLimit %q, runtime limit %d; want 241591905 (90 %%)", got, limit)
	}
	debug.SetMemoryLimit(math.MaxInt64)
	for _, env := range [][2]string{{"GOMEMLIMIT", "1GiB"}, {app.MemoryLimitEnv, "lots"}, {app.MemoryLimitEnv, ""}} {
		t.Setenv("GOMEMLIMIT", "")
		t.Setenv(app.MemoryLimitEnv, "268435456")
		t.Setenv(env[0], env[1])
		if got, limit := app.SetMemoryLimit(), debug.SetMemoryLimit(-1); got != "" || limit != math.MaxInt64 {
			t.Errorf("%s=%q: SetMemoryLimit %q, runtime limit %d; want none set", env[0], env[1], got, limit)
		}
	}
}

// A feature's rules are granted, and run told to enable it, only when --with names it; a pattern
// without features offers no --with, and a name the pattern has not is refused.
func TestFeaturesOnlyWith(t *testing.T) {
	rollouts := rbacv1.PolicyRule{APIGroups: []string{"argoproj.io"}, Resources: []string{"rollouts"}, Verbs: []string{"list", "watch", "patch"}}
	p := pattern
	p.Config = fstest.MapFS{"rbac/role.yaml": {Data: []byte(roleYAML)}, "rbac/features.yaml": {Data: []byte(`
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata:
  name: argo-rollouts
rules:
- apiGroups: [argoproj.io]
  resources: [rollouts]
  verbs: [list, watch, patch]
`)}}
	p.Features = []app.Feature{{Name: "argo-rollouts", Help: "roll Rollouts"}}
	render := func(args ...string) (rules []rbacv1.PolicyRule, runArgs []string) {
		t.Helper()
		var out bytes.Buffer
		if err := app.Execute(context.Background(), p, run, nil, append([]string{"manifests", "--image", "x/y:1"}, args...), &out, os.Stderr); err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(&out, 4096)
		for {
			u := &unstructured.Unstructured{}
			if err := dec.Decode(&u.Object); err != nil {
				return rules, runArgs
			}
			switch {
			case u.GetKind() == "ClusterRole" && u.GetName() == "kpatterns-demo":
				role := &rbacv1.ClusterRole{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, role); err != nil {
					t.Fatal(err)
				}
				rules = role.Rules
			case u.GetKind() == "Deployment":
				d := &appsv1.Deployment{}
				if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, d); err != nil {
					t.Fatal(err)
				}
				runArgs = d.Spec.Template.Spec.Containers[0].Args
			}
		}
	}
	rules, args := render()
	if slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return slices.Contains(r.APIGroups, "argoproj.io") }) || slices.Contains(args, "--with=argo-rollouts") {
		t.Errorf("without --with: rules %v, args %v: the feature is granted", rules, args)
	}
	rules, args = render("--with", "argo-rollouts")
	if !slices.ContainsFunc(rules, func(r rbacv1.PolicyRule) bool { return cmp.Equal(r, rollouts) }) || !slices.Contains(args, "--with=argo-rollouts") {
		t.Errorf("--with argo-rollouts: rules %v, args %v: want its rule and run --with=argo-rollouts", rules, args)
	}
	for _, args := range [][]string{{"manifests", "--with", "frobnicate"}, {"run", "--with", "frobnicate"}} {
		if err := app.Execute(context.Background(), p, run, nil, args, &bytes.Buffer{}, &bytes.Buffer{}); err == nil || !strings.Contains(err.Error(), "no such feature") {
			t.Errorf("%v: %v, want the feature refused", args, err)
		}
	}
	if _, err := app.Objects(p, app.Options{Namespace: "ops", With: []string{"frobnicate"}}); err == nil {
		t.Error("Objects rendered a feature the pattern has not")
	}
	p.Features = append(p.Features, app.Feature{Name: "no-rules"})
	if _, err := app.Objects(p, app.Options{Namespace: "ops", With: []string{"no-rules"}}); err == nil || !strings.Contains(err.Error(), "features.yaml") {
		t.Errorf("a feature without rules in rbac/features.yaml: %v, want an error naming the file", err)
	}
	if err := app.Execute(context.Background(), pattern, run, nil, []string{"manifests", "--with", "argo-rollouts"}, &bytes.Buffer{}, &bytes.Buffer{}); err == nil ||
		!strings.Contains(err.Error(), "flag provided but not defined") {
		t.Errorf("a pattern without features: --with: %v, want the flag unknown", err)
	}
}
