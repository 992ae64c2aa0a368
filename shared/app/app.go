// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

// Package app is the command line every kpatterns binary shares — `manifests`, `install`, `run`
// and `certs` — and the small helpers a pattern's main.go builds its manager from
// (ManagerOptions, AddProbes, Start). The manager itself, its cache scope and its controllers are
// wired in the pattern's own main.go.
package app

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
)

// Pattern declares what `manifests` and `install` render for one pattern.
type Pattern struct {
	// Name names the binary, its ServiceAccount, RBAC objects, Deployment and leader-election Lease.
	Name string
	// Config holds the generated manifests (the pattern's config package): crd/*.yaml,
	// rbac/role.yaml and webhook/manifests.yaml, each optional.
	Config fs.FS
	// AdmissionOnly: the pattern has webhooks and no controller, so it needs no leader election:
	// every replica serves, and no Lease or leader-election Role is rendered.
	AdmissionOnly bool
	// Workers is the default of `run --max-concurrent-reconciles` (0: 1, controller-runtime's).
	Workers int
	// Features are the pattern's optional parts, each off unless `--with` names it.
	Features []Feature
}

// A Feature is an optional part of a pattern that needs permissions the pattern otherwise does
// not: `manifests --with NAME` (install, chart) adds its rules — the ClusterRole NAME in the
// config's rbac/features.yaml — to the pattern's RBAC and passes `--with NAME` to the
// Deployment's run, which enables it. Without it, neither is granted.
type Feature struct {
	Name string
	Help string // what it does, for --with's usage
}

// RunFunc is a pattern's `run`: it builds the manager on cfg (the kubeconfig's, impersonating the
// ServiceAccount with --as-service-account) from o, registers the pattern's controllers and
// webhooks, and serves until ctx ends.
type RunFunc func(ctx context.Context, cfg *rest.Config, o RunOptions) error

// InstallFieldManager is the field manager `install` applies with.
const InstallFieldManager = "kpatterns-install"

const usage = `usage: %[1]s <command> [flags]

commands:
  manifests [--image IMG] [--command CMD] [--watch-namespaces NS,...]   print the YAML to deploy %[1]s
            [--webhook-url URL] [--ca-file FILE] [--certs self|cert-manager|manual]
            [--replicas N] [--node-selector K=V,...] [--tolerations K=V:EFFECT,...]
            [--admission webhook|policy|both]
  install   (the flags of manifests)                                    server-side apply it with the current kubeconfig,
                                                                          and delete what an earlier install applied that it no longer renders
  uninstall [--crds]                                                      delete what install applied (the CRDs, and every object of them, only with --crds)
  chart     --dir DIR --image IMG (the flags of manifests)               write a Helm chart whose default values render what manifests does
  run       [--as-service-account] [--leader-elect=false] [--leader-elect-lease-duration D] [--watch-namespaces NS,...]
            [--webhook-port N] [--webhook-host H] [--cert-dir DIR]      run in the foreground
            [--certs self] [--enable-http2] [--admission webhook|policy]
  certs     --dir DIR [--hosts 127.0.0.1,...] [--force|--renew]         write a development CA and serving certificate
                                                                          (webhook patterns)

The operator namespace is $KPATTERNS_NAMESPACE, else the in-cluster namespace, else "default".
Run '%[1]s <command> -h' for a command's flags.
`

// Main runs the command line and exits the process: 0 on success, 1 on a failure, 2 on bad usage.
// run is the pattern's `run`; flags bind the pattern's own flags of it.
func Main(p Pattern, run RunFunc, flags ...func(*flag.FlagSet)) {
	err := Execute(ctrl.SetupSignalHandler(), p, run, flags, os.Args[1:], os.Stdout, os.Stderr)
	var u usageError
	switch {
	case err == nil:
	case errors.Is(err, flag.ErrHelp):
	case errors.As(err, &u):
		fmt.Fprintf(os.Stderr, "%s: %v (run '%s help')\n", p.Name, err, p.Name)
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %s\n", p.Name, oneLine(err))
		os.Exit(1)
	}
}

type usageError struct{ error }

// Execute runs one command line: Main without the exit.
func Execute(ctx context.Context, p Pattern, runPattern RunFunc, flags []func(*flag.FlagSet), args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "help" || args[0] == "-h" || args[0] == "--help" {
		if _, err := fmt.Fprintf(stdout, usage, p.Name); err != nil || len(p.Features) == 0 {
			return err
		}
		_, err := fmt.Fprintf(stdout, "\nOptional features (--with NAME,... on manifests, install, chart and run): %s\n", featureUsage(p))
		return err
	}
	cmd, args := args[0], args[1:]
	fs := flag.NewFlagSet(p.Name+" "+cmd, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { _, _ = fmt.Fprintf(fs.Output(), "flags of '%s %s':\n", p.Name, cmd); fs.PrintDefaults() }
	var o Options
	o.Namespace = OperatorNamespace()
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "path to a kubeconfig (default: $KUBECONFIG, in-cluster, ~/.kube/config)")
	watch := fs.String("watch-namespaces", "", "comma-separated namespaces to watch (empty: all)")
	with := new("")
	if len(p.Features) > 0 && cmd != "certs" {
		fs.StringVar(with, "with", "", "comma-separated optional features to enable: "+featureUsage(p))
	}
	var run func() error
	switch cmd {
	case "manifests", "install", "uninstall", "chart":
		run = deployCommand(ctx, p, cmd, fs, &o, stdout, stderr)
	case "run":
		var err error
		if run, err = runCommand(ctx, p, runPattern, flags, fs, &o); err != nil {
			return err
		}
	case "certs":
		run = certsCommand(p, fs, &o, stdout)
	default:
		return usageError{fmt.Errorf("unknown command %q", cmd)}
	}
	fs.SetOutput(io.Discard) // errors are reported on one line by Main
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			fs.SetOutput(stderr)
			fs.Usage()
			return err
		}
		return usageError{err}
	}
	if fs.NArg() > 0 {
		return usageError{fmt.Errorf("unexpected argument %q", fs.Arg(0))}
	}
	o.WatchNamespaces = splitList(*watch)
	o.With = splitList(*with)
	for _, f := range o.With {
		if !slices.ContainsFunc(p.Features, func(x Feature) bool { return x.Name == f }) {
			return usageError{fmt.Errorf("--with %s: %s has no such feature (it has: %s)", f, p.Name, featureUsage(p))}
		}
	}
	return run()
}

// deployCommand binds the flags of manifests, install and uninstall (cmd) to o and returns what
// the command does once they are parsed.
func deployCommand(ctx context.Context, p Pattern, cmd string, fs *flag.FlagSet, o *Options, stdout, stderr io.Writer) func() error {
	crds := fs.Bool("crds", false, "uninstall: delete the pattern's CRDs too, and with them every object of their kinds")
	fs.StringVar(&o.Image, "image", "", "container image: also render a Deployment running it")
	fs.StringVar(&o.Command, "command", "", "the container's command, split on spaces (default /manager); run is appended")
	fs.StringVar(&o.WebhookURL, "webhook-url", "", "https://host:port of a webhook running outside the cluster (run --webhook-port): rendered as clientConfig.url instead of a Service")
	fs.StringVar(&o.CAFile, "ca-file", "", "PEM CA of the webhook's serving certificate (certs writes ca.crt): the webhooks' caBundle")
	fs.StringVar(&o.Certs, "certs", "", "with --image, where the webhooks' serving certificate comes from: self (the pattern keeps it, with cert-controller), cert-manager, or manual (your Secret, and --ca-file); default self, or manual with --ca-file")
	replicas := fs.Int("replicas", 0, "replicas of the Deployment (0: 2 for a pattern with webhooks, with a PodDisruptionBudget; else 1)")
	fs.StringVar(&o.CPURequest, "cpu-request", "10m", "the container's CPU request")
	fs.StringVar(&o.MemoryRequest, "memory-request", "64Mi", "the container's memory request")
	fs.StringVar(&o.MemoryLimit, "memory-limit", "256Mi", "the container's memory limit")
	nodeSelector := fs.String("node-selector", "", "key=value[,key=value]: the Pods' nodeSelector (default: none)")
	tolerations := fs.String("tolerations", "", "key=value:Effect or key:Effect, comma-separated: the Pods' tolerations (default: none)")
	networkPolicies := fs.Bool("network-policies", true, "with --image, NetworkPolicies that let only Pods of namespaces labelled metrics=enabled reach /metrics, and anyone the webhook port")
	fs.BoolVar(&o.ServiceMonitor, "service-monitor", false, "with --image, a prometheus-operator ServiceMonitor of the metrics Service (its CRD must be installed)")
	fs.StringVar(&o.Admission, "admission", AdmissionWebhook, "what enforces the admission rules: webhook, policy (ValidatingAdmissionPolicy and MutatingAdmissionPolicy, run by kube-apiserver: nothing to deploy for an admission-only pattern), or both")
	dir := new("")
	if cmd == "chart" {
		fs.StringVar(dir, "dir", "", "the directory to write the Helm chart into (replaced)")
	}
	return func() error {
		if *replicas < 0 || *replicas > 1000 {
			return usageError{fmt.Errorf("--replicas %d: want 1 to 1000 (0: the default)", *replicas)}
		}
		var err error
		if o.NodeSelector, err = labels.ConvertSelectorToLabelsMap(*nodeSelector); err != nil {
			return usageError{fmt.Errorf("--node-selector %q: %w", *nodeSelector, err)}
		}
		if o.Tolerations, err = ParseTolerations(*tolerations); err != nil {
			return usageError{err}
		}
		o.Replicas, o.NoNetworkPolicies = int32(*replicas), !*networkPolicies
		if cmd == "chart" {
			return WriteChart(p, *o, *dir)
		}
		objs, err := Objects(p, *o)
		if err != nil {
			return err
		}
		if hooks, err := HasWebhooks(p); err == nil && hooks && o.Image == "" && o.WebhookURL == "" && o.Admission != AdmissionPolicy && cmd != "uninstall" {
			_, _ = fmt.Fprintf(stderr, "%s: no webhook configurations rendered: nothing would serve them; pass --image to deploy, or --webhook-url and --ca-file to run the webhook from here\n", p.Name)
		}
		if cmd == "manifests" {
			return WriteYAML(stdout, objs)
		}
		cfg, err := restConfig(o.Kubeconfig)
		if err != nil {
			return err
		}
		if cmd == "uninstall" {
			return Uninstall(ctx, cfg, p, objs, *crds, stdout)
		}
		if err := Install(ctx, cfg, objs, stdout); err != nil {
			return err
		}
		return Prune(ctx, cfg, p, objs, stdout)
	}
}

// runCommand binds run's flags (the webhook server's only where the pattern has one, then the
// pattern's own: flags) and returns what run does once they are parsed.
func runCommand(ctx context.Context, p Pattern, runPattern RunFunc, flags []func(*flag.FlagSet), fs *flag.FlagSet, o *Options) (func() error, error) {
	hooks, err := HasWebhooks(p)
	if err != nil {
		return nil, err
	}
	r := RunOptions{WebhookPort: WebhookPort, CertDir: CertDir}
	fs.BoolVar(&r.AsServiceAccount, "as-service-account", false, "impersonate the generated ServiceAccount, so its RBAC is what is tested")
	fs.BoolVar(&r.LeaderElect, "leader-elect", true, "elect a leader through a Lease in the operator namespace")
	fs.DurationVar(&r.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a standby waits before taking over a Lease its leader stopped renewing")
	fs.DurationVar(&r.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long the leader keeps trying to renew before it gives up leadership")
	fs.DurationVar(&r.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often candidates try to acquire or renew the Lease")
	fs.IntVar(&r.Workers, "max-concurrent-reconciles", max(p.Workers, 1), "reconcile workers of each controller (distinct objects are reconciled in parallel; one object never is)")
	fs.StringVar(&r.ProbeAddr, "health-probe-bind-address", ":8081", "address of /healthz and /readyz (kubebuilder's default)")
	fs.StringVar(&r.MetricsAddr, "metrics-bind-address", ":8443", "address of /metrics, HTTPS unless --metrics-secure=false (0 disables; kubebuilder's default)")
	fs.StringVar(&r.PprofAddr, "pprof-bind-address", "0", "address of /debug/pprof, plain HTTP without authentication: a loopback address such as 127.0.0.1:6060 (0 disables)")
	fs.BoolVar(&r.MetricsSecure, "metrics-secure", true, "serve /metrics over HTTPS to callers the API server authenticates and authorizes (false: plain HTTP, for local runs)")
	fs.Float64Var(&r.KubeAPIQPS, "kube-api-qps", 0, "most requests per second to the API server from this process (0: no client-side bound)")
	fs.BoolVar(&r.EnableHTTP2, "enable-http2", false, "let the webhook and metrics servers speak HTTP/2 (off by default since the HTTP/2 Rapid Reset CVEs)")
	if hooks { // the webhook server's flags, offered only where there is one
		fs.IntVar(&r.WebhookPort, "webhook-port", WebhookPort, "port of the admission webhooks")
		fs.StringVar(&r.WebhookHost, "webhook-host", "", "address the webhooks listen on (empty: all)")
		fs.StringVar(&r.CertDir, "cert-dir", CertDir, "directory with tls.crt and tls.key; a rotated certificate is served without a restart")
		fs.StringVar(&o.Admission, "admission", AdmissionWebhook, "policy: the rules are enforced by admission policies, so no webhook server is started")
		fs.StringVar(&o.Certs, "certs", "", "self: keep the serving certificate in the pattern's Secret (mounted at --cert-dir) and the CA in its webhook configurations, renewed before expiry (in-cluster; manifests --image renders it); empty: the files in --cert-dir")
	}
	r.Zap.BindFlags(fs)
	for _, bind := range flags {
		bind(fs)
	}
	return func() error { r.Options = *o; return Run(ctx, p, r, runPattern) }, nil
}

// certsCommand binds the flags of certs and returns what it does once they are parsed.
func certsCommand(p Pattern, fs *flag.FlagSet, o *Options, stdout io.Writer) func() error {
	var c CertOptions
	var hosts string
	fs.StringVar(&c.Dir, "dir", "", "directory to write ca.crt, tls.crt, tls.key and secret.yaml into")
	fs.StringVar(&hosts, "hosts", "", "extra IP addresses or DNS names the certificate covers (127.0.0.1 for a webhook run on the local machine)")
	fs.BoolVar(&c.Force, "force", false, "overwrite existing files")
	fs.BoolVar(&c.Renew, "renew", false, "sign a new serving certificate with the CA already in --dir (rotation without a caBundle change)")
	return func() error {
		if c.Dir == "" {
			return usageError{errors.New("certs needs --dir")}
		}
		c.Hosts = splitList(hosts)
		if err := WriteCerts(p.Name, o.Namespace, c); err != nil {
			return err
		}
		_, err := fmt.Fprintf(stdout, "wrote %s, %s, %s and %s in %s for %s\n", CAFile, CertFile, KeyFile, SecretFile, c.Dir,
			strings.Join(append([]string{ServiceHost(p.Name, o.Namespace)}, c.Hosts...), ", "))
		return err
	}
}

// OperatorNamespace is $KPATTERNS_NAMESPACE, else the in-cluster namespace, else "default".
func OperatorNamespace() string {
	if ns := os.Getenv("KPATTERNS_NAMESPACE"); ns != "" {
		return ns
	}
	if b, err := os.ReadFile("/var/run/secrets/kubernetes.io/serviceaccount/namespace"); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return "default"
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}

// featureUsage names p's features with what each does.
func featureUsage(p Pattern) string {
	names := make([]string, len(p.Features))
	for i, f := range p.Features {
		names[i] = f.Name + " (" + f.Help + ")"
	}
	return strings.Join(names, ", ")
}
