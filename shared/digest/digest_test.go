// Copyright 2026 The kpatterns Authors.
// SPDX-License-Identifier: Apache-2.0

package digest

import "testing"

func TestMapIsUnambiguousAndOrderFree(t *testing.T) {
	distinct := []map[string]string{nil, {"a": ""}, {"a": "bc"}, {"ab": "c"}, {"a": "b", "c": ""}, {"a": "b\x00c"}}
	seen := map[string]int{}
	for i, m := range distinct {
		d := Map(m)
		if j, ok := seen[d]; ok {
			t.Errorf("%v and %v share a digest", distinct[j], m)
		}
		seen[d] = i
	}
	if Map(map[string]string{"x": "1", "y": "2"}) != Map(map[string]string{"y": "2", "x": "1"}) {
		t.Error("the digest depends on map order")
	}
	// A string value and the same bytes as a binary value are different contents.
	if New().Strings(map[string]string{"a": "b"}).String() == New().Bytes(map[string][]byte{"a": []byte("b")}).String() {
		t.Error("data and binaryData encode alike")
	}
}
