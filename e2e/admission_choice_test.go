// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/deploypolicy/webhook"
	"github.com/kpatterns/kpatterns/shared/testenv"
)

// TestAdmissionChoice measures what deploypolicy's rules cost at kube-apiserver as a webhook and
// as admission policies, against no admission at all, in one run on the local cluster: paced
// server-side dry-run creates of a Deployment (admission runs, nothing is stored) into a governed
// namespace with a policy ConfigMap (the webhook's live GET, the policy's param), and as the
// baseline, right before each, into the operator namespace that both forms exclude. The webhook
// runs as its own process (by URL, as its ServiceAccount); then it is removed and the policies are
// installed with `install --admission=policy`. Reported per rate and form: p50 and p99, what each
// adds to its baseline, how busy the machine was, and CPU seconds per 1,000 requests of
// kube-apiserver and of the webhook process.
//
// With KPATTERNS_BENCH_ADMISSION=1 (`go tool task bench:admission`): 50/s and 200/s, 5 s each,
// written to docs/admission.md. Without it (the e2e suite) 50/s for 2 s, written into the run's
// logs: the harness and both forms' denials are checked, no figure is judged.
func TestAdmissionChoice(t *testing.T) {
	if kindRun {
		t.Skip("measured on the local cluster: go tool task bench:admission")
	}
	rates, seconds, out := []int{50, 200}, 5, outPath(os.Getenv("KPATTERNS_BENCH_OUT"), "admission.md")
	command := "KPATTERNS_BENCH_ADMISSION=1 go test -count=1 -v -run TestAdmissionChoice ./e2e/"
	if os.Getenv("KPATTERNS_BENCH_ADMISSION") == "" {
		rates, seconds, out = []int{50}, 2, filepath.Join(logs, "admission.md")
		command = "go test -count=1 -v -run TestAdmissionChoice ./e2e/ (the e2e suite's size)"
	}
	const governed = "e2e-admission-choice"
	var rows []string
	f := features.New("admission choice").
		Assess("webhook, then policy, against none", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			rc := rest.CopyConfig(cfg.Client().RESTConfig())
			rc.QPS = -1 // the load must not be throttled by client-go's default limiter
			c, err := client.New(rc, client.Options{Scheme: scheme})
			if err != nil {
				t.Fatal(err)
			}
			for _, o := range []client.Object{testNamespace(governed),
				&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: webhook.PolicyConfigMap, Namespace: governed}, Data: map[string]string{webhook.MaxReplicasKey: "10"}}} {
				if err := c.Create(ctx, o); err != nil {
					t.Fatal(err)
				}
			}
			t.Cleanup(func() {
				_ = c.Delete(context.Background(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: governed}})
			})
			apiserver, err := apiServerPID(filepath.Dir(cfg.KubeconfigFile()))
			if err != nil {
				t.Fatal(err)
			}
			create := func(ns string, replicas int32) func(int) error {
				return func(i int) error {
					d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("choice-%d", i), Namespace: ns},
						Spec: appsv1.DeploymentSpec{Replicas: ptr.To(replicas), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "choice"}},
							Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "choice"}},
								Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1.27"}}}}}}
					return c.Create(ctx, d, client.DryRunAll)
				}
			}
			// measure runs one form's phases at every rate: the baseline, then the form.
			measure := func(form string, webhookPID int) {
				for _, rate := range rates {
					n := rate * seconds
					base := phase(t, apiserver, 0, rate, n, create(operatorNamespace, 1))
					got := phase(t, apiserver, webhookPID, rate, n, create(governed, 1))
					rows = append(rows, base.row(rate, "none", nil), got.row(rate, form, &base))
				}
			}
			stop := runPattern(ctx, t, cfg, "deploypolicy")
			denied(t, create(governed, 11)(0), "admission webhook", "namespace policy allows at most 10 replicas")
			measure("webhook", processes["deploypolicy"].Cmd.Process.Pid)
			removeWebhooks(ctx, t, cfg, "deploypolicy")
			stop()
			installPattern(ctx, t, cfg, "deploypolicy", "--admission=policy")
			t.Cleanup(func() {
				patternCommand(context.Background(), t, cfg, "deploypolicy", "uninstall", "--admission=policy")
			})
			testenv.Eventually(t, "the policies in effect", func() error {
				err := create(governed, 11)(0)
				if err == nil || !strings.Contains(err.Error(), "ValidatingAdmissionPolicy") {
					return fmt.Errorf("11 replicas: %v", err)
				}
				return nil
			})
			denied(t, create(governed, 11)(0), "ValidatingAdmissionPolicy", "namespace policy allows at most 10 replicas")
			measure("policy", 0)
			return ctx
		}).Feature()
	began := time.Now()
	testEnv.Test(t, f)
	page := fmt.Sprintf(`# Webhook or policy: what deploypolicy's rules cost

Written by `+"`go tool task bench:admission`"+` (%s) on %s. Command: `+"`%s`"+`.
The run took %s.

Paced server-side dry-run creates of a Deployment (admission runs; nothing is stored) into a
namespace with the policy ConfigMap (maxReplicas 10: the webhook reads it live, the policy as its
param), each phase %d s; every form right after its own baseline, "none": the same creates into the
operator namespace that both forms exclude. The webhook is deploypolicy as its own process, called
by URL (mutating, then validating); the policies are its MutatingAdmissionPolicy and three
ValidatingAdmissionPolicies, run inside kube-apiserver. "added" is the form's percentile minus its
baseline's; "machine busy" is all CPUs, every process of the cluster and the load included; CPU is
per 1,000 requests, from /proc.

| rate/s | admission | p50 ms | p99 ms | added p50 ms | added p99 ms | p99 ratio | machine busy | kube-apiserver CPU s / 1,000 | webhook CPU s / 1,000 |
|---|---|---|---|---|---|---|---|---|---|
%s
`, time.Now().UTC().Format("2006-01-02"), machine(), command, time.Since(began).Round(time.Second), seconds, strings.Join(rows, "\n"))
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(out, []byte(page), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s:\n%s", out, page)
}

// denied fails the test unless err is a denial by (a webhook or a policy) saying want.
func denied(t *testing.T, err error, by, want string) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), by) || !strings.Contains(err.Error(), want) {
		t.Fatalf("err = %v, want a denial by %s saying %q", err, by, want)
	}
}

// phaseResult is one phase's latencies and costs.
type phaseResult struct {
	lat                   []time.Duration
	busy, apiCPU, hookCPU float64 // machine busy %, CPU seconds per 1,000 requests
	hasHook               bool
}

// phase runs n calls of op at rate and measures them; webhookPID 0: no webhook process.
func phase(t *testing.T, apiserver, webhookPID, rate, n int, op func(int) error) phaseResult {
	t.Helper()
	cpu0, api0, hook0 := testenv.MachineCPU(), cpuSeconds(apiserver), cpuSeconds(webhookPID)
	lat, err := testenv.Paced(rate, n, op)
	if err != nil {
		t.Fatalf("%d/s: %v", rate, err)
	}
	per := 1000 / float64(n)
	r := phaseResult{lat: lat, busy: testenv.MachineCPU().BusySince(cpu0), apiCPU: (cpuSeconds(apiserver) - api0) * per}
	if webhookPID != 0 {
		r.hookCPU, r.hasHook = (cpuSeconds(webhookPID)-hook0)*per, true
	}
	return r
}

// row is the phase's table row; base, if given, is its baseline.
func (r phaseResult) row(rate int, form string, base *phaseResult) string {
	ms := func(d time.Duration) string { return strconv.FormatFloat(float64(d.Microseconds())/1000, 'f', 1, 64) }
	p50, p99 := testenv.Percentile(r.lat, 50), testenv.Percentile(r.lat, 99)
	added50, added99, ratio := "", "", ""
	if base != nil {
		b50, b99 := testenv.Percentile(base.lat, 50), testenv.Percentile(base.lat, 99)
		added50, added99 = ms(p50-b50), ms(p99-b99)
		if b99 > 0 {
			ratio = strconv.FormatFloat(float64(p99)/float64(b99), 'f', 2, 64)
		}
	}
	hook := "—"
	if r.hasHook {
		hook = strconv.FormatFloat(r.hookCPU, 'f', 2, 64)
	}
	return fmt.Sprintf("| %d | %s | %s | %s | %s | %s | %s | %.0f%% | %.2f | %s |", rate, form, ms(p50), ms(p99), added50, added99, ratio,
		r.busy, r.apiCPU, hook)
}

// apiServerPID finds the local cluster's kube-apiserver: the process of that name whose command
// line names the cluster's directory.
func apiServerPID(dir string) (int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if filepath.Base(args[0]) == "kube-apiserver" && strings.Contains(string(b), dir) {
			return pid, nil
		}
	}
	return 0, errors.New("no kube-apiserver process names " + dir)
}

// cpuSeconds is the user and system CPU time of process pid (0: none), from /proc.
func cpuSeconds(pid int) float64 {
	if pid == 0 {
		return 0
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	_, rest, _ := strings.Cut(string(b), ") ") // after the command name
	fields := strings.Fields(rest)             // state is field 3: utime, stime are 14 and 15
	if len(fields) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(fields[11], 64)
	stime, _ := strconv.ParseFloat(fields[12], 64)
	return (utime + stime) / 100 // USER_HZ
}
