// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// Options are the flags `manifests`, `install` and `run` share.
type Options struct {
	Namespace       string   // operator namespace
	WatchNamespaces []string // empty: all namespaces
	Kubeconfig      string
	Image           string // with an image, a Deployment is rendered too
	Command         string
	WebhookURL      string // https://host:port: webhooks call this URL (+ path) instead of the Service
	CAFile          string // PEM CA that signed the webhook's serving certificate: the caBundle
	// Certs is where a deployed webhook's serving certificate comes from: CertsSelf (the default),
	// CertsCertManager or CertsManual (the default with CAFile). For `run`: CertsSelf or empty.
	Certs string
	// Replicas of the Deployment; 0: 2 for a pattern that serves webhooks (every replica serves,
	// so one Pod's restart blocks no request their failurePolicy Fail governs), else 1 (a
	// controller elects one leader; more replicas are standbys).
	Replicas int32
	// CPURequest, MemoryRequest and MemoryLimit are the container's resources (quantities).
	CPURequest, MemoryRequest, MemoryLimit string
	// NodeSelector and Tolerations place the Pods (none by default).
	NodeSelector map[string]string
	Tolerations  []corev1.Toleration
	// Admission is what serves the pattern's admission rules: AdmissionWebhook (the default),
	// AdmissionPolicy or AdmissionBoth. For `run`: AdmissionPolicy starts no webhook server.
	Admission string
	// NoNetworkPolicies leaves out the Deployment's NetworkPolicies (networkPolicies).
	NoNetworkPolicies bool
	// ServiceMonitor renders a prometheus-operator ServiceMonitor of the metrics Service.
	ServiceMonitor bool
	// With names the pattern's Features enabled: their rules are granted, and run enables them.
	With []string
}

// ParseTolerations reads --tolerations: comma-separated key=value:Effect (operator Equal) or
// key:Effect (operator Exists), Effect one of NoSchedule, PreferNoSchedule, NoExecute.
func ParseTolerations(s string) ([]corev1.Toleration, error) {
	var out []corev1.Toleration
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item == "" {
			continue
		}
		kv, effect, ok := strings.Cut(item, ":")
		key, value, equal := strings.Cut(kv, "=")
		t := corev1.Toleration{Key: key, Value: value, Effect: corev1.TaintEffect(effect), Operator: corev1.TolerationOpExists}
		if equal {
			t.Operator = corev1.TolerationOpEqual
		}
		switch {
		case !ok || key == "":
			return nil, fmt.Errorf("--tolerations %q: want key=value:Effect or key:Effect", item)
		case len(validation.IsQualifiedName(key)) > 0:
			return nil, fmt.Errorf("--tolerations %q: key %q: %s", item, key, strings.Join(validation.IsQualifiedName(key), "; "))
		case equal && len(validation.IsValidLabelValue(value)) > 0:
			return nil, fmt.Errorf("--tolerations %q: value %q: %s", item, value, strings.Join(validation.IsValidLabelValue(value), "; "))
		case t.Effect != corev1.TaintEffectNoSchedule && t.Effect != corev1.TaintEffectPreferNoSchedule && t.Effect != corev1.TaintEffectNoExecute:
			return nil, fmt.Errorf("--tolerations %q: effect %q: want NoSchedule, PreferNoSchedule or NoExecute", item, effect)
		}
		out = append(out, t)
	}
	return out, nil
}

// Objects renders everything a pattern needs in a cluster, in apply order.
// The webhook configurations of a pattern that has webhooks are rendered only with --image (the
// Deployment serves them through the Service) or --webhook-url (a webhook run outside the
// cluster): without either, nothing would serve them, and every request they govern would fail.
func Objects(p Pattern, o Options) ([]client.Object, error) {
	name := "kpatterns-" + p.Name
	labels := Labels(p.Name)
	meta := func(ns, n string) metav1.ObjectMeta {
		return metav1.ObjectMeta{Name: n, Namespace: ns, Labels: labels}
	}
	crds, err := readCRDs(p.Config)
	if err != nil {
		return nil, err
	}
	rules, err := ReadRules(p.Config)
	if err != nil {
		return nil, err
	}
	with, err := featureRules(p, rules, o.With)
	if err != nil {
		return nil, err
	}
	rules.Cluster = append(rules.Cluster, with...)
	if o.Admission, err = admissionMode(p, o.Admission); err != nil {
		return nil, err
	}
	var policies []client.Object
	if o.Admission != AdmissionWebhook {
		if policies, err = policyObjects(p, o, labels); err != nil {
			return nil, err
		}
	}
	if o.Admission == AdmissionPolicy && p.AdmissionOnly { // nothing to run: kube-apiserver enforces them
		return typed(append(crds, policies...))
	}
	objs := append(append([]client.Object{}, crds...), userRoles(name, crds, labels)...)
	if ns := operatorNamespaceObject(o.Namespace); ns != nil {
		objs = append(objs, ns)
	}
	objs = append(objs, &corev1.ServiceAccount{ObjectMeta: meta(o.Namespace, p.Name)})
	subjects := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: p.Name, Namespace: o.Namespace}}
	// Watching some namespaces, the rules hold in each of them, but those on the pattern's
	// cluster-scoped kinds, which only a ClusterRole can grant.
	clusterRules, nsRules := rules.Cluster, []rbacv1.PolicyRule(nil)
	if len(o.WatchNamespaces) > 0 {
		clusterRules, nsRules = clusterScoped(rules.Cluster, crds)
	}
	if len(clusterRules) > 0 {
		objs = append(objs,
			&rbacv1.ClusterRole{ObjectMeta: meta("", name), Rules: clusterRules},
			&rbacv1.ClusterRoleBinding{ObjectMeta: meta("", name), Subjects: subjects,
				RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name}})
	}
	for _, ns := range o.WatchNamespaces {
		if len(nsRules) > 0 {
			objs = append(objs, role(meta(ns, name), nsRules, subjects)...)
		}
	}
	if len(rules.Operator) > 0 {
		objs = append(objs, role(meta(o.Namespace, OperatorRole(p.Name)), rules.Operator, subjects)...)
	}
	var hooks []client.Object
	if o.Admission != AdmissionPolicy && (o.Image != "" || o.WebhookURL != "") { // else nothing would serve them (see Execute's warning)
		if o.WebhookURL == "" { // the Deployment serves them: where its certificate comes from
			if o.Certs, err = certsMode(o); err != nil {
				return nil, err
			}
		}
		if hooks, err = webhookObjects(p, o, labels); err != nil {
			return nil, err
		}
	}
	objs = append(objs, hooks...)
	objs = append(objs, policies...)
	if len(hooks) > 0 && o.WebhookURL == "" {
		objs = append(objs, certObjects(p, o, o.Certs, labels, webhookResources(hooks))...)
	}
	if !p.AdmissionOnly { // an admission-only pattern: every replica serves, no Lease, no Role for one
		objs = append(objs, leaderElectionRBAC(o.Namespace, name, subjects, meta)...)
	}
	objs = append(objs, metricsRBAC(name, subjects, meta)...)
	if o.Image != "" { // last: it starts once everything it needs is in place
		d, err := deployment(p.Name, o, labels, len(hooks) > 0)
		if err != nil {
			return nil, err
		}
		objs = append(objs, metricsService(name, p.Name, o.Namespace, labels))
		if o.ServiceMonitor {
			objs = append(objs, serviceMonitor(name, p.Name, o.Namespace, labels))
		}
		if !o.NoNetworkPolicies {
			objs = append(objs, networkPolicies(name, o.Namespace, metav1.LabelSelector{MatchLabels: OperatorPods(p.Name)}, labels, len(hooks) > 0)...)
		}
		objs = append(objs, d)
		if *d.Spec.Replicas > 1 { // voluntary disruptions (a node drain) keep one replica serving
			objs = append(objs, &policyv1.PodDisruptionBudget{ObjectMeta: meta(o.Namespace, p.Name),
				Spec: policyv1.PodDisruptionBudgetSpec{MinAvailable: ptr.To(intstr.FromInt32(1)),
					Selector: &metav1.LabelSelector{MatchLabels: OperatorPods(p.Name)}}})
		}
	}
	return typed(objs)
}

// OperatorPods are the labels of the operator's own Pods that its Services (webhooks, metrics),
// PodDisruptionBudget and NetworkPolicies select: the pattern's name and the component manager.
// What a pattern creates for its users — a Widget's Pods, labelled with the pattern's name too —
// never carries the component, so it never becomes a webhook endpoint or a metrics target, nor
// falls under the operator's disruption budget or network policies.
func OperatorPods(pattern string) map[string]string {
	return map[string]string{"app.kubernetes.io/name": pattern, componentLabel: "manager"}
}

// operatorNamespaceObject is the operator namespace, enforcing Pod Security "restricted" (the
// Deployment passes it), unless it is one every cluster has. Install creates it only if it does
// not exist yet, and neither prune nor uninstall deletes it: other patterns may live there.
func operatorNamespaceObject(name string) *corev1.Namespace {
	if name == metav1.NamespaceDefault || strings.HasPrefix(name, "kube-") {
		return nil
	}
	return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{
		"app.kubernetes.io/part-of": "kpatterns", "pod-security.kubernetes.io/enforce": "restricted"}}}
}

// metricsService exposes the Deployment's HTTPS /metrics to a scraper.
func metricsService(name, pattern, namespace string, labels map[string]string) *corev1.Service {
	withComponent := map[string]string{componentLabel: "metrics"}
	maps.Copy(withComponent, labels)
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: name + "-metrics", Namespace: namespace, Labels: withComponent},
		Spec: corev1.ServiceSpec{
			Selector: OperatorPods(pattern),
			Ports:    []corev1.ServicePort{{Name: metricsPortName, Port: 8443, TargetPort: intstr.FromString("metrics")}},
		},
	}
}

// typed sets each object's kind, so that typed objects render and apply with it; it passes an
// error on.
func typed(objs []client.Object, errs ...error) ([]client.Object, error) {
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	for _, obj := range objs {
		gvks, _, err := scheme.ObjectKinds(obj)
		if err != nil {
			return nil, err
		}
		obj.GetObjectKind().SetGroupVersionKind(gvks[0])
	}
	return objs, nil
}

func deployment(name string, o Options, labels map[string]string, webhooks bool) (*appsv1.Deployment, error) {
	replicas := o.Replicas
	switch {
	case replicas < 0:
		return nil, fmt.Errorf("--replicas %d: want 1 or more", replicas)
	case replicas == 0 && webhooks:
		replicas = 2
	case replicas == 0:
		replicas = 1
	}
	resources, err := containerResources(o)
	if err != nil {
		return nil, err
	}
	command := strings.Fields(o.Command)
	if len(command) == 0 {
		command = []string{"/manager"}
	}
	probe := func(p string) *corev1.Probe {
		return &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: p, Port: intstr.FromString("probes")}}, PeriodSeconds: 10}
	}
	// The selector stays the name alone (a Deployment's selector is immutable); the Pods carry
	// OperatorPods' labels, which every other selector of the operator's names.
	selector := map[string]string{"app.kubernetes.io/name": name}
	podLabels := maps.Clone(labels)
	maps.Copy(podLabels, OperatorPods(name))
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: o.Namespace, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					ServiceAccountName: name,
					NodeSelector:       o.NodeSelector,
					Tolerations:        o.Tolerations,
					// Replicas on different nodes where there are several.
					Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
						PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100,
							PodAffinityTerm: corev1.PodAffinityTerm{TopologyKey: corev1.LabelHostname,
								LabelSelector: &metav1.LabelSelector{MatchLabels: OperatorPods(name)}}}}}},
					SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true),
						SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
					Containers: []corev1.Container{{
						Name: "manager", Image: o.Image, Command: command, Args: runArgs(o, webhooks),
						Env: []corev1.EnvVar{{Name: "KPATTERNS_NAMESPACE", ValueFrom: &corev1.EnvVarSource{
							FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
							// run sets the Go runtime's soft limit below it (SetMemoryLimit).
							{Name: MemoryLimitEnv, ValueFrom: &corev1.EnvVarSource{
								ResourceFieldRef: &corev1.ResourceFieldSelector{ContainerName: "manager", Resource: "limits.memory"}}}},
						Ports: []corev1.ContainerPort{
							{Name: "probes", ContainerPort: 8081}, {Name: "metrics", ContainerPort: 8443}},
						LivenessProbe:  probe("/healthz"),
						ReadinessProbe: probe("/readyz"),
						Resources:      resources,
						SecurityContext: &corev1.SecurityContext{
							RunAsNonRoot: ptr.To(true), RunAsUser: ptr.To[int64](65532),
							AllowPrivilegeEscalation: ptr.To(false), ReadOnlyRootFilesystem: ptr.To(true),
							Capabilities:   &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
							SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
						},
					}},
				},
			},
		},
	}
	if webhooks {
		serveWebhooks(&d.Spec.Template.Spec, name)
	}
	return d, nil
}

// runArgs are the arguments of the container's `run`: what the Deployment's flags change of it.
func runArgs(o Options, webhooks bool) []string {
	args := []string{"run"}
	if webhooks && o.Certs == CertsSelf {
		args = append(args, "--certs="+CertsSelf)
	}
	if o.Admission == AdmissionPolicy { // the policies serve the rules: no webhook server
		args = append(args, "--admission="+AdmissionPolicy)
	}
	if len(o.WatchNamespaces) > 0 {
		args = append(args, "--watch-namespaces="+strings.Join(o.WatchNamespaces, ","))
	}
	if len(o.With) > 0 {
		args = append(args, "--with="+strings.Join(o.With, ","))
	}
	return args
}

// containerResources are the container's requests and limit from --cpu-request, --memory-request
// and --memory-limit.
func containerResources(o Options) (corev1.ResourceRequirements, error) {
	quantity := func(flag, s, def string) (resource.Quantity, error) {
		if s == "" {
			s = def
		}
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return q, fmt.Errorf("--%s %q: %w", flag, s, err)
		}
		return q, nil
	}
	cpu, err := quantity("cpu-request", o.CPURequest, "10m")
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	memory, err := quantity("memory-request", o.MemoryRequest, "64Mi")
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	limit, err := quantity("memory-limit", o.MemoryLimit, "256Mi")
	if err != nil {
		return corev1.ResourceRequirements{}, err
	}
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: memory},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: limit},
	}, nil
}

// serveWebhooks has the Pod serve on the webhook port with the mounted TLS Secret of the
// Deployment name.
func serveWebhooks(spec *corev1.PodSpec, name string) {
	// A terminating replica keeps serving until the API server has stopped sending it calls:
	// SIGTERM comes after the sleep, once its endpoint is gone, so that no call in flight is cut
	// (TestDeployed's rolling restart under load counts the failed calls: 0).
	spec.Containers[0].Lifecycle = &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: WebhookDrainSeconds}}}
	spec.Volumes = []corev1.Volume{{Name: "webhook-tls", VolumeSource: corev1.VolumeSource{
		Secret: &corev1.SecretVolumeSource{SecretName: WebhookSecretName(name)}}}}
	c := &spec.Containers[0]
	c.Ports = append(c.Ports, corev1.ContainerPort{Name: "webhook", ContainerPort: WebhookPort})
	c.VolumeMounts = []corev1.VolumeMount{{Name: "webhook-tls", MountPath: CertDir, ReadOnly: true}}
}

// readCRDs reads crd/*.yaml from the pattern's config, sorted by file name.
func readCRDs(config fs.FS) ([]client.Object, error) {
	return readGlob(config, "crd/*.yaml", map[string]func() client.Object{
		"CustomResourceDefinition": func() client.Object { return &apiextensionsv1.CustomResourceDefinition{} },
	})
}

// WriteYAML prints objects as one multi-document YAML stream without server-set fields.
func WriteYAML(w io.Writer, objs []client.Object) error {
	for _, obj := range objs {
		u, err := toUnstructured(obj)
		if err != nil {
			return err
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return err
		}
		if _, err := fmt.Fprintf(w, "---\n%s", b); err != nil {
			return err
		}
	}
	return nil
}

func toUnstructured(obj client.Object) (*unstructured.Unstructured, error) {
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, err
	}
	u := &unstructured.Unstructured{Object: m}
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	unstructured.RemoveNestedField(u.Object, "status")
	return u, nil
}

// installClient is the client install, prune and uninstall write with, once the API server has
// answered (else one line saying it does not).
func installClient(ctx context.Context, cfg *rest.Config) (client.Client, error) {
	if err := ping(ctx, cfg); err != nil {
		return nil, err
	}
	return client.New(cfg, client.Options{Scheme: scheme})
}

// Install server-side applies objects with InstallFieldManager, forcing ownership of the fields it
// sets (it is the owner of these objects), and prints what it created, changed or left unchanged.
func Install(ctx context.Context, cfg *rest.Config, objs []client.Object, out io.Writer) error {
	c, err := installClient(ctx, cfg)
	if err != nil {
		return err
	}
	for _, obj := range objs {
		u, err := toUnstructured(obj)
		if err != nil {
			return err
		}
		ref := fmt.Sprintf("%s/%s", strings.ToLower(u.GetKind()), u.GetName())
		before := &unstructured.Unstructured{}
		before.SetGroupVersionKind(u.GroupVersionKind())
		err = c.Get(ctx, client.ObjectKeyFromObject(u), before)
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("%s: %w", ref, err)
		}
		existed := err == nil
		if existed && u.GetKind() == "Namespace" { // someone's, or an earlier install's: as it is
			if _, err := fmt.Fprintf(out, "%s exists: left as it is\n", ref); err != nil {
				return err
			}
			continue
		}
		if err := c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
			client.FieldOwner(InstallFieldManager), client.ForceOwnership); err != nil {
			return fmt.Errorf("%s: %w", ref, err)
		}
		verb := "created"
		if existed {
			verb = "unchanged"
			if before.GetResourceVersion() != u.GetResourceVersion() {
				verb = "configured"
			}
		}
		if _, err := fmt.Fprintf(out, "%s %s\n", ref, verb); err != nil {
			return err
		}
	}
	return nil
}
