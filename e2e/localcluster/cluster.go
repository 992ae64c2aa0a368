// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package localcluster runs a complete Kubernetes control plane as local processes, with no
// Docker: etcd and kube-apiserver (through controller-runtime's envtest), kube-controller-manager
// (garbage collection, namespaces, Deployments, ReplicaSets, ServiceAccounts, node lifecycle),
// kube-scheduler, and kwok with one fake node, so Pods are scheduled and become Running and Ready
// without a kubelet. With Options.RealNode a second node runs containers (node.go). The binaries
// come from package controlplane's cache; every port is free-chosen.
package localcluster

import (
	_ "embed"

	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// kwokStages are the Stage objects kwok runs the fake node and its Pods with.
//
//go:embed kwok/stages.yaml
var kwokStages []byte

// NodeName is the kwok node's name.
const NodeName = "kwok-node-0"

// controllers are kube-controller-manager's controllers the patterns rely on.
var controllers = []string{
	"garbage-collector-controller", "namespace-controller", "deployment-controller", "replicaset-controller",
	"serviceaccount-controller", "serviceaccount-token-controller", "node-lifecycle-controller",
	"root-ca-certificate-publisher-controller",
	// The built-in admin, edit and view roles take in the rules of roles labelled to aggregate
	// into them (the patterns' <plural>-admin, -editor, -viewer).
	"clusterrole-aggregation-controller",
}

// Cluster is one running local cluster. Its files live in Dir: kubeconfig, pki/, etcd/, logs/.
type Cluster struct {
	Dir        string
	Kubeconfig string // admin kubeconfig (system:masters)
	Config     *rest.Config
	env        *envtest.Environment
	procs      []*exec.Cmd
	logs       []*os.File
	node       *node     // the real node, if started
	watchdog   *exec.Cmd // kills etcd and kube-apiserver once the process that started them is gone
}

// Options choose what Start starts beside the control plane and kwok's node.
type Options struct {
	// RealNode starts a node that runs containers (kubelet, kube-proxy, containerd, runc), for
	// Pods of images loaded with LoadImage. It needs root.
	RealNode bool
}

// ServiceRange is the cluster's Service range. Nothing on this machine serves it (no kube-proxy),
// so KeepServiceRangeLocal makes it unreachable here.
const ServiceRange = "10.0.0.0/16"

// KeepServiceRangeLocal makes a call to a ClusterIP fail at once on this machine instead of
// following the default route off it (a webhook configuration pointing at a Service that nothing
// serves would send every admission request there): unless a route for ServiceRange exists, it
// adds `ip route add unreachable 10.0.0.0/16` (as root; iproute2 from apt-get if missing). Without
// root and without such a route it fails, saying the one command to run. The route stays after
// the cluster stops: it only makes an address range nothing here serves fail at once.
func KeepServiceRangeLocal() error {
	if os.Geteuid() == 0 {
		if err := controlplane.EnsurePackage("iproute2", "ip"); err != nil {
			return err
		}
	}
	out, err := exec.Command("ip", "route", "show", ServiceRange).Output()
	if err != nil {
		return fmt.Errorf("ip route show %s: %w (install iproute2)", ServiceRange, err)
	}
	if strings.TrimSpace(string(out)) != "" {
		return nil // routed or unreachable already, by this or by the machine's owner
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("the Service range %s would follow the default route off this machine: run 'ip route add unreachable %s' once as root", ServiceRange, ServiceRange)
	}
	if out, err := exec.Command("ip", "route", "add", "unreachable", ServiceRange).CombinedOutput(); err != nil {
		return fmt.Errorf("ip route add unreachable %s: %w: %s", ServiceRange, err, out)
	}
	return nil
}

// Agents are the components Start runs as processes of their own, in start order: Restart can
// restart each as it was started.
var Agents = []string{"kube-controller-manager", "kube-scheduler", "kwok"}

// Start starts the cluster in dir (created if missing) and returns once its nodes are Ready (kwok's
// untainted) and the default ServiceAccount exists. On failure everything started is stopped and
// the error carries the tail of the failing component's log.
func Start(ctx context.Context, dir string, o Options) (_ *Cluster, err error) {
	if err := KeepServiceRangeLocal(); err != nil {
		return nil, err
	}
	assets, err := controlplane.EnsureOf(ctx, ControlPlane)
	if err != nil {
		return nil, err
	}
	dir, err = filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	for _, d := range []string{"logs", "pki", "etcd"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	c := &Cluster{Dir: dir, Kubeconfig: filepath.Join(dir, "kubeconfig")}
	defer func() {
		if err != nil {
			_ = c.Stop() // whatever did start; the error says why
		}
	}()
	if err := c.startWatchdog(); err != nil {
		return nil, err
	}
	cp, err := c.startAPIServer(assets)
	if err != nil {
		return nil, err
	}
	if err := c.startControllers(assets, o); err != nil {
		return nil, err
	}
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return nil, err
	}
	if err := c.startKwok(ctx, assets, cl); err != nil {
		return nil, err
	}
	if o.RealNode {
		if err := c.startNode(ctx, cp.APIServer.Port, cp); err != nil {
			return nil, fmt.Errorf("the real node: %w", err)
		}
	}
	if err := c.WaitReady(ctx, cl); err != nil {
		return nil, err
	}
	return c, nil
}

// startWatchdog starts a process of its own session that kills this cluster's etcd and
// kube-apiserver once this process is gone without stopping them: a test binary killed at its
// -timeout runs no teardown, and envtest, which starts them, cannot make them die with their
// parent as the other components do (launch). It matches them by the directories they are given.
func (c *Cluster) startWatchdog() error {
	c.watchdog = exec.Command("sh", "-c", `while kill -0 "$1" 2>/dev/null; do sleep 1; done; pkill -KILL -f -- "$2"`, "watchdog",
		strconv.Itoa(os.Getpid()), "--data-dir="+filepath.Join(c.Dir, "etcd")+"|--cert-dir="+filepath.Join(c.Dir, "pki"))
	c.watchdog.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := c.watchdog.Start(); err != nil {
		return fmt.Errorf("the cluster's watchdog: %w", err)
	}
	return nil
}

// startAPIServer starts etcd and kube-apiserver (envtest's, configured as a cluster's) and writes
// the admin kubeconfig and the CA file.
func (c *Cluster) startAPIServer(assets string) (*envtest.ControlPlane, error) {
	dir := c.Dir
	env := &envtest.Environment{BinaryAssetsDirectory: assets}
	cp := &env.ControlPlane
	cp.Etcd = &envtest.Etcd{DataDir: filepath.Join(dir, "etcd")}
	var err error
	if cp.Etcd.Out, err = c.logFile("etcd"); err != nil {
		return nil, err
	}
	cp.Etcd.Err = cp.Etcd.Out
	caPEM, err := loadOrWritePKI(filepath.Join(dir, "pki"))
	if err != nil {
		return nil, err
	}
	cp.APIServer = &envtest.APIServer{CertDir: filepath.Join(dir, "pki"), StartTimeout: time.Minute}
	cp.APIServer.CA = caPEM
	if cp.APIServer.Out, err = c.logFile("kube-apiserver"); err != nil {
		return nil, err
	}
	cp.APIServer.Err = cp.APIServer.Out
	// envtest turns the ServiceAccount admission plugin off because it runs no controllers; this
	// cluster runs them, so Pods get their ServiceAccount as on any cluster.
	// Advertise loopback, not the host's first interface, so nothing ever points elsewhere; the
	// endpoint reconciler refuses a loopback address, and no Pod here needs the kubernetes Service.
	// envtest's Service range is a /24: 254 Services, fewer than the bench's 500 widgets needed
	// (the rest failed to allocate an IP, and were retried in storms).
	cp.APIServer.Configure().Disable("disable-admission-plugins").
		Set("advertise-address", "127.0.0.1").Set("endpoint-reconciler-type", "none").
		Set("service-cluster-ip-range", ServiceRange).
		Set("enable-admission-plugins", AdmissionPlugins).
		// Webhooks are called at their Pods' addresses (the host routes the real node's Pod range),
		// not at ClusterIPs, which only the real node's kube-proxy serves.
		Set("enable-aggregator-routing", "true").
		// List and watch by hash range (alpha): the sharding pattern's server mode.
		Set("feature-gates", "ShardedListAndWatch=true").
		Set("kubelet-client-certificate", filepath.Join(dir, "pki", kubeletClientCert)).
		Set("kubelet-client-key", filepath.Join(dir, "pki", kubeletClientKey)).
		Set("kubelet-preferred-address-types", "InternalIP,Hostname")
	c.env = env
	if c.Config, err = env.Start(); err != nil {
		return nil, fmt.Errorf("etcd/kube-apiserver: %w%s", err, tail(filepath.Join(dir, "logs", "kube-apiserver.log")))
	}
	admin, err := cp.AddUser(envtest.User{Name: "kpatterns-admin", Groups: []string{"system:masters"}}, nil)
	if err != nil {
		return nil, err
	}
	kubeconfig, err := admin.KubeConfig()
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(c.Kubeconfig, kubeconfig, 0o600); err != nil {
		return nil, err
	}
	c.Config = admin.Config()
	return cp, os.WriteFile(filepath.Join(cp.APIServer.CertDir, "ca.crt"), cp.APIServer.CA, 0o600)
}

// startControllers starts kube-controller-manager (its controllers: controllers, and the
// EndpointSlice controller with the real node) and kube-scheduler against the admin kubeconfig.
func (c *Cluster) startControllers(assets string, o Options) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	pki := filepath.Join(c.Dir, "pki")
	// The cluster's own controllers are never the bottleneck of a measurement: at their default
	// client rate (20/s, burst 30) kube-controller-manager takes minutes over 2,000 Deployments.
	delegation := []string{"--kubeconfig=" + c.Kubeconfig, "--authentication-kubeconfig=" + c.Kubeconfig,
		"--authorization-kubeconfig=" + c.Kubeconfig, "--bind-address=127.0.0.1", "--leader-elect=false",
		"--kube-api-qps=300", "--kube-api-burst=600"}
	kcm := controllers
	if o.RealNode { // Services of the patterns' Pods: webhooks, metrics
		kcm = append(slices.Clone(controllers), "endpointslice-controller")
	}
	if err := c.start(assets, "kube-controller-manager", append(delegation,
		"--secure-port="+ports[0],
		"--controllers="+strings.Join(kcm, ","),
		"--service-account-private-key-file="+filepath.Join(pki, "sa-signer.key"),
		"--root-ca-file="+filepath.Join(pki, "ca.crt"),
		"--use-service-account-credentials=false",
	)...); err != nil {
		return err
	}
	return c.start(assets, "kube-scheduler", append(delegation, "--secure-port="+ports[1])...)
}

// startKwok starts kwok against c.Kubeconfig and registers the fake node it plays.
func (c *Cluster) startKwok(ctx context.Context, assets string, cl client.Client) error {
	stages := filepath.Join(c.Dir, "kwok-stages.yaml")
	if err := os.WriteFile(stages, kwokStages, 0o644); err != nil {
		return err
	}
	ports, err := freePorts(1)
	if err != nil {
		return err
	}
	if err := c.start(assets, "kwok",
		"--kubeconfig="+c.Kubeconfig,
		"--config="+stages,
		"--manage-all-nodes=false",
		"--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
		// kwok renews the node's Lease (every 10 s), as a kubelet does: without it the node
		// controller found the node not Ready ~50 s after start and marked every Pod not Ready.
		"--node-lease-duration-seconds=40",
		"--server-address=127.0.0.1:"+ports[0],
	); err != nil {
		return err
	}
	if err := cl.Create(ctx, fakeNode()); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// KwokPID is the process ID of the kwok that AddFakeNode started, 0 if none.
func (c *Cluster) KwokPID() int {
	for _, p := range c.procs {
		if filepath.Base(p.Path) == "kwok" && p.Process != nil {
			return p.Process.Pid
		}
	}
	return 0
}

// KwokDir returns a directory holding kwok: the control plane's cache where it is complete (kwok
// built with the rest), else kwok's own, built alone if it is not cached yet.
func KwokDir(ctx context.Context) (string, error) {
	if dir, ok := controlplane.Cached(ControlPlane); ok {
		return dir, nil
	}
	return controlplane.EnsureSet(ctx, Kwok)
}

// AddFakeNode runs kwok's fake node (tainted) beside the nodes of another cluster (kind's), as the
// local cluster runs it, and labels those nodes as the local cluster's real node: so workloads in
// namespaces OnFakeNode annotates go to the fake node there too, and the patterns' own Pods to the
// nodes that run containers. kwok comes from the control plane's cache, or is built alone. Stop
// the returned Cluster to stop kwok (the nodes stay as they are: the cluster goes with them).
func AddFakeNode(ctx context.Context, kubeconfig, dir string) (*Cluster, error) {
	assets, err := KwokDir(ctx)
	if err != nil {
		return nil, err
	}
	c := &Cluster{Dir: dir, Kubeconfig: kubeconfig}
	if err := os.MkdirAll(filepath.Join(dir, "logs"), 0o755); err != nil {
		return nil, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	c.Config = cfg
	cl, err := client.New(cfg, client.Options{})
	if err != nil {
		return nil, err
	}
	nodes := &corev1.NodeList{}
	if err := cl.List(ctx, nodes); err != nil {
		return nil, err
	}
	for i := range nodes.Items {
		n := &nodes.Items[i]
		patch := client.MergeFrom(n.DeepCopy())
		metav1.SetMetaDataLabel(&n.ObjectMeta, RealNodeLabel, RealNodeValue)
		if err := cl.Patch(ctx, n, patch); err != nil {
			return nil, err
		}
	}
	if err := c.startKwok(ctx, assets, cl); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	if err := c.WaitReady(ctx, cl); err != nil {
		return nil, errors.Join(err, c.Stop())
	}
	return c, nil
}

// fakeNode is the node kwok plays: it needs no kubelet.
func fakeNode() *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("256Gi"),
		corev1.ResourcePods: resource.MustParse("5000"), // kwok runs no containers: the bench's 2,000 Pods fit
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        NodeName,
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
			Labels: map[string]string{"type": "kwok", "kubernetes.io/hostname": NodeName,
				"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"},
		},
		Spec:   corev1.NodeSpec{Taints: []corev1.Taint{{Key: FakeNodeTaintKey, Value: FakeNodeTaintValue, Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: capacity},
	}
}

// kwok's node is tainted NoSchedule: a Pod runs there only if it tolerates the taint (and, where
// a node that runs containers exists too, selects type=kwok).
const (
	FakeNodeTaintKey   = "kwok.x-k8s.io/node"
	FakeNodeTaintValue = "fake"
)

// OnFakeNode annotates ns so that every Pod created in it runs on kwok's node: kube-apiserver's
// PodNodeSelector and PodTolerationRestriction admission plugins (on in both the local cluster
// and kind's) give each one the node selector type=kwok and a toleration of the fake node's
// taint. The tests and the demo put their workloads in such namespaces; the patterns' own Pods,
// in namespaces without these annotations, run on a node that runs containers, with no flags.
func OnFakeNode(ns *corev1.Namespace) *corev1.Namespace {
	metav1.SetMetaDataAnnotation(&ns.ObjectMeta, "scheduler.alpha.kubernetes.io/node-selector", "type=kwok")
	metav1.SetMetaDataAnnotation(&ns.ObjectMeta, "scheduler.alpha.kubernetes.io/defaultTolerations",
		fmt.Sprintf(`[{"key":%q,"operator":"Equal","value":%q,"effect":"NoSchedule"}]`, FakeNodeTaintKey, FakeNodeTaintValue))
	return ns
}

// AdmissionPlugins are the admission plugins both clusters enable beyond the defaults:
// blockOwnerDeletion needs update on the owner's finalizers (as hardened clusters do), and the
// two that OnFakeNode's annotations drive.
const AdmissionPlugins = "OwnerReferencesPermissionEnforcement,PodNodeSelector,PodTolerationRestriction"

// WaitReady waits for the node to be Ready with no NoSchedule taint, and for the default
// ServiceAccount (Pods can be admitted), checking that every component is still running.
func (c *Cluster) WaitReady(ctx context.Context, cl client.Client) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		why := c.notReady(ctx, cl)
		if why == "" {
			return nil
		}
		procs := map[string]*exec.Cmd{}
		for _, p := range c.procs {
			procs[filepath.Base(p.Path)] = p
		}
		if c.node != nil {
			maps.Copy(procs, c.node.procs)
		}
		for name, p := range procs {
			if p.ProcessState != nil || p.Process.Signal(syscall.Signal(0)) != nil {
				return fmt.Errorf("%s exited%s", name, tail(filepath.Join(c.Dir, "logs", name+".log")))
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("cluster not ready: %s", why)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (c *Cluster) notReady(ctx context.Context, cl client.Client) string {
	nodes := []string{NodeName}
	if c.node != nil {
		nodes = append(nodes, RealNodeName)
	}
	for _, name := range nodes {
		node := &corev1.Node{}
		if err := cl.Get(ctx, client.ObjectKey{Name: name}, node); err != nil {
			return err.Error()
		}
		ready := false
		for _, cond := range node.Status.Conditions {
			ready = ready || (cond.Type == corev1.NodeReady && cond.Status == corev1.ConditionTrue)
		}
		if !ready {
			return "node " + name + " is not Ready"
		}
		for _, t := range node.Spec.Taints {
			if t.Key != FakeNodeTaintKey && (t.Effect == corev1.TaintEffectNoSchedule || t.Effect == corev1.TaintEffectNoExecute) {
				return "node " + name + " has taint " + t.Key
			}
		}
	}
	if err := cl.Get(ctx, client.ObjectKey{Namespace: "default", Name: "default"}, &corev1.ServiceAccount{}); err != nil {
		return "default ServiceAccount: " + err.Error()
	}
	return ""
}

// start runs a component in its own process group, logging to logs/<name>.log.
func (c *Cluster) start(assets, name string, args ...string) error {
	cmd, err := c.launch(filepath.Join(assets, name), args)
	if err != nil {
		return err
	}
	c.procs = append(c.procs, cmd)
	return nil
}

// launch starts the binary at path in its own process group, appending to its log. It is killed
// when the process that started it dies: a test binary killed at its -timeout skips every
// teardown, and the cluster must not outlive it (cluster:up's supervisor is such a parent too).
func (c *Cluster) launch(path string, args []string) (*exec.Cmd, error) {
	name := filepath.Base(path)
	log, err := c.logFile(name)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(path, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	return cmd, nil
}

// Stop removes the real node (RemoveNode), stops every other process in reverse start order
// (SIGTERM, then SIGKILL after 10 s), then kube-apiserver and etcd, and closes the logs. Files
// stay in Dir.
func (c *Cluster) Stop() error {
	var errs []error
	if c.node != nil {
		errs = append(errs, c.node.stop())
		c.node = nil
	}
	for i := len(c.procs) - 1; i >= 0; i-- {
		stopProcess(c.procs[i].Process, 10*time.Second)
	}
	c.procs = nil
	if c.env != nil {
		if err := c.env.Stop(); err != nil {
			errs = append(errs, err)
		}
		c.env = nil
	}
	for _, f := range c.logs {
		_ = f.Close()
	}
	c.logs = nil
	if c.watchdog != nil { // nothing left for it to kill
		_ = c.watchdog.Process.Kill()
		_ = c.watchdog.Wait()
		c.watchdog = nil
	}
	return errors.Join(errs...)
}

// Restart stops etcd or kube-apiserver and starts it again after down, with the same data
// directory, client port and certificates, so that every client — the cluster's own components
// and the patterns — sees the same cluster again once it has reconnected. apiServerFlags, if
// given, are set on kube-apiserver for this start and the ones after (a chaos run's small
// --max-requests-inflight, say; pass the defaults back to undo it). One of Agents is restarted
// with the arguments it was started with (SIGTERM, SIGKILL after 10 s): after several API server
// restarts their watches wait out client-go's backoff (up to a minute) before they see anything,
// and a restarted agent lists and watches at once.
func (c *Cluster) Restart(component string, down time.Duration, apiServerFlags map[string]string) error {
	if c.env == nil {
		return errors.New("the cluster is not running")
	}
	cp := &c.env.ControlPlane
	var stop, start func() error
	var addr string
	switch component {
	case "etcd":
		stop, start, addr = cp.Etcd.Stop, cp.Etcd.Start, cp.Etcd.URL.Host
		cp.Etcd.StopTimeout = 5 * time.Second
	case "kube-apiserver":
		stop, start = cp.APIServer.Stop, cp.APIServer.Start
		addr = net.JoinHostPort(cp.APIServer.Address, cp.APIServer.Port)
		cp.APIServer.StopTimeout = 5 * time.Second
	default:
		return c.restartAgent(component, down)
	}
	// SIGTERM, and SIGKILL after 5 s: kube-apiserver may take longer than that to drain its
	// watches, and a kill is as fair a fault as a stop. Either way the port must be free again.
	if err := stop(); err != nil && !strings.Contains(err.Error(), "timeout waiting for process") {
		return fmt.Errorf("stopping %s: %w", component, err)
	}
	if err := waitPortFree(addr, 30*time.Second); err != nil {
		return fmt.Errorf("%s stopped: %w", component, err)
	}
	args := cp.APIServer.Configure()
	for k, v := range apiServerFlags {
		args.Set(k, v)
	}
	time.Sleep(down)
	if err := start(); err != nil {
		return fmt.Errorf("starting %s again: %w%s", component, err, tail(filepath.Join(c.Dir, "logs", component+".log")))
	}
	return nil
}

func (c *Cluster) restartAgent(name string, down time.Duration) error {
	if err := c.StopAgent(name); err != nil {
		return err
	}
	time.Sleep(down)
	return c.StartAgent(name)
}

// StopAgent stops one of Agents (SIGTERM, SIGKILL after 10 s) until StartAgent starts it again
// with the same arguments: a bench stops kube-controller-manager while it makes objects whose
// ReplicaSets and EndpointSlices would cost more than the pattern it measures.
func (c *Cluster) StopAgent(name string) error {
	i, err := c.agent(name)
	if err != nil {
		return err
	}
	stopProcess(c.procs[i].Process, 10*time.Second)
	if name == "kwok" {
		// kwok holds the node's Lease under an identity new in each process, so a new kwok would
		// wait for the old one's Lease to expire (40 s) before it runs any Pod: the Lease goes
		// with the process that held it.
		cl, err := client.New(c.Config, client.Options{})
		if err != nil {
			return err
		}
		lease := &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{Namespace: corev1.NamespaceNodeLease, Name: NodeName}}
		if err := cl.Delete(context.Background(), lease); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("deleting kwok's node Lease: %w", err)
		}
	}
	return nil
}

// StartAgent starts a stopped agent again with the arguments it was first started with.
func (c *Cluster) StartAgent(name string) error {
	i, err := c.agent(name)
	if err != nil {
		return err
	}
	old := c.procs[i]
	cmd, err := c.launch(old.Path, old.Args[1:])
	if err != nil {
		return fmt.Errorf("starting %s again: %w", name, err)
	}
	c.procs[i] = cmd
	return nil
}

func (c *Cluster) agent(name string) (int, error) {
	i := slices.IndexFunc(c.procs, func(p *exec.Cmd) bool { return filepath.Base(p.Path) == name })
	if i < 0 {
		return 0, fmt.Errorf("%q: not a component of this cluster (etcd, kube-apiserver, %s)", name, strings.Join(Agents, ", "))
	}
	return i, nil
}

// waitPortFree waits until nothing listens on addr any more.
func waitPortFree(addr string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for {
		l, err := net.Listen("tcp", addr)
		if err == nil {
			return l.Close()
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("%s still in use after %s: %w", addr, limit, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func stopProcess(p *os.Process, grace time.Duration) {
	_ = syscall.Kill(-p.Pid, syscall.SIGTERM)
	deadline := time.Now().Add(grace)
	for time.Now().Before(deadline) {
		if syscall.Kill(p.Pid, 0) != nil {
			return
		}
		time.Sleep(50 * time.Millisecond)
	}
	_ = syscall.Kill(-p.Pid, syscall.SIGKILL)
}

func (c *Cluster) logFile(name string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(c.Dir, "logs", name+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	c.logs = append(c.logs, f)
	return f, nil
}

// tail returns, for an error message, the first error lines (klog's "E" lines) and the last lines
// of a log file.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) == 0 {
		return ""
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	var errs []string
	for _, l := range lines {
		if strings.HasPrefix(l, "E") && len(errs) < 5 {
			errs = append(errs, l)
		}
	}
	if len(lines) > 10 {
		lines = lines[len(lines)-10:]
	}
	out := "\n--- " + path
	if len(errs) > 0 {
		out += ", first errors:\n" + strings.Join(errs, "\n") + "\n--- last lines"
	}
	return out + ":\n" + strings.Join(lines, "\n")
}

// freePorts asks the kernel for n free loopback ports.
func freePorts(n int) ([]string, error) {
	var ports []string
	var ls []io.Closer
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		ls = append(ls, l)
		ports = append(ports, strconv.Itoa(l.Addr().(*net.TCPAddr).Port))
	}
	return ports, nil
}

// HasRealNode says whether the cluster runs the real node (Options.RealNode).
func (c *Cluster) HasRealNode() bool { return c.node != nil }

// HostIP is the host's address on the real node's link: where a Pod reaches a server running on
// this machine ("" without a real node).
func (c *Cluster) HostIP() string {
	if c.node == nil {
		return ""
	}
	return c.node.hostIP()
}

// LoadImages imports image archives into the real node's containerd (see LoadImages).
func (c *Cluster) LoadImages(ctx context.Context, archives ...string) error {
	return LoadImages(ctx, c.Dir, archives...)
}
