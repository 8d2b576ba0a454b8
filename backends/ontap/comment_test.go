package ontap

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

func TestCommentRoundTrip(t *testing.T) {
	skip := true
	m := &volumeMeta{SkipRecoveryQueue: &skip, Name: "pvc-1", Size: 10 << 30, AccessType: "mount", FSType: "ext4", SourceSnapshotID: "pvc-0/snap",
		Pool: "b1_pool_0", Backend: "b1",
		Topologies: []map[string]string{{"topology.kubernetes.io/zone": "a", "topology.kubernetes.io/region": "r1"}, {"topology.kubernetes.io/zone": "b"}}}
	c, err := encodeComment(map[string]string{"team": "db"}, m)
	if err != nil {
		t.Fatal(err)
	}
	labels, got := decodeComment(c)
	if !reflect.DeepEqual(got, m) || labels["team"] != "db" {
		t.Errorf("round trip: %+v %v", got, labels)
	}
	// Trident parses comments as map[string]map[string]string.
	var trident map[string]map[string]string
	if err := json.Unmarshal([]byte(c), &trident); err != nil || trident["provisioning"]["team"] != "db" {
		t.Errorf("Trident cannot read %s: %v", c, err)
	}
	if again, _ := encodeComment(map[string]string{"team": "db"}, m); again != c {
		t.Error("encoding is not deterministic")
	}
}

func TestDecodeForeignComments(t *testing.T) {
	for _, c := range []string{
		"",
		`{"provisioning":{"cluster":"prod"}}`, // Trident's labels
		"created by hand",
		`{"ontap-csi":{"size":"5"}}`, // no name: not a record
		`{"ontap-csi":"x"}`,
		`[1,2]`,
	} {
		if _, meta := decodeComment(c); meta != nil {
			t.Errorf("%q decoded as a record: %+v", c, meta)
		}
	}
	if labels, _ := decodeComment(`{"provisioning":{"cluster":"prod"}}`); labels["cluster"] != "prod" {
		t.Errorf("Trident labels not read: %v", labels)
	}
	if _, meta := decodeComment(`{"ontap-csi":{"name":"v","size":"-5"}}`); meta == nil || meta.Size != 0 {
		t.Errorf("negative size accepted: %+v", meta)
	}
}

func TestTopologyEncoding(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []map[string]string
	}{
		{"", nil},
		{"zone=a", []map[string]string{{"zone": "a"}}},
		{"zone=a,region=r;zone=b", []map[string]string{{"zone": "a", "region": "r"}, {"zone": "b"}}},
		{"zone", nil},        // no '=': malformed, falls back to the pool's
		{"zone=a;", nil},     // empty segment
		{"=a", nil},          // empty key
		{"zone=a,,b=c", nil}, // empty pair
	} {
		got := decodeTopologies(tc.in)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("decodeTopologies(%q) = %v, want %v", tc.in, got, tc.want)
		}
		if got != nil && encodeTopologies(got) != encodeTopologies(tc.want) {
			t.Errorf("%q does not round-trip", tc.in)
		}
	}
	if got := encodeTopologies([]map[string]string{{"b": "2", "a": "1"}}); got != "a=1,b=2" {
		t.Errorf("keys not sorted: %q", got)
	}
}

func TestCommentTooLong(t *testing.T) {
	if _, err := encodeComment(map[string]string{"k": strings.Repeat("v", 1000)}, &volumeMeta{Name: "pvc-1"}); err == nil {
		t.Error("a comment over ONTAP's 1023 characters was accepted")
	}
}

func FuzzDecodeComment(f *testing.F) {
	f.Add(`{"ontap-csi":{"name":"pvc-1","size":"1073741824","access":"mount"},"provisioning":{"a":"b"}}`)
	f.Add(`{"provisioning":{"cluster":"prod"}}`)
	f.Add(`{"ontap-csi":{"name":"pvc-1","topology":"topology.kubernetes.io/zone=a,x=y;topology.kubernetes.io/zone=b"}}`)
	f.Add("")
	f.Fuzz(func(t *testing.T, comment string) {
		labels, meta := decodeComment(comment)
		if meta == nil {
			return
		}
		if meta.Name == "" || meta.Size < 0 {
			t.Fatalf("invalid record from %q: %+v", comment, meta)
		}
		// What we read we can write back, unless it is too long.
		c, err := encodeComment(labels, meta)
		if err != nil {
			return
		}
		_, again := decodeComment(c)
		if again == nil || !reflect.DeepEqual(again, meta) {
			t.Fatalf("%q: re-encoding changed the record: %+v vs %+v", comment, meta, again)
		}
	})
}
