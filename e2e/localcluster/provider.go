// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package localcluster

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/e2e-framework/klient"
	"sigs.k8s.io/e2e-framework/support"
)

// Provider is the local cluster as an e2e-framework cluster provider:
// envfuncs.CreateCluster(localcluster.NewProvider(), name) starts one in a temporary directory,
// envfuncs.DestroyCluster(name) stops it and removes its files.
type Provider struct {
	name    string
	opts    Options
	cluster *Cluster
}

var _ support.E2EClusterProviderWithImageLoader = (*Provider)(nil)

// NewProvider returns a provider for one local cluster, started with o.
func NewProvider(o Options) *Provider { return &Provider{name: "kpatterns", opts: o} }

func (p *Provider) SetDefaults() support.E2EClusterProvider                    { return p }
func (p *Provider) WithName(name string) support.E2EClusterProvider            { p.name = name; return p }
func (p *Provider) WithVersion(string) support.E2EClusterProvider              { return p } // pinned in tools/controlplane
func (p *Provider) WithPath(string) support.E2EClusterProvider                 { return p } // binaries come from the cache
func (p *Provider) WithOpts(...support.ClusterOpts) support.E2EClusterProvider { return p }

// Create starts the cluster and returns the path of its admin kubeconfig.
func (p *Provider) Create(ctx context.Context, _ ...string) (string, error) {
	dir, err := os.MkdirTemp("", "kpatterns-"+p.name+"-")
	if err != nil {
		return "", err
	}
	c, err := Start(ctx, dir, p.opts)
	if err != nil {
		_ = os.RemoveAll(dir)
		return "", err
	}
	p.cluster = c
	return c.Kubeconfig, nil
}

// CreateWithConfig is Create: the local cluster takes no configuration file.
func (p *Provider) CreateWithConfig(ctx context.Context, _ string) (string, error) {
	return p.Create(ctx)
}

func (p *Provider) GetKubeconfig() string {
	if p.cluster == nil {
		return ""
	}
	return p.cluster.Kubeconfig
}

func (p *Provider) GenerateKubeconfig(...string) (string, error) {
	if p.cluster == nil {
		return "", fmt.Errorf("cluster %s is not running", p.name)
	}
	return p.cluster.Kubeconfig, nil
}

func (p *Provider) GetKubectlContext() string { return "envtest" }

// ExportLogs copies every component's log into dest.
func (p *Provider) ExportLogs(ctx context.Context, dest string) error {
	if p.cluster == nil {
		return nil
	}
	if err := os.MkdirAll(dest, 0o755); err != nil {
		return err
	}
	return exec.CommandContext(ctx, "cp", "-r", filepath.Join(p.cluster.Dir, "logs"), dest).Run()
}

// Destroy stops the cluster and removes its directory.
func (p *Provider) Destroy(context.Context) error {
	if p.cluster == nil {
		return nil
	}
	err := p.cluster.Stop()
	if rmErr := os.RemoveAll(p.cluster.Dir); err == nil {
		err = rmErr
	}
	p.cluster = nil
	return err
}

// Cluster is the running cluster (nil before Create): tests restart its components through it.
func (p *Provider) Cluster() *Cluster { return p.cluster }

// WaitForControlPlane returns at once: Create returns only when the node is Ready.
func (p *Provider) WaitForControlPlane(context.Context, klient.Client) error { return nil }

func (p *Provider) KubernetesRestConfig() *rest.Config {
	if p.cluster == nil {
		return nil
	}
	return p.cluster.Config
}

// LoadImageArchive imports an image archive into the real node's containerd, as kind load
// image-archive does for kind (envfuncs.LoadImageArchiveToCluster).
func (p *Provider) LoadImageArchive(ctx context.Context, archive string, _ ...string) error {
	if p.cluster == nil {
		return fmt.Errorf("cluster %s is not running", p.name)
	}
	return p.cluster.LoadImages(ctx, archive)
}

// LoadImage would copy an image from a Docker engine: the local cluster has none.
func (p *Provider) LoadImage(context.Context, string, ...string) error {
	return fmt.Errorf("the local cluster loads image archives only (LoadImageArchive): it has no Docker engine to copy %s from", p.name)
}
