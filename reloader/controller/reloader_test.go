package controller

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func TestRefs(t *testing.T) {
	opt := ptr.To(true)
	spec := &corev1.PodSpec{
		Volumes: []corev1.Volume{
			{VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol"}, Optional: opt}}},
			{VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj"}}}, {}}}}},
			{VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "not-a-configmap"}}},
		},
		InitContainers: []corev1.Container{{EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "init"}, Optional: opt}}}}},
		Containers: []corev1.Container{{
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol"}}}},
			Env: []corev1.EnvVar{{ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
				LocalObjectReference: corev1.LocalObjectReference{Name: "key"}, Key: "k", Optional: opt}}}, {Value: "plain"}},
		}},
	}
	want := []Ref{{Name: "init", Optional: true}, {Name: "key", Optional: true}, {Name: "proj"}, {Name: "vol"}} // vol: one required reference
	if d := cmp.Diff(want, Refs(spec)); d != "" {
		t.Errorf("Refs (-want +got):\n%s", d)
	}
}

func digestOf(cms map[string]*corev1.ConfigMap) string {
	var refs []Ref
	for _, n := range []string{"a", "b"} {
		if _, ok := cms[n]; ok {
			refs = append(refs, Ref{Name: n})
		}
	}
	return Digest(refs, func(name string) *corev1.ConfigMap { return cms[name] })
}

func TestDigestIsUnambiguous(t *testing.T) {
	cm := func(data map[string]string, bin map[string][]byte) *corev1.ConfigMap {
		return &corev1.ConfigMap{Data: data, BinaryData: bin}
	}
	cases := []map[string]*corev1.ConfigMap{
		{"a": nil},          // absent
		{"a": cm(nil, nil)}, // present, empty
		{"a": cm(map[string]string{"k": "bc"}, nil)},
		{"a": cm(map[string]string{"kb": "c"}, nil)},
		{"a": cm(nil, map[string][]byte{"k": []byte("bc")})}, // same bytes as binary data
		{"a": cm(map[string]string{"k": ""}, nil)},
		{"a": cm(nil, nil), "b": cm(nil, nil)},
		{"a": cm(map[string]string{"k": "v"}, nil), "b": nil},
		{"a": cm(nil, nil), "b": cm(map[string]string{"k": "v"}, nil)},
	}
	seen := map[string]int{}
	for i, c := range cases {
		d := digestOf(c)
		if j, ok := seen[d]; ok {
			t.Errorf("cases %d and %d share a digest", j, i)
		}
		seen[d] = i
	}
	labelled := cm(map[string]string{"k": "bc"}, nil)
	labelled.ObjectMeta = metav1.ObjectMeta{Labels: map[string]string{"x": "y"}, ResourceVersion: "9"}
	if digestOf(map[string]*corev1.ConfigMap{"a": labelled}) != digestOf(cases[2]) {
		t.Error("labels or resourceVersion change the digest")
	}
}

func TestChangedNamesTheConfigMapsThatDiffer(t *testing.T) {
	for _, tc := range []struct {
		before, after string
		want          []string
	}{
		{"", "a=1,b=2", []string{"a", "b"}},
		{"a=1,b=2", "a=1,b=3", []string{"b"}},
		{"a=1,b=2", "a=1", []string{"b"}},
		{"a=1", "a=1,c=4", []string{"c"}},
		{"a=1,b=2", "", []string{"a", "b"}},
		{"a=1", "a=1", nil},
	} {
		if d := cmp.Diff(tc.want, changed(tc.before, tc.after)); d != "" {
			t.Errorf("changed(%q, %q) (-want +got):\n%s", tc.before, tc.after, d)
		}
	}
}

// BenchmarkDigest is the digest's cost per referenced ConfigMap of 10 keys.
func BenchmarkDigest(b *testing.B) {
	data := map[string]string{}
	for i := range 10 {
		data[fmt.Sprintf("key-%d", i)] = fmt.Sprintf("value-%d-%0100d", i, i)
	}
	for _, n := range []int{1, 10} {
		refs := make([]Ref, n)
		cms := map[string]*corev1.ConfigMap{}
		for i := range refs {
			refs[i] = Ref{Name: fmt.Sprintf("cm-%02d", i)}
			cms[refs[i].Name] = &corev1.ConfigMap{Data: data}
		}
		b.Run(fmt.Sprintf("refs=%d", n), func(b *testing.B) {
			for b.Loop() {
				Digest(refs, func(name string) *corev1.ConfigMap { return cms[name] })
			}
		})
	}
}
