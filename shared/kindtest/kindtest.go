// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package kindtest runs one pattern on a kind cluster for the pattern's own e2e suite (test/e2e),
// as kubebuilder's scaffold does: its image built (the image tool, no Docker) and loaded into
// kind, its manifests installed by its own install command, its Deployment Available, its
// /metrics read with a ServiceAccount token through a port-forward, and on failure its Pods,
// events and logs printed. e2e-framework drives it. The environment chooses the cluster:
//
//	KIND             the kind binary (default: kind on PATH)
//	KIND_CLUSTER     a cluster to use as it is and keep; else <pattern>-e2e, created and deleted
//	KIND_NODE_IMAGE  the node image (default: kind's own)
//	KIND_CONFIG      a kind configuration file
package kindtest

import (
	"bytes"
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/e2e-framework/pkg/env"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/envfuncs"
	"sigs.k8s.io/e2e-framework/support/kind"

	"github.com/kpatterns/kpatterns/shared/app"
)

// Suite is one pattern's run on kind.
type Suite struct {
	Pattern   string // its name: binary, ServiceAccount, Deployment
	Root      string // its module's directory (main.go)
	Namespace string // where it is installed: <pattern>-system

	cluster string
	keep    bool
	work    string // bin/<pattern> and the image tool's output
}

// New returns the suite of the pattern whose module is root.
func New(pattern, root string) (*Suite, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, err
	}
	s := &Suite{Pattern: pattern, Root: abs, Namespace: pattern + "-system", cluster: os.Getenv("KIND_CLUSTER")}
	if s.keep = s.cluster != ""; !s.keep {
		s.cluster = pattern + "-e2e"
	}
	return s, nil
}

// Environment is the e2e-framework environment: the cluster created (or reused), the pattern
// built, loaded and installed before the features; uninstalled and the cluster deleted after.
func (s *Suite) Environment() env.Environment {
	e := env.NewWithConfig(envconf.New())
	provider := kind.NewProvider()
	if p := os.Getenv("KIND"); p != "" {
		provider = provider.WithPath(p)
	}
	if img := os.Getenv("KIND_NODE_IMAGE"); img != "" {
		provider = provider.WithOpts(kind.WithImage(img))
	}
	e.Setup(envfuncs.CreateClusterWithConfig(provider, s.cluster, os.Getenv("KIND_CONFIG")), s.build, s.install)
	e.Finish(s.uninstall)
	if !s.keep {
		e.Finish(envfuncs.DestroyCluster(s.cluster))
	}
	return e
}

// Image is the pattern's image reference, as the image tool tags it.
func (s *Suite) Image() string { return "kpatterns/" + filepath.Base(s.Root) + ":e2e" }

// build compiles the pattern (for install) and its image, and loads the image into kind. The
// image tool is hack/image in a standalone module, e2e/cmd/image in the kpatterns repository.
func (s *Suite) build(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	var err error
	if s.work, err = os.MkdirTemp("", s.Pattern+"-e2e-"); err != nil {
		return ctx, err
	}
	if err := run(ctx, s.Root, "go", "build", "-o", filepath.Join(s.work, "bin", s.Pattern), "."); err != nil {
		return ctx, err
	}
	tool, dir := "./hack/image", s.Root
	if _, err := os.Stat(filepath.Join(s.Root, "hack", "image")); err != nil {
		tool, dir = "./e2e/cmd/image", filepath.Dir(s.Root)
	}
	if err := run(ctx, dir, "go", "run", tool, "-root", filepath.Dir(s.Root), "-tag", "e2e", "-platforms", "linux/"+runtime.GOARCH,
		"-out", s.work, filepath.Base(s.Root)); err != nil {
		return ctx, err
	}
	archive := filepath.Join(s.work, filepath.Base(s.Root)+"-linux-"+runtime.GOARCH+".tar")
	return envfuncs.LoadImageArchiveToCluster(s.cluster, archive)(ctx, cfg)
}

// install applies the pattern's manifests with its image and waits for its Deployment.
func (s *Suite) install(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	if err := s.command(ctx, cfg, "install", "--image", s.Image()); err != nil {
		return ctx, err
	}
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		return ctx, err
	}
	var last string
	err = wait.PollUntilContextTimeout(ctx, time.Second, 3*time.Minute, true, func(ctx context.Context) (bool, error) {
		d, err := cs.AppsV1().Deployments(s.Namespace).Get(ctx, s.Pattern, metav1.GetOptions{})
		if err != nil {
			return false, client404(err)
		}
		for _, c := range d.Status.Conditions {
			if c.Type == appsv1.DeploymentAvailable {
				last = c.Message
				return c.Status == corev1.ConditionTrue && d.Status.UpdatedReplicas == *d.Spec.Replicas, nil
			}
		}
		return false, nil
	})
	if err != nil {
		var dump bytes.Buffer
		s.dump(ctx, cs, &dump)
		return ctx, fmt.Errorf("deployment %s/%s not Available (%s): %w\n%s", s.Namespace, s.Pattern, last, err, dump.String())
	}
	return ctx, nil
}

func (s *Suite) uninstall(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	defer func() { _ = os.RemoveAll(s.work) }()
	return ctx, s.command(ctx, cfg, "uninstall")
}

func (s *Suite) command(ctx context.Context, cfg *envconf.Config, args ...string) error {
	cmd := exec.CommandContext(ctx, filepath.Join(s.work, "bin", s.Pattern), append(args, "--kubeconfig", cfg.KubeconfigFile())...)
	cmd.Env = append(os.Environ(), "KPATTERNS_NAMESPACE="+s.Namespace)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", s.Pattern, strings.Join(args, " "), err, out)
	}
	return nil
}

// DumpOnFailure prints the pattern's Pods, the events of its namespace and its logs if t failed:
// call it from a feature's teardown.
func (s *Suite) DumpOnFailure(ctx context.Context, t *testing.T, cfg *envconf.Config) {
	if !t.Failed() {
		return
	}
	cs, err := kubernetes.NewForConfig(cfg.Client().RESTConfig())
	if err != nil {
		t.Log(err)
		return
	}
	var b bytes.Buffer
	s.dump(ctx, cs, &b)
	t.Log(b.String())
}

func (s *Suite) dump(ctx context.Context, cs kubernetes.Interface, w io.Writer) {
	pods, err := cs.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + s.Pattern})
	if err != nil {
		_, _ = fmt.Fprintln(w, "pods:", err)
		return
	}
	for _, p := range pods.Items {
		_, _ = fmt.Fprintf(w, "pod %s on %q: %s %+v\n", p.Name, p.Spec.NodeName, p.Status.Phase, p.Status.ContainerStatuses)
		logs, err := cs.CoreV1().Pods(s.Namespace).GetLogs(p.Name, &corev1.PodLogOptions{TailLines: ptr.To[int64](50)}).DoRaw(ctx)
		_, _ = fmt.Fprintf(w, "--- logs of %s (last 50 lines; %v)\n%s\n", p.Name, err, logs)
	}
	events, err := cs.CoreV1().Events(s.Namespace).List(ctx, metav1.ListOptions{})
	if err == nil {
		for _, e := range events.Items {
			_, _ = fmt.Fprintf(w, "event %s %s/%s: %s %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
		}
	}
}

// Metrics returns the pattern's /metrics as a scraper reads it: a ServiceAccount bound to the
// pattern's metrics-reader ClusterRole, its token, through a port-forward to a Pod's metrics port
// (the certificate is the pattern's own: not verified, as kubebuilder's curl -k).
func (s *Suite) Metrics(ctx context.Context, cfg *envconf.Config) (string, error) {
	rc := cfg.Client().RESTConfig()
	cs, err := kubernetes.NewForConfig(rc)
	if err != nil {
		return "", err
	}
	scraper := s.Pattern + "-e2e-scraper"
	if _, err := cs.CoreV1().ServiceAccounts(s.Namespace).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: scraper}},
		metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	crb := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: scraper},
		Subjects: []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: scraper, Namespace: s.Namespace}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: app.MetricsReaderRole(s.Pattern)}}
	if _, err := cs.RbacV1().ClusterRoleBindings().Create(ctx, crb, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		return "", err
	}
	defer func() {
		_ = cs.RbacV1().ClusterRoleBindings().Delete(context.Background(), scraper, metav1.DeleteOptions{})
		_ = cs.CoreV1().ServiceAccounts(s.Namespace).Delete(context.Background(), scraper, metav1.DeleteOptions{})
	}()
	tr, err := cs.CoreV1().ServiceAccounts(s.Namespace).CreateToken(ctx, scraper, &authenticationv1.TokenRequest{}, metav1.CreateOptions{})
	if err != nil {
		return "", err
	}
	pods, err := cs.CoreV1().Pods(s.Namespace).List(ctx, metav1.ListOptions{LabelSelector: "app.kubernetes.io/name=" + s.Pattern,
		FieldSelector: "status.phase=Running"})
	if err != nil || len(pods.Items) == 0 {
		return "", fmt.Errorf("no running Pod of %s: %v", s.Pattern, err)
	}
	transport, upgrader, err := spdy.RoundTripperFor(rc)
	if err != nil {
		return "", err
	}
	url := cs.CoreV1().RESTClient().Post().Resource("pods").Namespace(s.Namespace).Name(pods.Items[0].Name).SubResource("portforward").URL()
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.New(spdy.NewDialer(upgrader, &http.Client{Transport: transport}, http.MethodPost, url),
		[]string{"0:8443"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		return "", err
	}
	errs := make(chan error, 1)
	go func() { errs <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errs:
		return "", fmt.Errorf("port-forward: %w", err)
	case <-ctx.Done():
		return "", ctx.Err()
	}
	ports, err := fw.GetPorts()
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d/metrics", ports[0].Local), nil)
	if err != nil {
		return "", err
	}
	req.Header.Set("Authorization", "Bearer "+tr.Status.Token)
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // the pattern's own certificate
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET /metrics: %s: %s", resp.Status, body)
	}
	return string(body), err
}

func run(ctx context.Context, dir, name string, args ...string) error {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %w\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
