// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package e2e

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/e2e-framework/pkg/envconf"

	"github.com/kpatterns/kpatterns/e2e/localcluster"
	"github.com/kpatterns/kpatterns/shared/app"
)

// probeUser may create ConfigMaps in operatorNamespace and nothing else: what kube-apiserver
// answers its dry-run creates tells whether its admission knows a kind yet.
const probeUser = "kpatterns:e2e:admission-probe"

// applyCRDs applies every pattern's CRDs (config/crd) as `install` does, first thing on a new
// cluster. kube-apiserver's admission learns the kinds of new CRDs only when it refreshes its
// RESTMapper, every 30 s (k8s.io/apiserver/pkg/server/options/admission.go); until then
// OwnerReferencesPermissionEnforcement refuses any child whose controller ownerReference to such
// a kind sets blockOwnerDeletion ("cannot find RESTMapping"), so that a pattern installed on a
// fresh cluster retries its first children for up to 30 s. Applied here, that refresh happens while
// the patterns build, and not in each test's first reconciles; crdsAdmitted waits for it. The
// tests' own installs apply the same CRDs again (unchanged).
func applyCRDs(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	_, objs, err := localcluster.PatternCRDs(root)
	if err != nil {
		return ctx, err
	}
	return ctx, app.Install(ctx, cfg.Client().RESTConfig(), objs, io.Discard)
}

// crdsAdmitted waits, at most a minute, until kube-apiserver's admission maps every kind
// applyCRDs applied: a server-side dry-run create of a ConfigMap whose blocking ownerReference
// names the kind is refused for lacking finalizers permission (the kind is known), no longer for
// lacking its RESTMapping.
func crdsAdmitted(ctx context.Context, cfg *envconf.Config) (context.Context, error) {
	crdKinds, _, err := localcluster.PatternCRDs(root)
	if err != nil {
		return ctx, err
	}
	admin, err := client.New(cfg.Client().RESTConfig(), client.Options{Scheme: scheme})
	if err != nil {
		return ctx, err
	}
	role := &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Name: "kpatterns-e2e-admission-probe", Namespace: operatorNamespace},
		Rules: []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"create"}}}}
	binding := &rbacv1.RoleBinding{ObjectMeta: role.ObjectMeta,
		Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: probeUser}},
		RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: role.Name}}
	if err := admin.Create(ctx, role); err != nil {
		return ctx, err
	}
	if err := admin.Create(ctx, binding); err != nil {
		return ctx, err
	}
	rc := rest.CopyConfig(cfg.Client().RESTConfig())
	rc.Impersonate = rest.ImpersonationConfig{UserName: probeUser}
	probe, err := client.New(rc, client.Options{Scheme: scheme})
	if err != nil {
		return ctx, err
	}
	began := time.Now()
	for _, k := range crdKinds {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "admission-probe", Namespace: operatorNamespace,
			OwnerReferences: []metav1.OwnerReference{{APIVersion: k.APIVersion, Kind: k.Kind, Name: "probe", UID: "probe",
				Controller: ptr.To(true), BlockOwnerDeletion: ptr.To(true)}}}}
		for {
			err := probe.Create(ctx, cm, client.DryRunAll)
			if err == nil || !strings.Contains(err.Error(), "cannot find RESTMapping") {
				break
			}
			if time.Since(began) > time.Minute {
				return ctx, fmt.Errorf("kube-apiserver's admission does not know %s %s a minute after its CRD: %w", k.APIVersion, k.Kind, err)
			}
			time.Sleep(250 * time.Millisecond)
		}
	}
	fmt.Fprintf(os.Stderr, "e2e: kube-apiserver's admission knows the %d kinds of the patterns' CRDs (waited %s after the build)\n",
		len(crdKinds), time.Since(began).Round(100*time.Millisecond))
	return ctx, nil
}
