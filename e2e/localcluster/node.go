// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/kpatterns/kpatterns/shared/controlplane"
)

// The real node runs containers: kubelet and kube-proxy of the control plane's Kubernetes version,
// containerd with runc, and the CNI bridge, all built from Go modules. It lives in a network and a
// mount namespace of its own, so the host keeps its links, routes, nftables rules, mounts and
// kernel settings: /var/lib and /var/log bound from node/root/ (on the disk, where the kubelet's
// eviction manager can measure them), tmpfs over /run; the kernel settings the kubelet writes
// bind-mounted from copies; a veth pair to the host (172.30.N.1 on the host, 172.30.N.2 in the
// node) with the Pods' 10.244.N.0/24 behind it, and no default route, so nothing a Pod sends can
// leave the machine. kube-apiserver reaches webhooks at their Pods' addresses
// (--enable-aggregator-routing) through a host route to that /24; Pods reach kube-apiserver
// through the `kubernetes` Service (kube-proxy, nftables), whose endpoint is a forwarder on the
// host's end of the pair.
const (
	// RealNodeName is the node the kubelet registers.
	RealNodeName = "kpatterns-node"
	// RealNodeLabel labels the node that runs containers (value RealNodeValue). It has no taint:
	// a pattern's own Pods run there with no flags, as on any cluster; kwok's node is the tainted
	// one (FakeNodeTaintKey), and what the tests and the demo put there lives in namespaces that
	// OnFakeNode annotates.
	RealNodeLabel = "patterns.kpatterns.dev/node"
	RealNodeValue = "real"
	// SandboxImage is the pause image, built from e2e/cmd/pause like the patterns' images.
	SandboxImage = "kpatterns/pause:dev"
)

var nodeBinaries = []string{"kubelet", "kube-proxy", "containerd", "containerd-shim-runc-v2", "ctr", "runc",
	"bridge", "host-local", "loopback", "portmap"}

// NodeSet is what the real node runs, once per version of tools/node (containerd, runc, CNI
// plugins) and tools/controlplane (kubelet, kube-proxy): downloaded from their releases
// (Releases) where it can be, else built, runc with cgo for seccomp (libseccomp-dev from apt-get
// when missing).
var NodeSet = controlplane.Set{
	Name:     "node-k8s-v1.37.2",
	Modules:  []string{"tools/node", "tools/controlplane"},
	Binaries: nodeBinaries,
	Download: func(ctx context.Context, b *controlplane.Builder) error { return fetchReleases(ctx, b, nodeBinaries) },
	Build: func(ctx context.Context, b *controlplane.Builder) error {
		if err := controlplane.EnsurePackage("libseccomp-dev", "/usr/include/seccomp.h"); err != nil {
			return err
		}
		// The version the node reports (a module build has none): the control plane's.
		const version = "-ldflags=-X k8s.io/component-base/version.gitVersion=v1.37.2 -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=37"
		steps := []struct {
			what, module string
			env          []string
			args         []string
		}{
			{"downloading the node's modules", "tools/node", nil, []string{"mod", "download"}},
			{"[1/4] containerd, containerd-shim-runc-v2, ctr, CNI plugins", "tools/node", nil, []string{"build", "-trimpath", "-o", b.Out + "/",
				"github.com/containerd/containerd/v2/cmd/containerd", "github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2",
				"github.com/containerd/containerd/v2/cmd/ctr", "github.com/containernetworking/plugins/plugins/main/bridge",
				"github.com/containernetworking/plugins/plugins/ipam/host-local", "github.com/containernetworking/plugins/plugins/main/loopback",
				"github.com/containernetworking/plugins/plugins/meta/portmap"}},
			{"[2/4] runc (cgo, libseccomp)", "tools/node", []string{"CGO_ENABLED=1"},
				[]string{"build", "-trimpath", "-tags", "seccomp", "-o", b.Path("runc"), "github.com/opencontainers/runc"}},
			{"[3/4] kubelet", "tools/controlplane", nil, []string{"build", "-trimpath", version, "-o", b.Path("kubelet"), "k8s.io/kubernetes/cmd/kubelet"}},
			{"[4/4] kube-proxy", "tools/controlplane", nil, []string{"build", "-trimpath", version, "-o", b.Path("kube-proxy"), "k8s.io/kubernetes/cmd/kube-proxy"}},
		}
		for _, s := range steps {
			if err := b.Go(ctx, s.what, s.module, s.env, s.args...); err != nil {
				return err
			}
		}
		return nil
	},
}

// node is the running real node; its files are in dir (the cluster's node/).
type node struct {
	dir    string
	index  int // N of its addresses, link and cgroup: the first free one on this machine
	bins   string
	holder *exec.Cmd // holds the namespaces
	procs  map[string]*exec.Cmd
	fwd    net.Listener
}

func (n *node) link() string       { return "kpn" + strconv.Itoa(n.index) }
func (n *node) hostIP() string     { return fmt.Sprintf("172.30.%d.1", n.index) }
func (n *node) nodeIP() string     { return fmt.Sprintf("172.30.%d.2", n.index) }
func (n *node) podCIDR() string    { return fmt.Sprintf("10.244.%d.0/24", n.index) }
func (n *node) cgroupRoot() string { return "kpatterns-node-" + strconv.Itoa(n.index) }

// holderScript prepares the node's mount namespace and keeps it (and the network namespace) alive.
const holderScript = `set -eu
mount --make-rprivate /
for d in /var/lib /var/log; do mkdir -p "$NODE/root$d"; mount --bind "$NODE/root$d" "$d"; done
mount -t tmpfs -o mode=0755 kpatterns-node /run
mkdir -p "$NODE/sysctl"
for f in vm/overcommit_memory vm/panic_on_oom kernel/panic kernel/panic_on_oops kernel/keys/root_maxkeys kernel/keys/root_maxbytes; do
  copy="$NODE/sysctl/$(echo "$f" | tr / .)"
  cat "/proc/sys/$f" > "$copy"
  mount --bind "$copy" "/proc/sys/$f"
done
ip link set lo up
echo 1 > /proc/sys/net/ipv4/ip_forward
echo $$ > "$NODE/holder.pid"
exec sleep infinity
`

// startNode starts the real node against the running control plane and returns once the node
// is registered; WaitReady waits for it to be Ready.
func (c *Cluster) startNode(ctx context.Context, apiPort string, cp *envtest.ControlPlane) (err error) {
	if os.Geteuid() != 0 {
		return errors.New("the real node needs root (network and mount namespaces, cgroups)")
	}
	for pkg, cmd := range map[string]string{"nftables": "nft", "util-linux": "nsenter", "iproute2": "ip"} {
		if err := controlplane.EnsurePackage(pkg, cmd); err != nil {
			return err
		}
	}
	bins, err := controlplane.EnsureSet(ctx, NodeSet)
	if err != nil {
		return err
	}
	n := &node{dir: filepath.Join(c.Dir, "node"), bins: bins, procs: map[string]*exec.Cmd{}}
	c.node = n
	for _, d := range []string{"cni", "sysctl"} {
		if err := os.MkdirAll(filepath.Join(n.dir, d), 0o700); err != nil {
			return err
		}
	}
	pause := make(chan error, 1) // the sandbox image builds while the node starts
	go func() { pause <- buildPause(ctx, n.dir) }()

	holderLog, err := c.logFile("node-namespaces")
	if err != nil {
		return err
	}
	n.holder = exec.Command("sh", "-c", holderScript)
	n.holder.Env = append(os.Environ(), "NODE="+n.dir)
	n.holder.Stdout, n.holder.Stderr = holderLog, holderLog
	n.holder.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS, Setpgid: true}
	if err := n.holder.Start(); err != nil {
		return fmt.Errorf("node namespaces: %w", err)
	}
	go func() { _ = n.holder.Wait() }()
	if err := waitFile(ctx, filepath.Join(n.dir, "holder.pid"), n.holder); err != nil {
		return fmt.Errorf("node namespaces: %w%s", err, tail(holderLog.Name()))
	}
	if err := n.network(); err != nil {
		return err
	}
	if err := n.cgroups(); err != nil {
		return err
	}
	if n.fwd, err = forward(n.hostIP()+":"+apiPort, "127.0.0.1:"+apiPort); err != nil {
		return err
	}
	cl, err := client.New(c.Config, client.Options{})
	if err != nil {
		return err
	}
	if err := c.nodeAccess(ctx, cl, cp, n, apiPort); err != nil {
		return err
	}
	if err := n.writeConfigs(c.Dir); err != nil {
		return err
	}
	path := "PATH=" + bins + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	if err := c.startInNode(n, path, "containerd", "--config", filepath.Join(n.dir, "containerd.toml")); err != nil {
		return err
	}
	if err := c.waitContainerd(ctx, n); err != nil {
		return err
	}
	if err := <-pause; err != nil {
		return err
	}
	if err := n.importImage(ctx, filepath.Join(n.dir, "pause.tar")); err != nil {
		return fmt.Errorf("the sandbox image: %w", err)
	}
	if err := c.startInNode(n, path, "kubelet", "--config", filepath.Join(n.dir, "kubelet.yaml"),
		"--kubeconfig", filepath.Join(n.dir, "kubelet.kubeconfig"), "--hostname-override", RealNodeName,
		"--node-ip", n.nodeIP(), "--node-labels", RealNodeLabel+"="+RealNodeValue, "--v=1"); err != nil {
		return err
	}
	return c.startInNode(n, path, "kube-proxy", "--config", filepath.Join(n.dir, "kube-proxy.yaml"), "--v=1")
}

// network connects the node's namespace to the host: the first free kpnN veth pair, the host
// route to the Pods' /24, and the node's addresses.
func (n *node) network() error {
	pid := strconv.Itoa(n.holder.Process.Pid)
	for n.index = 0; ; n.index++ {
		if n.index > 250 {
			return errors.New("no free kpnN link for the real node (kpn0 to kpn250 exist)")
		}
		out, err := exec.Command("ip", "link", "add", n.link(), "type", "veth", "peer", "name", "eth0", "netns", pid).CombinedOutput()
		if err == nil {
			break
		}
		if !strings.Contains(string(out), "File exists") {
			return fmt.Errorf("ip link add %s: %w: %s", n.link(), err, out)
		}
	}
	if err := os.WriteFile(filepath.Join(n.dir, "index"), []byte(strconv.Itoa(n.index)), 0o600); err != nil {
		return err
	}
	for _, args := range [][]string{
		{"ip", "addr", "add", n.hostIP() + "/30", "dev", n.link()},
		{"ip", "link", "set", n.link(), "up"},
		{"ip", "route", "add", n.podCIDR(), "via", n.nodeIP(), "dev", n.link()},
		{"nsenter", "-t", pid, "-n", "ip", "addr", "add", n.nodeIP() + "/30", "dev", "eth0"},
		{"nsenter", "-t", pid, "-n", "ip", "link", "set", "eth0", "up"},
	} {
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %w: %s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}

// cgroupHierarchies are the host's cgroup mounts (v1 controllers, name=systemd, unified).
func cgroupHierarchies() ([]string, error) {
	b, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 2 && (f[2] == "cgroup" || f[2] == "cgroup2") {
			out = append(out, f[1])
		}
	}
	return out, nil
}

// cgroups creates the kubelet's cgroup root in every hierarchy (the kubelet requires it to
// exist), with cpuset's CPUs and memory nodes copied from the top, where a new cpuset is empty.
func (n *node) cgroups() error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		d := filepath.Join(h, n.cgroupRoot())
		if err := os.Mkdir(d, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", d, err)
		}
		for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
			if b, err := os.ReadFile(filepath.Join(h, f)); err == nil && filepath.Base(h) == "cpuset" {
				if err := os.WriteFile(filepath.Join(d, f), b, 0o644); err != nil {
					return fmt.Errorf("cgroup %s: %w", filepath.Join(d, f), err)
				}
			}
		}
	}
	return nil
}

// forward accepts TCP connections on from and relays each to to.
func forward(from, to string) (net.Listener, error) {
	l, err := net.Listen("tcp", from)
	if err != nil {
		return nil, fmt.Errorf("kube-apiserver forwarder: %w", err)
	}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return // closed
			}
			go func() {
				defer func() { _ = in.Close() }()
				out, err := net.Dial("tcp", to)
				if err != nil {
					return
				}
				defer func() { _ = out.Close() }()
				done := make(chan struct{}, 2)
				relay := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					if tc, ok := dst.(*net.TCPConn); ok {
						_ = tc.CloseWrite()
					}
					done <- struct{}{}
				}
				go relay(out, in)
				go relay(in, out)
				<-done
				<-done
			}()
		}
	}()
	return l, nil
}

// nodeAccess gives the kubelet and kube-proxy their identities (client certificates of the
// cluster's client CA), binds them to the roles Kubernetes defines for them, and points the
// `kubernetes` Service at the forwarder.
func (c *Cluster) nodeAccess(ctx context.Context, cl client.Client, cp *envtest.ControlPlane, n *node, apiPort string) error {
	server := "https://" + n.hostIP() + ":" + apiPort
	for _, u := range []struct {
		user   envtest.User
		file   string
		roles  []string
		remote string
	}{
		{envtest.User{Name: "system:node:" + RealNodeName, Groups: []string{"system:nodes"}}, "kubelet.kubeconfig",
			[]string{"system:node", "system:auth-delegator"}, "kubelet"},
		{envtest.User{Name: "system:kube-proxy"}, "kube-proxy.kubeconfig", []string{"system:node-proxier"}, "kube-proxy"},
	} {
		au, err := cp.AddUser(u.user, nil)
		if err != nil {
			return err
		}
		if err := writeKubeconfig(filepath.Join(n.dir, u.file), au.Config(), server); err != nil {
			return err
		}
		for _, role := range u.roles {
			crb := &rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: "kpatterns-local-" + u.remote + "-" + strings.ReplaceAll(role, ":", "-")},
				Subjects:   []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: u.user.Name}},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
			}
			if err := cl.Create(ctx, crb); client.IgnoreAlreadyExists(err) != nil {
				return err
			}
		}
	}
	port, err := strconv.Atoi(apiPort)
	if err != nil {
		return err
	}
	slice := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Name: "kubernetes", Namespace: metav1.NamespaceDefault, Labels: map[string]string{
			discoveryv1.LabelServiceName: "kubernetes", discoveryv1.LabelManagedBy: "localcluster.patterns.kpatterns.dev"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{n.hostIP()}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}},
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("https"), Port: ptr.To(int32(port)), Protocol: ptr.To(corev1.ProtocolTCP)}},
	}
	return cl.Create(ctx, slice)
}

// writeKubeconfig writes cfg's credentials for server; the serving certificate is checked against
// "localhost", one of its names, since it does not name the forwarder's address.
func writeKubeconfig(path string, cfg *rest.Config, server string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["local"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData, TLSServerName: "localhost"}
	kc.AuthInfos["user"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData}
	kc.Contexts["local"] = &clientcmdapi.Context{Cluster: "local", AuthInfo: "user"}
	kc.CurrentContext = "local"
	b, err := clientcmd.Write(*kc)
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o600)
}

// writeConfigs writes containerd's, the CNI bridge's, the kubelet's and kube-proxy's configuration.
func (n *node) writeConfigs(clusterDir string) error {
	pki := filepath.Join(clusterDir, "pki")
	files := map[string]string{
		"containerd.toml": fmt.Sprintf(`version = 3
root = "/var/lib/containerd"
state = "/run/containerd"
disabled_plugins = ["io.containerd.nri.v1.nri"]

[grpc]
  address = %[1]q

[plugins.'io.containerd.cri.v1.runtime']
  # The machine may withhold CAP_SYS_RESOURCE: never ask for a lower oom_score_adj than containerd's.
  restrict_oom_score_adj = true
  [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc]
    runtime_type = "io.containerd.runc.v2"
    [plugins.'io.containerd.cri.v1.runtime'.containerd.runtimes.runc.options]
      BinaryName = %[2]q
      SystemdCgroup = false
  [plugins.'io.containerd.cri.v1.runtime'.cni]
    bin_dirs = [%[3]q]
    conf_dir = %[4]q

[plugins.'io.containerd.cri.v1.images'.pinned_images]
  sandbox = %[5]q
`, n.socket(), filepath.Join(n.bins, "runc"), n.bins, filepath.Join(n.dir, "cni"), "docker.io/"+SandboxImage),
		"cni/10-kpatterns.conflist": fmt.Sprintf(`{"cniVersion": "1.0.0", "name": "kpatterns", "plugins": [
  {"type": "bridge", "bridge": "cni0", "isGateway": true, "ipMasq": false, "hairpinMode": true,
   "ipam": {"type": "host-local", "ranges": [[{"subnet": %q}]], "routes": [{"dst": "0.0.0.0/0"}]}},
  {"type": "portmap", "capabilities": {"portMappings": true}}
]}
`, n.podCIDR()),
		"kubelet.yaml": fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %[1]s
readOnlyPort: 0
healthzPort: 0
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: %[2]q}
authorization: {mode: Webhook}
containerRuntimeEndpoint: unix://%[3]s
cgroupDriver: cgroupfs
cgroupRoot: /%[4]s
failCgroupV1: false
failSwapOn: false
makeIPTablesUtilChains: false
localStorageCapacityIsolation: false
resolvConf: ""
hairpinMode: hairpin-veth
podCIDR: %[5]s
maxPods: 30
# A Secret's or ConfigMap's change reaches its Pods' volumes within seconds, not a minute.
syncFrequency: 10s
serializeImagePulls: false
evictionHard: {memory.available: 100Mi, nodefs.available: 1%%, imagefs.available: 1%%, nodefs.inodesFree: 1%%}
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
`, n.nodeIP(), filepath.Join(pki, caCertFile), n.socket(), n.cgroupRoot(), n.podCIDR()),
		"kube-proxy.yaml": fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: nftables
clientConnection: {kubeconfig: %q}
hostnameOverride: %s
clusterCIDR: %s
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
`, filepath.Join(n.dir, "kube-proxy.kubeconfig"), RealNodeName, n.podCIDR()),
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(n.dir, name), []byte(content), 0o600); err != nil {
			return err
		}
	}
	return nil
}

func (n *node) socket() string { return filepath.Join(n.dir, "containerd.sock") }

// startInNode starts one of the node's binaries inside its namespaces.
func (c *Cluster) startInNode(n *node, path, name string, args ...string) error {
	log, err := c.logFile(name)
	if err != nil {
		return err
	}
	cmd := exec.Command("nsenter", append([]string{"--target", strconv.Itoa(n.holder.Process.Pid), "--net", "--mount", "--",
		filepath.Join(n.bins, name)}, args...)...)
	cmd.Env = append(os.Environ(), path)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("%s: %w", name, err)
	}
	go func() { _ = cmd.Wait() }()
	n.procs[name] = cmd
	return nil
}

func (c *Cluster) waitContainerd(ctx context.Context, n *node) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for {
		if err := exec.CommandContext(ctx, filepath.Join(n.bins, "ctr"), "--address", n.socket(), "version").Run(); err == nil {
			return nil
		}
		if n.procs["containerd"].Process.Signal(syscall.Signal(0)) != nil {
			return fmt.Errorf("containerd exited%s", tail(filepath.Join(c.Dir, "logs", "containerd.log")))
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("containerd did not answer on %s%s", n.socket(), tail(filepath.Join(c.Dir, "logs", "containerd.log")))
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// importImage imports an image archive (docker save format, as `go tool task image` writes) into
// containerd's k8s.io namespace, where the kubelet finds it.
func (n *node) importImage(ctx context.Context, archive string) error {
	out, err := exec.CommandContext(ctx, filepath.Join(n.bins, "ctr"), "--address", n.socket(), "-n", "k8s.io",
		"images", "import", "--platform", "linux/"+runtime.GOARCH, archive).CombinedOutput()
	if err != nil {
		return fmt.Errorf("ctr images import %s: %w: %s", archive, err, out)
	}
	return nil
}

// buildPause builds the sandbox image into dir/pause.tar with the patterns' image builder.
func buildPause(ctx context.Context, dir string) error {
	root, err := repoRoot()
	if err != nil {
		return err
	}
	out := filepath.Join(dir, "images")
	cmd := exec.CommandContext(ctx, "go", "run", "./e2e/cmd/image", "-out", out, "-platforms", "linux/"+runtime.GOARCH,
		"-tag", "dev", "e2e/cmd/pause")
	cmd.Dir = root
	if b, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("building the sandbox image: %w: %s", err, b)
	}
	return os.Rename(filepath.Join(out, "pause-linux-"+runtime.GOARCH+".tar"), filepath.Join(dir, "pause.tar"))
}

// repoRoot is the repository root above the working directory.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "e2e", "cmd", "pause", "main.go")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("the real node: no repository root (e2e/cmd/pause) above the working directory")
		}
		dir = parent
	}
}

func waitFile(ctx context.Context, path string, p *exec.Cmd) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
		if p.Process.Signal(syscall.Signal(0)) != nil {
			return fmt.Errorf("exited before %s appeared", path)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%s did not appear: %w", path, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// stop ends everything the node started and removes what it added to the host.
func (n *node) stop() error {
	if n.fwd != nil {
		_ = n.fwd.Close()
	}
	return RemoveNode(filepath.Dir(n.dir))
}

// RemoveNode removes the real node of the cluster in clusterDir, whether its processes are
// still running or their supervisor died: every process in the node's mount namespace or its
// cgroups is killed, the cgroups removed, and the veth pair deleted (with it the host route).
// The namespaces' mounts go with their last process. A cluster without a real node has nothing
// to remove.
func RemoveNode(clusterDir string) error {
	dir := filepath.Join(clusterDir, "node")
	b, err := os.ReadFile(filepath.Join(dir, "index"))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	index, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return fmt.Errorf("%s: %w", filepath.Join(dir, "index"), err)
	}
	n := &node{dir: dir, index: index}
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	var errs []error
	for attempt := 0; ; attempt++ {
		pids := n.processes(hs)
		if len(pids) == 0 {
			break
		}
		if attempt == 100 { // 10 s
			errs = append(errs, fmt.Errorf("processes of the real node still running after SIGKILL: %v", pids))
			break
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, h := range hs {
		if err := removeCgroupTree(filepath.Join(h, n.cgroupRoot())); err != nil {
			errs = append(errs, err)
		}
	}
	if out, err := exec.Command("ip", "link", "del", n.link()).CombinedOutput(); err != nil && !strings.Contains(string(out), "Cannot find device") {
		errs = append(errs, fmt.Errorf("ip link del %s: %w: %s", n.link(), err, out))
	}
	if len(errs) == 0 {
		errs = append(errs, os.Remove(filepath.Join(dir, "index")))
	}
	return errors.Join(errs...)
}

// processes are the PIDs in the node's mount namespace (the holder's: containerd, its shims, the
// kubelet, kube-proxy), in its cgroups (the containers), or naming its directory (a leftover
// whose holder is gone).
func (n *node) processes(hierarchies []string) []int {
	var mntNS string
	if b, err := os.ReadFile(filepath.Join(n.dir, "holder.pid")); err == nil {
		mntNS, _ = os.Readlink(filepath.Join("/proc", strings.TrimSpace(string(b)), "ns", "mnt"))
	}
	self, _ := os.Readlink("/proc/self/ns/mnt")
	seen := map[int]bool{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		if ns, err := os.Readlink(filepath.Join("/proc", e.Name(), "ns", "mnt")); err == nil && mntNS != "" && ns == mntNS && ns != self {
			seen[pid] = true
		}
		if b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline")); err == nil && strings.Contains(string(b), n.dir+"/") {
			seen[pid] = true
		}
	}
	for _, h := range hierarchies {
		_ = filepath.WalkDir(filepath.Join(h, n.cgroupRoot()), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || d.Name() != "cgroup.procs" {
				return nil
			}
			b, _ := os.ReadFile(path)
			for _, f := range strings.Fields(string(b)) {
				if pid, err := strconv.Atoi(f); err == nil {
					seen[pid] = true
				}
			}
			return nil
		})
	}
	pids := make([]int, 0, len(seen))
	for pid := range seen {
		pids = append(pids, pid)
	}
	return pids
}

// removeCgroupTree removes a cgroup and its children, deepest first (a cgroup directory is
// removed with rmdir once it has no processes and no children).
func removeCgroupTree(dir string) error {
	entries, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, e := range entries {
		if e.IsDir() {
			if err := removeCgroupTree(filepath.Join(dir, e.Name())); err != nil {
				return err
			}
		}
	}
	var rmErr error
	for range 50 { // a killed process leaves its cgroup a moment after it is gone from /proc
		if rmErr = syscall.Rmdir(dir); rmErr == nil || errors.Is(rmErr, os.ErrNotExist) {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("removing cgroup %s: %w", dir, rmErr)
}

// LoadImages imports image archives (`go tool task image`'s dist/<pattern>-linux-<arch>.tar) into
// the containerd of the real node of the cluster in clusterDir, as `kind load image-archive` does
// for kind. A Pod then runs the image with no registry: its tag is not :latest, so the kubelet
// uses what is there.
func LoadImages(ctx context.Context, clusterDir string, archives ...string) error {
	if len(archives) == 0 {
		return errors.New("load-image: name one or more image archives")
	}
	if _, err := os.Stat(filepath.Join(clusterDir, "node", "index")); err != nil {
		return fmt.Errorf("the cluster in %s has no real node (go tool task cluster:up NODE=real)", clusterDir)
	}
	bins, err := controlplane.EnsureSet(ctx, NodeSet)
	if err != nil {
		return err
	}
	n := &node{dir: filepath.Join(clusterDir, "node"), bins: bins}
	for _, a := range archives {
		if err := n.importImage(ctx, a); err != nil {
			return err
		}
	}
	return nil
}
