// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// MetricsNamespaceLabel marks the namespaces whose Pods may scrape a pattern's /metrics (the
// metrics NetworkPolicy lets them in; kubebuilder's config/network-policy uses the same label).
const MetricsNamespaceLabel = "metrics"

// metricsPortName is the metrics Service's port, which the ServiceMonitor's endpoint names.
const metricsPortName = "https"

// componentLabel tells the metrics Service from the webhook Service of the same pattern.
const componentLabel = "app.kubernetes.io/component"

// networkPolicies admit, to the Deployment's Pods (pods, its selector), the metrics port from Pods in namespaces
// labelled metrics=enabled, and the webhook port from anywhere: the API server calls webhooks
// from its own address, which no selector names. On a network that enforces NetworkPolicy, other
// Pods reach neither; the kubelet's probes come from the node, which such networks admit.
func networkPolicies(name, namespace string, pods metav1.LabelSelector, labels map[string]string, webhooks bool) []client.Object {
	port := func(n string) []networkingv1.NetworkPolicyPort {
		return []networkingv1.NetworkPolicyPort{{Protocol: new(corev1.ProtocolTCP), Port: new(intstr.FromString(n))}}
	}
	policy := func(suffix string, rule networkingv1.NetworkPolicyIngressRule) client.Object {
		return &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: name + "-allow-" + suffix, Namespace: namespace, Labels: labels},
			Spec: networkingv1.NetworkPolicySpec{PodSelector: pods, PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress: []networkingv1.NetworkPolicyIngressRule{rule}},
		}
	}
	objs := []client.Object{policy("metrics", networkingv1.NetworkPolicyIngressRule{Ports: port("metrics"),
		From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
			MatchLabels: map[string]string{MetricsNamespaceLabel: "enabled"}}}}})}
	if webhooks {
		objs = append(objs, policy("webhooks", networkingv1.NetworkPolicyIngressRule{Ports: port("webhook")}))
	}
	return objs
}

// serviceMonitor is a prometheus-operator ServiceMonitor of the metrics Service: Prometheus
// scrapes /metrics over HTTPS with its ServiceAccount's token (which needs the pattern's
// metrics-reader ClusterRole). The metrics server's certificate is one controller-runtime makes at
// start, so the scrape does not verify it, as kubebuilder's default ServiceMonitor does not.
func serviceMonitor(name, pattern, namespace string, labels map[string]string) client.Object {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "monitoring.coreos.com/v1", "kind": "ServiceMonitor",
		"spec": map[string]any{
			"selector": map[string]any{"matchLabels": map[string]any{"app.kubernetes.io/name": pattern, componentLabel: "metrics"}},
			"endpoints": []any{map[string]any{
				"port": metricsPortName, "scheme": "https", "path": "/metrics",
				"bearerTokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token",
				"tlsConfig":       map[string]any{"insecureSkipVerify": true},
			}},
		},
	}}
	u.SetName(name)
	u.SetNamespace(namespace)
	u.SetLabels(labels)
	return u
}
