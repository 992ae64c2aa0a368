// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/kpatterns/kpatterns/shared/app"
)

// Differential testing of a pattern's two forms of admission: its webhooks and its admission
// policies decide one table of requests, each through the API server, and must decide alike.

// Case is one admission request of a pattern's differential suite.
type Case struct {
	Name string
	// Labels of the case's namespace; every run of a case gets a namespace of its own.
	Labels map[string]string
	// Setup makes what the request needs (optional). It goes through admission too, so both forms
	// must admit it.
	Setup func(ctx context.Context, c client.Client, ns string) error
	// Request is the request under test; its error is the decision (nil: admitted). A request that
	// checks what was admitted — a defaulted label — returns an error saying what is wrong.
	Request func(ctx context.Context, c client.Client, ns string) error
	// Deny is empty for a request both forms admit, else what both denials say.
	Deny string
	// Warn is empty for a request that must draw no warning, else what the warning of both forms
	// says (kubectl prints warnings; a denial carries none here).
	Warn string
	// Differs, when set, says why the policy decides otherwise on purpose; PolicyDeny is then the
	// policy's decision ("" admitted), and Deny the webhook's.
	Differs, PolicyDeny string
	// Probe marks a case the policy run waits for before running the table: the API server
	// loads policies and bindings asynchronously.
	Probe bool
}

// policyRunLabel on a case's namespace selects one run's policy bindings; the webhooks skip
// such namespaces.
const policyRunLabel = "kpatterns.test/policy-run"

// Differential runs every case through the API server twice: against the pattern's webhooks
// alone (its manager serving them, no policy bound) and against policies alone — the given
// objects, as app.PolicyObjects renders them, bound for this run to the namespaces of its cases,
// which the webhooks skip (the manager is stopped by then, so a webhook still called would fail
// the case). A denial must come from the form under test and name the case's rule. It returns one
// line per case that a form did not decide as the case says: the caller fails on them.
func (e *Env) Differential(t *testing.T, policies []client.Object, cases []Case) []string {
	t.Helper()
	ctx := t.Context()
	// Bound now, the policies load while the webhooks decide: only the run's namespaces match them.
	runLabel := e.BindPolicies(t, policies)
	r := &warnings{}
	cfg := rest.CopyConfig(e.Admin)
	cfg.WarningHandlerWithContext = r
	cl, err := client.New(cfg, client.Options{Scheme: e.Client.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	var diffs []string
	t.Run("webhook", func(t *testing.T) {
		e.Manager(t) // stopped when this subtest ends
		for _, c := range cases {
			if d := run(ctx, cl, r, c, nil, c.Deny, "admission webhook"); d != "" {
				diffs = append(diffs, "webhook: "+c.Name+": "+d)
			}
		}
	})
	want := func(c Case) string {
		if c.Differs != "" {
			return c.PolicyDeny
		}
		return c.Deny
	}
	deadline := time.Now().Add(eventuallyBound())
	for {
		var waiting []string
		for _, c := range cases {
			if !c.Probe {
				continue
			}
			if d := run(ctx, cl, r, c, runLabel, want(c), "AdmissionPolicy"); d != "" {
				waiting = append(waiting, c.Name+": "+d)
			}
		}
		if len(waiting) == 0 {
			break
		}
		if time.Now().After(deadline) {
			return append(diffs, "policy: never took effect: "+strings.Join(waiting, "; "))
		}
		time.Sleep(100 * time.Millisecond)
	}
	for _, c := range cases {
		if d := run(ctx, cl, r, c, runLabel, want(c), "AdmissionPolicy"); d != "" {
			diffs = append(diffs, "policy: "+c.Name+": "+d)
		}
	}
	return diffs
}

// run runs c in a new namespace with cl, whose warnings go to r, and says how its decision
// differs from deny, from a denier whose messages contain by, or its warnings from c's ("" if
// neither does).
func run(ctx context.Context, cl client.Client, r *warnings, c Case, extra map[string]string, deny, by string) string {
	labels := map[string]string{}
	for k, v := range c.Labels {
		labels[k] = v
	}
	for k, v := range extra {
		labels[k] = v
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "d-" + utilrand.String(6), Labels: labels}}
	if err := cl.Create(ctx, ns); err != nil {
		return "namespace: " + err.Error()
	}
	if c.Setup != nil {
		if err := c.Setup(ctx, cl, ns.Name); err != nil {
			return "setup: " + err.Error()
		}
	}
	r.reset()
	err := c.Request(ctx, cl, ns.Name)
	warned := r.reset()
	switch {
	case deny == "" && err != nil:
		return fmt.Sprintf("refused (%v), want it admitted", err)
	case deny != "" && err == nil:
		return fmt.Sprintf("admitted, want a denial saying %q", deny)
	case deny != "" && (!strings.Contains(err.Error(), by) || !strings.Contains(err.Error(), deny)):
		return fmt.Sprintf("refused with %q, want a denial by %s saying %q", err, by, deny)
	case c.Warn == "" && len(warned) > 0:
		return fmt.Sprintf("warned %q, want no warning", warned)
	case c.Warn != "" && !slices.ContainsFunc(warned, func(w string) bool { return strings.Contains(w, c.Warn) }):
		return fmt.Sprintf("warned %q, want a warning saying %q", warned, c.Warn)
	}
	return ""
}

// warnings records the warnings the API server sends with its answers.
type warnings struct {
	mu   sync.Mutex
	seen []string
}

func (w *warnings) HandleWarningHeaderWithContext(_ context.Context, _ int, _ string, text string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.seen = append(w.seen, text)
}

// reset returns the warnings recorded so far and forgets them.
func (w *warnings) reset() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	seen := w.seen
	w.seen = nil
	return seen
}

// BindPolicies creates policies (as app.PolicyObjects renders them) for the rest of the test,
// each binding narrowed to namespaces with the returned labels, which the pattern's webhooks
// skip. The API server loads them asynchronously: wait for a request they decide.
func (e *Env) BindPolicies(t *testing.T, policies []client.Object) map[string]string {
	t.Helper()
	if err := e.skipPolicyRuns(t.Context()); err != nil {
		t.Fatal(err)
	}
	id := utilrand.String(6)
	bound, err := bindToRun(policies, id)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range bound {
		if err := e.Client.Create(t.Context(), p); err != nil {
			t.Fatalf("policy %s: %v", p.GetName(), err)
		}
		t.Cleanup(func() { _ = e.Client.Delete(context.Background(), p) })
	}
	return map[string]string{policyRunLabel: id}
}

// skipPolicyRuns makes the pattern's webhooks skip the namespaces of policy runs.
func (e *Env) skipPolicyRuns(ctx context.Context) error {
	skip := metav1.LabelSelectorRequirement{Key: policyRunLabel, Operator: metav1.LabelSelectorOpDoesNotExist}
	add := func(sel *metav1.LabelSelector) *metav1.LabelSelector {
		if sel == nil {
			sel = &metav1.LabelSelector{}
		}
		for _, r := range sel.MatchExpressions {
			if r.Key == policyRunLabel {
				return sel
			}
		}
		sel.MatchExpressions = append(sel.MatchExpressions, skip)
		return sel
	}
	name := "kpatterns-" + e.Pattern.Name
	m := &admissionregistrationv1.MutatingWebhookConfiguration{}
	switch err := e.Client.Get(ctx, client.ObjectKey{Name: name}, m); {
	case err == nil:
		for i := range m.Webhooks {
			m.Webhooks[i].NamespaceSelector = add(m.Webhooks[i].NamespaceSelector)
		}
		if err := e.Client.Update(ctx, m); err != nil {
			return err
		}
	case !apierrors.IsNotFound(err):
		return err
	}
	v := &admissionregistrationv1.ValidatingWebhookConfiguration{}
	switch err := e.Client.Get(ctx, client.ObjectKey{Name: name}, v); {
	case err == nil:
		for i := range v.Webhooks {
			v.Webhooks[i].NamespaceSelector = add(v.Webhooks[i].NamespaceSelector)
		}
		return e.Client.Update(ctx, v)
	case !apierrors.IsNotFound(err):
		return err
	}
	return nil
}

// bindToRun copies policies for one run: names suffixed with run, and every binding matching
// only namespaces labelled policyRunLabel=run.
func bindToRun(policies []client.Object, run string) ([]client.Object, error) {
	only := metav1.LabelSelectorRequirement{Key: policyRunLabel, Operator: metav1.LabelSelectorOpIn, Values: []string{run}}
	narrow := func(m *admissionregistrationv1.MatchResources) *admissionregistrationv1.MatchResources {
		if m == nil {
			m = &admissionregistrationv1.MatchResources{}
		}
		if m.NamespaceSelector == nil {
			m.NamespaceSelector = &metav1.LabelSelector{}
		}
		m.NamespaceSelector.MatchExpressions = append(m.NamespaceSelector.MatchExpressions, only)
		return m
	}
	var out []client.Object
	for _, p := range policies {
		p = p.DeepCopyObject().(client.Object)
		p.SetName(p.GetName() + "-" + run)
		switch b := p.(type) {
		case *admissionregistrationv1.ValidatingAdmissionPolicy, *admissionregistrationv1.MutatingAdmissionPolicy:
		case *admissionregistrationv1.ValidatingAdmissionPolicyBinding:
			b.Spec.PolicyName += "-" + run
			b.Spec.MatchResources = narrow(b.Spec.MatchResources)
		case *admissionregistrationv1.MutatingAdmissionPolicyBinding:
			b.Spec.PolicyName += "-" + run
			b.Spec.MatchResources = narrow(b.Spec.MatchResources)
		default:
			return nil, fmt.Errorf("%T %s is not an admission policy or binding", p, p.GetName())
		}
		out = append(out, p)
	}
	return out, nil
}

// Step is a part of a case: a request, or what one needs, made in the case's namespace.
type Step = func(ctx context.Context, c client.Client, ns string) error

// Steps runs steps in order, up to the first error.
func Steps(steps ...Step) Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		for _, s := range steps {
			if err := s(ctx, c, ns); err != nil {
				return err
			}
		}
		return nil
	}
}

// Policies are the pattern's admission policies as `manifests --admission=policy` renders them
// for the test environment's operator namespace.
func (e *Env) Policies(t testing.TB) []client.Object {
	t.Helper()
	objs, err := app.PolicyObjects(e.Pattern.Pattern, app.Options{Namespace: Namespace})
	if err != nil {
		t.Fatal(err)
	}
	return objs
}

// DecideAlike runs the differential suite on the pattern's policies and fails the test on every
// difference.
func (e *Env) DecideAlike(t *testing.T, cases []Case) {
	t.Helper()
	for _, d := range e.Differential(t, e.Policies(t), cases) {
		t.Error(d)
	}
}

// FindsPlanted checks that the suite is a test that can fail: with from replaced by to in the
// first variable or validation expression of the pattern's ValidatingAdmissionPolicies that holds
// it (a planted difference), it must report the case named want for the policy.
func (e *Env) FindsPlanted(t *testing.T, cases []Case, from, to, want string) {
	t.Helper()
	planted := e.Policies(t) // rendered afresh: changed here only
	done := false
	for _, o := range planted {
		p, ok := o.(*admissionregistrationv1.ValidatingAdmissionPolicy)
		if !ok {
			continue
		}
		exprs := []*string{}
		for i := range p.Spec.Variables {
			exprs = append(exprs, &p.Spec.Variables[i].Expression)
		}
		for i := range p.Spec.Validations {
			exprs = append(exprs, &p.Spec.Validations[i].Expression)
		}
		for _, x := range exprs {
			if !done && strings.Contains(*x, from) {
				*x, done = strings.Replace(*x, from, to, 1), true
			}
		}
	}
	if !done {
		t.Fatalf("no expression holds %q: plant the difference elsewhere", from)
	}
	diffs := e.Differential(t, planted, cases)
	for _, d := range diffs {
		if strings.HasPrefix(d, "policy: "+want+": ") {
			return
		}
	}
	t.Errorf("the planted difference (%q for %q) was not reported for %q; reported: %q", to, from, want, diffs)
}

// WebhookDownRefuses checks what a webhook that nothing serves does to the requests it governs:
// with no manager of the pattern running (call it from a test that starts none), request, made in
// a new namespace with labels, is refused by kube-apiserver (failurePolicy Fail).
func (e *Env) WebhookDownRefuses(t *testing.T, labels map[string]string, request Step) {
	t.Helper()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "t-" + utilrand.String(6), Labels: labels}}
	if err := e.Client.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	if err := request(t.Context(), e.Client, ns.Name); err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("err = %v, want the request refused: failed calling webhook", err)
	}
}

// Unadmitted is a Setup step that runs create as if the pattern's admission did not exist yet:
// an object made before the rule, which later updates must still be able to change (remove its
// finalizer, say). While create is retried until admitted, the namespace is labelled so that
// neither the webhooks (which skip the policy runs' label) nor this run's policies (bound to
// another value of it) match; then the label is put back as it was, and probe — a request the
// rule refuses — is retried until it is refused again: kube-apiserver sees namespace labels
// through its informer, a moment late.
func Unadmitted(create, probe Step) Step {
	return func(ctx context.Context, c client.Client, ns string) error {
		relabel := func(value *string) error {
			n := &corev1.Namespace{}
			if err := c.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
				return err
			}
			patch := client.MergeFrom(n.DeepCopy())
			if n.Labels == nil {
				n.Labels = map[string]string{}
			}
			if value == nil {
				delete(n.Labels, policyRunLabel)
			} else {
				n.Labels[policyRunLabel] = *value
			}
			return c.Patch(ctx, n, patch)
		}
		n := &corev1.Namespace{}
		if err := c.Get(ctx, client.ObjectKey{Name: ns}, n); err != nil {
			return err
		}
		was, had := n.Labels[policyRunLabel]
		none := "before-admission"
		if err := relabel(&none); err != nil {
			return err
		}
		retry := func(what string, done func() error) error {
			var err error
			for deadline := time.Now().Add(eventuallyBound()); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
				if err = done(); err == nil {
					return nil
				}
			}
			return fmt.Errorf("%s: %w", what, err)
		}
		if err := retry("created before admission", func() error { return create(ctx, c, ns) }); err != nil {
			return err
		}
		restore := &was
		if !had {
			restore = nil
		}
		if err := relabel(restore); err != nil {
			return err
		}
		return retry("admission back", func() error {
			if probe(ctx, c, ns) == nil {
				return errors.New("the probe was admitted")
			}
			return nil
		})
	}
}
