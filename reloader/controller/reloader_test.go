// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package controller

import (
	"bytes"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"

	"github.com/kpatterns/kpatterns/shared/digest"
)

// spec references ConfigMaps and Secrets in every form.
func spec() *corev1.PodSpec {
	opt := ptr.To(true)
	return &corev1.PodSpec{
		Volumes: []corev1.Volume{
			{Name: "v", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol"}, Optional: opt}}},
			{Name: "p", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
				{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "proj"}}},
				{Secret: &corev1.SecretProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "sproj"}}},
				{DownwardAPI: &corev1.DownwardAPIProjection{}}}}}},
			{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "svol", Optional: opt}}},
			{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "i", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "items"},
				Items: []corev1.KeyToPath{{Key: "b", Path: "b"}, {Key: "a", Path: "a"}}}}},
		},
		InitContainers: []corev1.Container{{Name: "init", Image: "busybox", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "init"}, Optional: opt}},
			{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "sinit"}}}}}},
		Containers: []corev1.Container{{
			Name: "app", Image: "nginx", Args: []string{"--big"},
			EnvFrom: []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "vol"}}}},
			Env: []corev1.EnvVar{
				{Name: "K", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "key"}, Key: "k", Optional: opt}}},
				{Name: "S", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "skey"}, Key: "k"}}},
				{Name: "I", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "items"}, Key: "c"}}},
				{Name: "V", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "vol"}, Key: "k"}}},
				{Name: "plain", Value: "x"}},
		}},
	}
}

func TestRefs(t *testing.T) {
	want := []Ref{
		{Kind: ConfigMap, Name: "init", Optional: true},
		{Kind: ConfigMap, Name: "items", Keys: []string{"a", "b", "c"}}, // the union of what its references read
		{Kind: ConfigMap, Name: "key", Optional: true, Keys: []string{"k"}}, {Kind: ConfigMap, Name: "proj"},
		{Kind: ConfigMap, Name: "vol"}, // one required reference makes it required; one whole reference, whole
		{Kind: Secret, Name: "sinit"}, {Kind: Secret, Name: "skey", Keys: []string{"k"}}, {Kind: Secret, Name: "sproj"}, {Kind: Secret, Name: "svol", Optional: true},
	}
	if d := cmp.Diff(want, Refs(spec())); d != "" {
		t.Errorf("Refs (-want +got):\n%s", d)
	}
}

// What the cache holds of a workload is what Refs reads and the reloader's annotations.
func TestProjectWorkloads(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "w", Namespace: "ns", UID: "u", ResourceVersion: "7", Labels: map[string]string{OptIn: "true"},
		Annotations: map[string]string{DigestsAnnotation: "configmap/vol=1", "other": strings.Repeat("x", 1000)}}
	tpl := corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{digest.Annotation: "d", "other": "y"}}, Spec: *spec()}
	restartAt := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	for _, obj := range []client.Object{
		&appsv1.Deployment{ObjectMeta: meta, Spec: appsv1.DeploymentSpec{Replicas: ptr.To[int32](3), Template: tpl}},
		&appsv1.StatefulSet{ObjectMeta: meta, Spec: appsv1.StatefulSetSpec{ServiceName: "svc", Template: tpl}},
		&appsv1.DaemonSet{ObjectMeta: meta, Spec: appsv1.DaemonSetSpec{Template: tpl}},
		&batchv1.CronJob{ObjectMeta: meta, Spec: batchv1.CronJobSpec{Schedule: "* * * * *", JobTemplate: batchv1.JobTemplateSpec{Spec: batchv1.JobSpec{Template: tpl}}}},
		&Rollout{ObjectMeta: meta, Spec: RolloutSpec{Template: tpl, RestartAt: &restartAt}},
	} {
		p, err := Cached(obj)
		if err != nil {
			t.Fatal(err)
		}
		got := p.(cachedWorkload).workload()
		if d := cmp.Diff(Refs(spec()), got.References); d != "" {
			t.Errorf("%T: references lost (-want +got):\n%s", obj, d)
		}
		rolled := "d"
		if _, ok := obj.(*Rollout); ok {
			rolled = "2026-01-02T03:04:05Z"
		}
		if got.Rolled != rolled || got.Spec != (workloadSpec{}) {
			t.Errorf("%T: rolled %q, spec %+v", obj, got.Rolled, got.Spec)
		}
		if d := cmp.Diff(map[string]string{DigestsAnnotation: "configmap/vol=1"}, p.GetAnnotations()); d != "" || p.GetLabels() != nil || p.GetUID() != "u" {
			t.Errorf("%T: metadata %+v", obj, p)
		}
		if again, _ := Project(p.DeepCopyObject()); !reflect.DeepEqual(again, p) {
			t.Errorf("%T: projecting a projection changed it: client-go may transform an object twice", obj)
		}
	}
	if _, err := Project(&corev1.Pod{}); err == nil {
		t.Error("a kind without a projection was accepted")
	}
	if _, err := Cached(&corev1.Pod{}); err == nil {
		t.Error("a kind the cache does not hold was accepted")
	}
}

// The digests of what the cache holds are those the reloader recorded when it held a map of
// value digests per source (digest.Hash's Strings and Bytes over them): a new version records
// what an old one did, and rolls nothing on upgrade.
func TestDigestEncodingUnchanged(t *testing.T) {
	sum := func(v []byte) string { s := sha256.Sum256(v); return string(s[:]) }
	data, bin := map[string]string{"b": "2", "a": "1", "z": ""}, map[string][]byte{"c": {0, 1}, "a": []byte("x")}
	strs, bins := map[string]string{}, map[string][]byte{}
	for k, v := range data {
		strs[k] = sum([]byte(v))
	}
	for k, v := range bin {
		bins[k] = []byte(sum(v))
	}
	cm, err := Cached(&corev1.ConfigMap{Data: data, BinaryData: bin})
	if err != nil {
		t.Fatal(err)
	}
	sec, err := Cached(&corev1.Secret{Data: bin})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		ref  Ref
		obj  client.Object
		want *digest.Hash
	}{
		{Ref{Kind: ConfigMap, Name: "c"}, cm, digest.New().Field('n', []byte("configmap/c")).Strings(strs).Bytes(bins)},
		{Ref{Kind: Secret, Name: "s"}, sec, digest.New().Field('n', []byte("secret/s")).Bytes(bins)},
		{Ref{Kind: ConfigMap, Name: "c", Keys: []string{"a", "m", "z"}}, cm, digest.New().Field('n', []byte("configmap/c")).
			Field('k', []byte("a")).Field('v', []byte(strs["a"])).Field('k', []byte("z")).Field('v', []byte(strs["z"])).
			Field('K', []byte("a")).Field('b', bins["a"]).Field('m', []byte("m"))},
	} {
		if got := Digests(nil, []Ref{tc.ref}, func(Ref) client.Object { return tc.obj })[0]; got != tc.want.String() {
			t.Errorf("%s: digest %s, want %s", tc.ref.Entry(), got, tc.want.String())
		}
	}
}

// With a key, a source's digest is HMAC-SHA256 over the same fields, computed here from the
// encoding itself (tag, 8-byte big-endian length, bytes); another key, or none, gives another.
func TestDigestsAreKeyed(t *testing.T) {
	key := bytes.Repeat([]byte{7}, 32)
	sec, err := Cached(&corev1.Secret{Data: map[string][]byte{"pin": []byte("1234")}})
	if err != nil {
		t.Fatal(err)
	}
	mac := hmac.New(sha256.New, key)
	sum := sha256.Sum256([]byte("1234"))
	for _, f := range []struct {
		tag byte
		b   []byte
	}{{'n', []byte("secret/s")}, {'K', []byte("pin")}, {'b', sum[:]}} {
		mac.Write(append(binary.BigEndian.AppendUint64([]byte{f.tag}, uint64(len(f.b))), f.b...))
	}
	digests := func(key []byte) string {
		return Digests(key, []Ref{{Kind: Secret, Name: "s"}}, func(Ref) client.Object { return sec })[0]
	}
	if got, want := digests(key), hex.EncodeToString(mac.Sum(nil)); got != want {
		t.Errorf("keyed digest %s, want %s", got, want)
	}
	if other := digests(bytes.Repeat([]byte{8}, 32)); other == digests(key) || digests(nil) == digests(key) {
		t.Error("another key, or none, gave the same digest")
	}
	if KeyID(key) == KeyID(bytes.Repeat([]byte{8}, 32)) || len(KeyID(key)) != 16 {
		t.Errorf("KeyID %q does not tell keys apart", KeyID(key))
	}
}

// Projected sources hold no value, and digest as the whole objects they came from would.
func TestProjectSourcesHoldNoValue(t *testing.T) {
	value := "s3cr3t-value"
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Labels: map[string]string{"l": value}},
		Data: map[string]string{"k": value}, BinaryData: map[string][]byte{"b": []byte(value)}}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "s", Annotations: map[string]string{"a": value}},
		Data: map[string][]byte{"k": []byte(value)}, StringData: map[string]string{"x": value}, Type: corev1.SecretTypeOpaque}
	for _, obj := range []client.Object{cm, sec} {
		p, err := Cached(obj)
		if err != nil {
			t.Fatal(err)
		}
		if s := fmt.Sprintf("%+v", p); strings.Contains(s, value) || bytes.Contains([]byte(s), []byte(value)) {
			t.Errorf("%T projection holds the value: %s", obj, s)
		}
	}
	pcm, _ := Cached(cm)
	psec, _ := Cached(sec)
	for _, p := range []client.Object{pcm, psec} {
		if again, _ := Project(p.DeepCopyObject()); !reflect.DeepEqual(again, p) {
			t.Errorf("%T: projecting a projection changed it: client-go may transform an object twice", p)
		}
	}
	changed := cm.DeepCopy()
	changed.Data["k"] = "other"
	pchanged, _ := Cached(changed)
	one := func(o client.Object) string {
		return Digests(nil, []Ref{{Kind: ConfigMap, Name: "c"}}, func(Ref) client.Object { return o })[0]
	}
	if one(pcm) == one(pchanged) {
		t.Error("a changed value digests alike")
	}
}

func TestDigestIsUnambiguous(t *testing.T) {
	cm := func(data map[string]string, bin map[string][]byte) client.Object {
		p, _ := Cached(&corev1.ConfigMap{Data: data, BinaryData: bin})
		return p
	}
	secret := func(data map[string][]byte) client.Object {
		p, _ := Cached(&corev1.Secret{Data: data})
		return p
	}
	type src struct {
		ref Ref
		obj client.Object
	}
	a, b, s := Ref{Kind: ConfigMap, Name: "a"}, Ref{Kind: ConfigMap, Name: "b"}, Ref{Kind: Secret, Name: "a"}
	cases := [][]src{
		{{a, nil}},          // absent
		{{a, cm(nil, nil)}}, // present, empty
		{{a, cm(map[string]string{"k": "bc"}, nil)}},
		{{a, cm(map[string]string{"kb": "c"}, nil)}},
		{{a, cm(nil, map[string][]byte{"k": []byte("bc")})}}, // same bytes as binary data
		{{a, cm(map[string]string{"k": ""}, nil)}},
		{{a, cm(nil, nil)}, {b, cm(nil, nil)}},
		{{a, cm(map[string]string{"k": "v"}, nil)}, {b, nil}},
		{{a, cm(nil, nil)}, {b, cm(map[string]string{"k": "v"}, nil)}},
		{{s, secret(map[string][]byte{"k": []byte("bc")})}}, // a Secret of the same name and bytes
		{{s, nil}},
	}
	seen := map[string]int{}
	for i, c := range cases {
		var refs []Ref
		objs := map[string]client.Object{}
		for _, x := range c {
			refs = append(refs, x.ref)
			objs[x.ref.Key()] = x.obj
		}
		d := Combined(Digests(nil, refs, func(r Ref) client.Object { return objs[r.Key()] }))
		if j, ok := seen[d]; ok {
			t.Errorf("cases %d and %d share a digest", j, i)
		}
		seen[d] = i
	}
}

// The sources that exist when the reloader starts map to no workload: every workload is
// reconciled then anyway; later creations, updates and deletions do.
func TestSourceChanged(t *testing.T) {
	cm := &Source[corev1.ConfigMap]{}
	if SourceChanged.Create(event.CreateEvent{Object: cm, IsInInitialList: true}) {
		t.Error("a source of the initial list mapped")
	}
	if !SourceChanged.Create(event.CreateEvent{Object: cm}) || !SourceChanged.Update(event.UpdateEvent{ObjectOld: cm, ObjectNew: cm}) ||
		!SourceChanged.Delete(event.DeleteEvent{Object: cm}) {
		t.Error("a created, changed or deleted source did not map")
	}
}

func TestChangedSources(t *testing.T) {
	for _, tc := range []struct {
		before, after string
		want          []string
	}{
		{"configmap/a=1,secret/b=2", "configmap/a=1,secret/b=3", []string{"secret/b (2 → 3)"}},
		{"configmap/a=1,secret/b=2", "configmap/a=9,secret/b=3", []string{"configmap/a (1 → 9)", "secret/b (2 → 3)"}},
		{"configmap/a=1,secret/b=2", "configmap/a=1", nil}, // the references changed: no rollout of the reloader's
		{"configmap/a=1", "configmap/a=1,configmap/c=4", nil},
		{"", "configmap/a=1", nil},
		{"configmap/a=1", "configmap/a=1", nil},
	} {
		if d := cmp.Diff(tc.want, changedSources(tc.before, tc.after)); d != "" {
			t.Errorf("changedSources(%q, %q) (-want +got):\n%s", tc.before, tc.after, d)
		}
	}
}

// BenchmarkDigest is the digest's cost per referenced ConfigMap of 10 keys, from its projection.
func BenchmarkDigest(b *testing.B) {
	data := map[string]string{}
	for i := range 10 {
		data[fmt.Sprintf("key-%d", i)] = fmt.Sprintf("value-%d-%01000d", i, i)
	}
	p, _ := Cached(&corev1.ConfigMap{Data: data})
	for _, n := range []int{1, 10} {
		refs := make([]Ref, n)
		for i := range refs {
			refs[i] = Ref{Kind: ConfigMap, Name: fmt.Sprintf("cm-%02d", i)}
		}
		b.Run(fmt.Sprintf("refs=%d", n), func(b *testing.B) {
			for b.Loop() {
				Combined(Digests(nil, refs, func(Ref) client.Object { return p }))
			}
		})
	}
}

// A reference that selects keys digests only those: a change to another key leaves its digest,
// a change to one of them, or its removal, does not.
func TestDigestsOfSelectedKeys(t *testing.T) {
	cm := func(data map[string]string) client.Object {
		p, err := Cached(&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c"}, Data: data})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	read := Ref{Kind: ConfigMap, Name: "c", Keys: []string{"a"}}
	whole := Ref{Kind: ConfigMap, Name: "c"}
	of := func(r Ref, data map[string]string) string {
		return Digests(nil, []Ref{r}, func(Ref) client.Object { return cm(data) })[0]
	}
	base := map[string]string{"a": "1", "b": "1"}
	if of(read, base) != of(read, map[string]string{"a": "1", "b": "2"}) {
		t.Error("a change to a key not read changed the digest")
	}
	if of(whole, base) == of(whole, map[string]string{"a": "1", "b": "2"}) {
		t.Error("a change to any key must change a whole source's digest")
	}
	for _, other := range []map[string]string{{"a": "2", "b": "1"}, {"b": "1"}, {"a": "", "b": "1"}} {
		if of(read, base) == of(read, other) {
			t.Errorf("%v: a change to a read key kept the digest", other)
		}
	}
	if of(read, map[string]string{"b": "1"}) == of(read, map[string]string{"a": "", "b": "1"}) {
		t.Error("a missing key and an empty one digest alike")
	}
	if read.Entry() != "configmap/c:a" || whole.Entry() != "configmap/c" {
		t.Errorf("entries %q, %q", read.Entry(), whole.Entry())
	}
}
