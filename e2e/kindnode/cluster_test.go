// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package kindnode

import (
	"os"
	"strings"
	"testing"

	"sigs.k8s.io/kind/pkg/apis/config/v1alpha4"
	"sigs.k8s.io/yaml"

	"github.com/kpatterns/kpatterns/e2e/dockerd"
	"github.com/kpatterns/kpatterns/e2e/localcluster"
)

// Config is a kind v1alpha4 Cluster with one control-plane node, the kubelet's sync period, and
// this host's needs: failCgroupV1 off on cgroup v1, restrict_oom_score_adj without
// CAP_SYS_RESOURCE.
func TestConfig(t *testing.T) {
	config, err := Config()
	if err != nil {
		t.Fatal(err)
	}
	var c v1alpha4.Cluster
	if err := yaml.UnmarshalStrict([]byte(config), &c); err != nil {
		t.Fatalf("%v\n%s", err, config)
	}
	if c.Kind != "Cluster" || len(c.Nodes) != 1 || c.Nodes[0].Role != v1alpha4.ControlPlaneRole || !c.FeatureGates["ShardedListAndWatch"] {
		t.Errorf("want one control-plane node and ShardedListAndWatch on:\n%s", config)
	}
	if len(c.KubeadmConfigPatchesJSON6902) != 1 || !strings.Contains(c.KubeadmConfigPatchesJSON6902[0].Patch, "enable-aggregator-routing") {
		t.Errorf("want kube-apiserver's --enable-aggregator-routing added:\n%s", config)
	}
	if !strings.Contains(c.KubeadmConfigPatchesJSON6902[0].Patch, "NodeRestriction,"+localcluster.AdmissionPlugins) {
		t.Errorf("want kube-apiserver's admission plugins, kubeadm's NodeRestriction kept:\n%s", config)
	}
	var kubelet map[string]any
	if len(c.KubeadmConfigPatches) != 1 || yaml.Unmarshal([]byte(c.KubeadmConfigPatches[0]), &kubelet) != nil {
		t.Fatalf("want one KubeletConfiguration patch:\n%s", config)
	}
	if kubelet["kind"] != "KubeletConfiguration" || kubelet["syncFrequency"] != "10s" {
		t.Errorf("kubelet patch %v: want KubeletConfiguration with syncFrequency 10s", kubelet)
	}
	_, statErr := os.Stat("/sys/fs/cgroup/cgroup.controllers")
	if v1 := os.IsNotExist(statErr); (kubelet["failCgroupV1"] == false) != v1 {
		t.Errorf("cgroup v1 host: %v, failCgroupV1 in the patch: %v", v1, kubelet["failCgroupV1"])
	}
	missing, err := dockerd.MissingCaps()
	if err != nil {
		t.Fatal(err)
	}
	if len(c.ContainerdConfigPatches) != 1 || !strings.Contains(c.ContainerdConfigPatches[0], `config_path = "/etc/containerd/certs.d"`) {
		t.Fatalf("want one containerd patch reading registry hosts from certs.d:\n%s", config)
	}
	if restricted := strings.Contains(c.ContainerdConfigPatches[0], "restrict_oom_score_adj = true"); restricted != missing["CAP_SYS_RESOURCE"] {
		t.Errorf("CAP_SYS_RESOURCE missing: %v, containerd patch restricts OOM score: %v", missing["CAP_SYS_RESOURCE"], restricted)
	}
}
