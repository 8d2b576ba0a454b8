package ontap

import (
	"encoding/json"
	"strings"
	"testing"
)

func TestCommentRoundTrip(t *testing.T) {
	m := &volumeMeta{Name: "pvc-1", Size: 10 << 30, AccessType: "mount", FSType: "ext4", SourceSnapshotID: "pvc-0/snap",
		Pool: "b1_pool_0", Backend: "b1"}
	c, err := encodeComment(map[string]string{"team": "db"}, m)
	if err != nil {
		t.Fatal(err)
	}
	labels, got := decodeComment(c)
	if *got != *m || labels["team"] != "db" {
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

func TestCommentTooLong(t *testing.T) {
	if _, err := encodeComment(map[string]string{"k": strings.Repeat("v", 1000)}, &volumeMeta{Name: "pvc-1"}); err == nil {
		t.Error("a comment over ONTAP's 1023 characters was accepted")
	}
}

func FuzzDecodeComment(f *testing.F) {
	f.Add(`{"ontap-csi":{"name":"pvc-1","size":"1073741824","access":"mount"},"provisioning":{"a":"b"}}`)
	f.Add(`{"provisioning":{"cluster":"prod"}}`)
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
		if again == nil || *again != *meta {
			t.Fatalf("%q: re-encoding changed the record: %+v vs %+v", comment, meta, again)
		}
	})
}
