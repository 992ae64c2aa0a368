package controller

import (
	"testing"

	"github.com/kpatterns/kpatterns/conditional/api/v1alpha1"
)

func TestMatchFirstCaseWins(t *testing.T) {
	for _, tc := range []struct {
		spec v1alpha1.ConfigProfileSpec
		want string
	}{
		{v1alpha1.ConfigProfileSpec{}, "default"},
		{v1alpha1.ConfigProfileSpec{Environment: "staging"}, "default"},
		{v1alpha1.ConfigProfileSpec{Environment: "production"}, "production"},
		{v1alpha1.ConfigProfileSpec{Environment: "production", Maintenance: true}, "maintenance"},
		{v1alpha1.ConfigProfileSpec{Maintenance: true}, "maintenance"},
	} {
		if got, _ := Match(&v1alpha1.ConfigProfile{Spec: tc.spec}); got != tc.want {
			t.Errorf("Match(%+v) = %s, want %s", tc.spec, got, tc.want)
		}
	}
	// Settings are layered over the case without changing the case's table.
	_, config := Match(&v1alpha1.ConfigProfile{Spec: v1alpha1.ConfigProfileSpec{Settings: map[string]string{"mode": "custom"}}})
	if config["mode"] != "custom" || Cases[2].Config["mode"] != "development" {
		t.Errorf("config %v, default case %v", config, Cases[2].Config)
	}
}

func TestDigestIsUnambiguous(t *testing.T) {
	distinct := []map[string]string{
		nil,
		{"a": ""},
		{"a": "bc"},
		{"ab": "c"},
		{"a": "b", "c": ""},
		{"a": "b\x00c"},
	}
	seen := map[string]int{}
	for i, m := range distinct {
		d := Digest(m)
		if j, ok := seen[d]; ok {
			t.Errorf("configs %v and %v share a digest", distinct[j], m)
		}
		seen[d] = i
	}
	if Digest(map[string]string{"x": "1", "y": "2"}) != Digest(map[string]string{"y": "2", "x": "1"}) {
		t.Error("the digest depends on map order")
	}
}
