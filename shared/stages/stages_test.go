// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package stages

import (
	"context"
	"errors"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/events"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/kpatterns/kpatterns/shared/status"
)

// fake is a minimal Object for the pure parts of the framework.
type fake struct {
	metav1.PartialObjectMetadata
	Conds []metav1.Condition
	Gen   int64
}

func (f *fake) GetConditions() []metav1.Condition  { return f.Conds }
func (f *fake) SetConditions(c []metav1.Condition) { f.Conds = c }
func (f *fake) SetObservedGeneration(g int64)      { f.Gen = g }
func (f *fake) DeepCopyObject() runtime.Object {
	c := *f
	c.PartialObjectMetadata = *f.DeepCopy()
	c.Conds = slices.Clone(f.Conds)
	return &c
}

// state is what a pattern's stages share: here one typed output.
type state struct {
	*Scope[*fake]
	digest string
}

func TestRunTurnsResultsIntoConditions(t *testing.T) {
	s := &state{Scope: &Scope[*fake]{Object: &fake{}}}
	finished := map[string]bool{}
	run := func(st Stage[*state]) (metav1.Condition, Result) {
		return run(context.Background(), s, st, finished, 3)
	}
	first, _ := run(Stage[*state]{Name: "A", Run: func(_ context.Context, s *state) Result {
		s.digest = "abc"
		return Done("a done")
	}})
	if first.Type != "AReady" || first.Status != metav1.ConditionTrue || first.Message != "a done" || first.ObservedGeneration != 3 {
		t.Errorf("A = %+v", first)
	}
	var seen string
	second, _ := run(Stage[*state]{Name: "B", Needs: []string{"A"}, Run: func(_ context.Context, s *state) Result {
		seen = s.digest
		return Waiting("Progressing", "rolling", time.Second)
	}})
	if seen != "abc" || second.Status != metav1.ConditionFalse || second.Reason != "Progressing" || finished["B"] {
		t.Errorf("B = %+v, saw %q", second, seen)
	}
	ran := false
	third, _ := run(Stage[*state]{Name: "C", Needs: []string{"A", "B"}, Run: func(context.Context, *state) Result {
		ran = true
		return Done("")
	}})
	if ran || third.Reason != ReasonDependencyNotReady || third.Message != "waiting for stage B" {
		t.Errorf("C ran=%v, condition %+v", ran, third)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "x", errors.New("exceeded quota"))
	fourth, _ := run(Stage[*state]{Name: "D", Run: func(context.Context, *state) Result { return Failed(forbidden) }})
	if fourth.Reason != "Forbidden" || fourth.Message != forbidden.Error() {
		t.Errorf("D = %+v", fourth)
	}
	fifth, _ := run(Stage[*state]{Name: "E", Run: func(context.Context, *state) Result {
		return Failed(&NotOwnedError{Kind: "ConfigMap", Name: "x", Stale: true})
	}})
	if fifth.Reason != ReasonWaitingForGC || fifth.Status != metav1.ConditionFalse {
		t.Errorf("E = %+v", fifth)
	}
	sixth, res := run(Stage[*state]{Name: "F", Run: func(context.Context, *state) Result {
		return Terminal("NoMatchingCase", errors.New("no case matches"))
	}})
	if sixth.Reason != "NoMatchingCase" || sixth.Message != "no case matches" || !errors.Is(res.err, reconcile.TerminalError(nil)) {
		t.Errorf("F = %+v, err %v", sixth, res.err)
	}
}

func TestValidateRejectsMalformedTables(t *testing.T) {
	run := func(context.Context, *state) Result { return Done("") }
	for _, tc := range []struct {
		table []Stage[*state]
		err   string
	}{
		{[]Stage[*state]{{Name: "A", Run: run}, {Name: "B", Needs: []string{"A"}, Run: run}}, ""},
		{[]Stage[*state]{{Name: "A", Run: run}, {Name: "B", Needs: []string{"Conifg"}, Run: run}}, `stage B needs "Conifg", which is not an earlier stage`},
		{[]Stage[*state]{{Name: "A", Needs: []string{"B"}, Run: run}, {Name: "B", Run: run}}, `stage A needs "B", which is not an earlier stage`},
		{[]Stage[*state]{{Name: "A", Run: run}, {Name: "A", Run: run}}, "stage A: the name is used twice"},
		{[]Stage[*state]{{Name: "A"}}, "stage 0: a stage needs a Name and a Run"},
	} {
		err := Validate(tc.table)
		if (err == nil) != (tc.err == "") || (err != nil && err.Error() != tc.err) {
			t.Errorf("Validate = %v, want %q", err, tc.err)
		}
	}
}

func TestJoinErrorsIsTerminalOnlyWhenAllAre(t *testing.T) {
	terminal := reconcile.TerminalError(errors.New("bad spec"))
	if err := joinErrors([]error{terminal}); !errors.Is(err, reconcile.TerminalError(nil)) {
		t.Errorf("only terminal errors: %v is not terminal", err)
	}
	if err := joinErrors([]error{terminal, errors.New("conflict")}); errors.Is(err, reconcile.TerminalError(nil)) || err.Error() != "conflict" {
		t.Errorf("a retryable error among them: %v", err)
	}
	if joinErrors(nil) != nil {
		t.Error("no errors: non-nil")
	}
}

func TestSubset(t *testing.T) {
	have := map[string]any{
		"metadata": map[string]any{"name": "x", "labels": map[string]any{"a": "1", "theirs": "2"}},
		"spec": map[string]any{"replicas": int64(2), "ports": []any{
			map[string]any{"port": int64(80), "protocol": "TCP"},
		}},
	}
	for _, tc := range []struct {
		want map[string]any
		ok   bool
	}{
		{map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "1"}}}, true},
		{map[string]any{"spec": map[string]any{"replicas": int32(2)}}, true}, // numbers compare by value
		{map[string]any{"spec": map[string]any{"replicas": int64(3)}}, false},
		{map[string]any{"spec": map[string]any{"ports": []any{map[string]any{"port": int64(80)}}}}, true}, // defaulted protocol
		{map[string]any{"spec": map[string]any{"ports": []any{}}}, false},                                 // list length differs
		{map[string]any{"spec": map[string]any{"paused": true}}, false},
		{map[string]any{"data": map[string]any{}}, true},
	} {
		if got := subset(tc.want, have); got != tc.ok {
			t.Errorf("subset(%v) = %v, want %v", tc.want, got, tc.ok)
		}
	}
}

func TestMinPositive(t *testing.T) {
	for _, tc := range []struct{ a, b, want time.Duration }{{0, 0, 0}, {0, 5, 5}, {5, 0, 5}, {5, 3, 3}, {3, 5, 3}} {
		if got := minPositive(tc.a, tc.b); got != tc.want {
			t.Errorf("minPositive(%v, %v) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

func TestEventsOnTransitionsOnly(t *testing.T) {
	ready := metav1.Condition{Type: "AReady", Status: metav1.ConditionTrue, Reason: ReasonReady, Message: "done"}
	forbidden := metav1.Condition{Type: "AReady", Status: metav1.ConditionFalse, Reason: "Forbidden", Message: "quota"}
	stale := metav1.Condition{Type: "AReady", Status: metav1.ConditionFalse, Reason: ReasonWaitingForGC}
	progressing := metav1.Condition{Type: "AReady", Status: metav1.ConditionFalse, Reason: "Progressing"}
	fail, wait := Result{outcome: failed}, Result{outcome: waiting}
	for _, tc := range []struct {
		name string
		prev *metav1.Condition
		c    metav1.Condition
		res  Result
		want string
	}{
		{"first ready", nil, ready, Done(""), "Normal AReady done"},
		{"ready again", &progressing, ready, Done(""), "Normal AReady done"},
		{"still ready", &ready, ready, Done(""), ""},
		{"fails", &ready, forbidden, fail, "Warning Forbidden quota"},
		{"fails alike", &forbidden, forbidden, fail, ""},
		{"waits for the garbage collector", nil, stale, fail, ""},
		{"waits", &ready, progressing, wait, ""},
	} {
		rec := events.NewFakeRecorder(2)
		obj := &fake{}
		p := status.NewPatcher[*fake](nil, obj) // obj unchanged: Patch only emits
		event(rec, p, obj, tc.prev, tc.c, tc.res, "A")
		if err := p.Patch(context.Background(), obj); err != nil {
			t.Fatal(err)
		}
		got := ""
		select {
		case got = <-rec.Events:
		default:
		}
		if got != tc.want {
			t.Errorf("%s: event %q, want %q", tc.name, got, tc.want)
		}
	}
}
