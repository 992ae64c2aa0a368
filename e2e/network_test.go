// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"errors"
	"net"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
)

// TestClusterIPFailsLocally: nothing on this machine serves the local cluster's Service range, so
// a call to a ClusterIP without endpoints must fail on the machine, at once, instead of following
// the default route off it. The route is checked first; the dial is made only once the kernel has
// said the address is unreachable, so the test itself never sends a packet out.
func TestClusterIPFailsLocally(t *testing.T) {
	if kindRun {
		t.Skip("kind's kube-proxy serves its Service range")
	}
	f := features.New("service range").
		Assess("a ClusterIP without endpoints is unreachable here", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "nothing-serves", Namespace: "default"},
				Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 443, TargetPort: intstr.FromInt32(9443)}}}}
			if err := c.Create(ctx, svc); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = c.Delete(context.Background(), svc) })
			ip := svc.Spec.ClusterIP
			if _, network, _ := net.ParseCIDR(localcluster.ServiceRange); !network.Contains(net.ParseIP(ip)) {
				t.Fatalf("ClusterIP %q is outside the Service range %s", ip, localcluster.ServiceRange)
			}
			out, err := exec.CommandContext(ctx, "ip", "route", "get", ip).CombinedOutput()
			if err == nil || !strings.Contains(string(out), "No route to host") {
				t.Fatalf("ip route get %s: %q (%v): the route would carry a ClusterIP off this machine", ip, out, err)
			}
			began := time.Now()
			conn, err := (&net.Dialer{Timeout: 2 * time.Second}).DialContext(ctx, "tcp", net.JoinHostPort(ip, "443"))
			if err == nil {
				_ = conn.Close()
				t.Fatalf("%s:443 answered", ip)
			}
			if !errors.Is(err, syscall.EHOSTUNREACH) && !errors.Is(err, syscall.ENETUNREACH) {
				t.Errorf("dial %s: %v after %s, want the kernel's unreachable at once", ip, err, time.Since(began))
			}
			return ctx
		})
	testEnv.Test(t, f.Feature())
}
