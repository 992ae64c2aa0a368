package e2e

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"
	"sigs.k8s.io/e2e-framework/pkg/features"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/mirror/controller"
)

// TestLeaderElection runs two replicas of a pattern: only the Lease holder acts; when it is
// stopped (SIGTERM) it releases the Lease and the other takes over. Local cluster only: on kind
// the pattern runs as a Deployment.
func TestLeaderElection(t *testing.T) {
	if kindRun {
		t.Skip("runs pattern processes locally; the kind path deploys a Deployment instead")
	}
	ns := envconf.RandomName("leader", 12)
	lease := client.ObjectKey{Namespace: operatorNamespace, Name: "kpatterns-mirror"}
	holder := func(ctx context.Context, c client.Client) (string, error) {
		l := &coordinationv1.Lease{}
		if err := c.Get(ctx, lease, l); err != nil {
			return "", client.IgnoreNotFound(err)
		}
		if l.Spec.HolderIdentity == nil {
			return "", nil
		}
		return *l.Spec.HolderIdentity, nil
	}
	mirrored := func(t *testing.T, c client.Client, name string) {
		t.Helper()
		src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns,
			Labels: map[string]string{controller.Label: controller.Source}}, Data: map[string]string{"k": "v"}}
		if err := c.Create(context.Background(), src); err != nil {
			t.Fatal(err)
		}
		waitFor(t, name+" mirrored", func(ctx context.Context) (bool, error) {
			err := c.Get(ctx, client.ObjectKey{Namespace: ns, Name: name + controller.Suffix}, &corev1.ConfigMap{})
			return err == nil, client.IgnoreNotFound(err)
		})
	}
	f := features.New("leader election").
		Assess("the Lease holder acts; on SIGTERM it hands over to the other replica", func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			c := clientFor(t, cfg)
			if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
				t.Fatal(err)
			}
			installPattern(ctx, t, cfg, "mirror")
			start := func(name string) *localcluster.Pattern {
				log, err := os.Create(filepath.Join(logs, name+".log"))
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = log.Close() })
				p, err := localcluster.RunPattern(ctx, filepath.Join(bins, "mirror"), cfg.KubeconfigFile(), operatorNamespace, log, false)
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { _ = p.Stop(30 * time.Second) })
				return p
			}
			first := start("mirror-replica-1")
			var leader string
			waitFor(t, "the first replica to take the Lease", func(ctx context.Context) (bool, error) {
				h, err := holder(ctx, c)
				leader = h
				return h != "", err
			})
			start("mirror-replica-2")
			mirrored(t, c, "before")

			if err := first.Stop(30 * time.Second); err != nil {
				t.Fatalf("the leader did not stop cleanly: %v", err)
			}
			waitFor(t, "the second replica to take the Lease", func(ctx context.Context) (bool, error) {
				h, err := holder(ctx, c)
				return h != "" && h != leader, err
			})
			mirrored(t, c, "after")
			return ctx
		}).
		Teardown(func(ctx context.Context, t *testing.T, cfg *envconf.Config) context.Context {
			_ = clientFor(t, cfg).Delete(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}})
			return ctx
		}).
		Feature()
	testEnv.Test(t, f)
}
