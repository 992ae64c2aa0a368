package stages

import (
	"context"
	"errors"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// fake is a minimal Object for the pure parts of the framework.
type fake struct {
	metav1.PartialObjectMetadata
	status Status
}

func (f *fake) StageStatus() *Status { return &f.status }

func TestRunTurnsResultsIntoConditions(t *testing.T) {
	r := &Reconciler[*fake]{}
	s := &State[*fake]{Object: &fake{}, outputs: map[string]any{}, r: r}
	s.Object.Generation = 3
	finished := map[string]bool{}
	first := r.run(context.Background(), s, Stage[*fake]{Name: "A", Run: func(context.Context, *State[*fake]) Result {
		return Done("digest", "a done")
	}}, finished)
	if first.Type != "AReady" || first.Status != metav1.ConditionTrue || first.Message != "a done" || first.ObservedGeneration != 3 {
		t.Errorf("A = %+v", first.Condition)
	}
	var seen any
	second := r.run(context.Background(), s, Stage[*fake]{Name: "B", Needs: []string{"A"}, Run: func(_ context.Context, s *State[*fake]) Result {
		seen = s.Output("A")
		return Waiting("Progressing", "rolling", time.Second)
	}}, finished)
	if seen != "digest" || second.Status != metav1.ConditionFalse || second.Reason != "Progressing" || finished["B"] {
		t.Errorf("B = %+v, saw output %v", second.Condition, seen)
	}
	ran := false
	third := r.run(context.Background(), s, Stage[*fake]{Name: "C", Needs: []string{"A", "B"}, Run: func(context.Context, *State[*fake]) Result {
		ran = true
		return Done(nil, "")
	}}, finished)
	if ran || third.Reason != ReasonDependencyNotReady || third.Message != "waiting for stage B" {
		t.Errorf("C ran=%v, condition %+v", ran, third.Condition)
	}
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "services"}, "x", errors.New("exceeded quota"))
	fourth := r.run(context.Background(), s, Stage[*fake]{Name: "D", Run: func(context.Context, *State[*fake]) Result {
		return Failed(forbidden)
	}}, finished)
	if fourth.Reason != "Forbidden" || fourth.Message != forbidden.Error() {
		t.Errorf("D = %+v", fourth.Condition)
	}
	// A child of an earlier object of the same name: waiting, and no Warning event (r has no
	// recorder: an event would panic here).
	fifth := r.run(context.Background(), s, Stage[*fake]{Name: "E", Run: func(context.Context, *State[*fake]) Result {
		return Failed(&NotOwnedError{Kind: "ConfigMap", Name: "x", Stale: true})
	}}, finished)
	if fifth.Reason != ReasonWaitingForGC || fifth.Status != metav1.ConditionFalse {
		t.Errorf("E = %+v", fifth.Condition)
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
