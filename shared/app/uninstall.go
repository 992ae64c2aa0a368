// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	policyv1 "k8s.io/api/policy/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// installed are the kinds `install` renders besides CRDs, in the order Uninstall deletes them:
// what runs first, then what it serves through, then its permissions and identity.
var installed = []schema.GroupVersionKind{
	appsv1.SchemeGroupVersion.WithKind("Deployment"),
	policyv1.SchemeGroupVersion.WithKind("PodDisruptionBudget"),
	corev1.SchemeGroupVersion.WithKind("Service"),
	networkingv1.SchemeGroupVersion.WithKind("NetworkPolicy"),
	{Group: "monitoring.coreos.com", Version: "v1", Kind: "ServiceMonitor"},
	corev1.SchemeGroupVersion.WithKind("Secret"), // --certs=self: the serving certificate
	{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"},
	{Group: "cert-manager.io", Version: "v1", Kind: "Issuer"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingWebhookConfiguration"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingWebhookConfiguration"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicyBinding"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicyBinding"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "MutatingAdmissionPolicy"},
	{Group: "admissionregistration.k8s.io", Version: "v1", Kind: "ValidatingAdmissionPolicy"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "RoleBinding"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "ClusterRole"},
	{Group: "rbac.authorization.k8s.io", Version: "v1", Kind: "Role"},
	corev1.SchemeGroupVersion.WithKind("ServiceAccount"),
}

// Labels are the labels `install` puts on every object it renders but CRDs: Prune and Uninstall
// find a pattern's objects by them, never by guessing names.
func Labels(pattern string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": pattern, "app.kubernetes.io/part-of": "kpatterns"}
}

// Prune deletes the pattern's objects (by Labels) that objs — what install just applied — no
// longer holds: a ClusterRoleBinding left after a switch to --watch-namespaces, a Deployment after
// an install without --image. CRDs are never pruned.
func Prune(ctx context.Context, cfg *rest.Config, p Pattern, objs []client.Object, out io.Writer) error {
	keep := map[string]bool{}
	for _, o := range objs {
		keep[key(o.GetObjectKind().GroupVersionKind(), o.GetNamespace(), o.GetName())] = true
	}
	c, err := installClient(ctx, cfg)
	if err != nil {
		return err
	}
	return deleteLabelled(ctx, c, p, "pruned", func(gvk schema.GroupVersionKind, o metav1.PartialObjectMetadata) bool {
		return !keep[key(gvk, o.Namespace, o.Name)]
	}, out)
}

// Uninstall deletes every object of the pattern that install applied (by Labels, in every
// namespace), in dependency order, and with crds also the CRDs in objs — which deletes every
// object of those kinds, hence not by default.
func Uninstall(ctx context.Context, cfg *rest.Config, p Pattern, objs []client.Object, crds bool, out io.Writer) error {
	c, err := installClient(ctx, cfg)
	if err != nil {
		return err
	}
	if err := deleteLabelled(ctx, c, p, "deleted", func(schema.GroupVersionKind, metav1.PartialObjectMetadata) bool { return true }, out); err != nil {
		return err
	}
	if !crds {
		return nil
	}
	for _, o := range objs {
		if o.GetObjectKind().GroupVersionKind().Kind != "CustomResourceDefinition" {
			continue
		}
		if err := c.Delete(ctx, o); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("customresourcedefinition/%s: %w", o.GetName(), err)
		} else if err == nil {
			if _, err := fmt.Fprintf(out, "customresourcedefinition/%s deleted\n", o.GetName()); err != nil {
				return err
			}
		}
	}
	return nil
}

// deleteLabelled deletes, kind by kind in the order of installed, the pattern's labelled objects
// that match, each with its UID as a precondition (an object re-created meanwhile is not touched).
func deleteLabelled(ctx context.Context, c client.Client, p Pattern, verb string, match func(schema.GroupVersionKind, metav1.PartialObjectMetadata) bool, out io.Writer) error {
	for _, gvk := range installed {
		list := &metav1.PartialObjectMetadataList{}
		list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
		if err := c.List(ctx, list, client.MatchingLabels(Labels(p.Name))); meta.IsNoMatchError(err) {
			continue // cert-manager's and prometheus-operator's kinds, where they are not installed
		} else if err != nil {
			return fmt.Errorf("listing %ss: %w", strings.ToLower(gvk.Kind), err)
		}
		slices.SortFunc(list.Items, func(a, b metav1.PartialObjectMetadata) int {
			return strings.Compare(a.Namespace+"/"+a.Name, b.Namespace+"/"+b.Name)
		})
		for _, o := range list.Items {
			if !match(gvk, o) {
				continue
			}
			o.SetGroupVersionKind(gvk)
			err := c.Delete(ctx, &o, client.Preconditions{UID: &o.UID}, client.PropagationPolicy(metav1.DeletePropagationBackground))
			if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
				continue
			}
			if err != nil {
				return fmt.Errorf("%s/%s: %w", strings.ToLower(gvk.Kind), o.Name, err)
			}
			ref := strings.ToLower(gvk.Kind) + "/" + o.Name
			if o.Namespace != "" {
				ref += " -n " + o.Namespace
			}
			if _, err := fmt.Fprintf(out, "%s %s\n", ref, verb); err != nil {
				return err
			}
		}
	}
	return nil
}

func key(gvk schema.GroupVersionKind, namespace, name string) string {
	return gvk.GroupKind().String() + " " + namespace + "/" + name
}
