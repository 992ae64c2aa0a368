// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Command coredns is CoreDNS (the version kubeadm deploys for the control plane's Kubernetes
// version, `kubeadm config images list`) for the kind node image, with the plugins a kind
// cluster's Corefile uses: kubeadm's (errors, health, ready, kubernetes, prometheus, forward,
// cache, loop, reload, loadbalance) and those users add to it (log, hosts, rewrite, template,
// whoami). CoreDNS's own main links every plugin, the cloud providers' SDKs with them, which takes
// minutes more to compile; this is the build CoreDNS documents for a chosen set of plugins.
// A module of its own, so its dependencies do not move the control plane's.
package main

import (
	_ "github.com/coredns/coredns/core/dnsserver" // the server; its Directives order the plugins
	"github.com/coredns/coredns/coremain"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"
	_ "github.com/coredns/coredns/plugin/template"
	_ "github.com/coredns/coredns/plugin/whoami"
)

func main() { coremain.Run() }
