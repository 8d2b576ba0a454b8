package harness

import "testing"

func TestParseLease(t *testing.T) {
	tests := []struct {
		name    string
		doc     string
		want    Lease
		wantErr bool
	}{
		{
			name: "docs/design/registration.md §4 document",
			doc: `{"generation":1796225121467,"holder":{"pod":"ds-a","podUID":"u","pid":42,"startedAt":"2026-12-02T14:00:00Z"},
				"registrationSocket":"/k/plugins_registry/csi.trident.netapp.io-g1796225121467-reg.sock",
				"nodeInfo":{"nodeID":"node1"},"phase":"registered","updatedAt":"2026-12-02T14:00:01Z"}`,
			want: Lease{Generation: 1796225121467, Pod: "ds-a", PID: 42, Phase: "registered",
				Socket: "/k/plugins_registry/csi.trident.netapp.io-g1796225121467-reg.sock"},
		},
		{
			name: "keys in another case, generation as a string",
			doc:  `{"Generation":"7","Holder":{"PodName":"ds-b","PID":7},"Phase":"starting"}`,
			want: Lease{Generation: 7, Pod: "ds-b", PID: 7, Phase: "starting"},
		},
		{
			name: "generation above 2^53 keeps every digit",
			doc:  `{"generation":18446744073709551615}`,
			want: Lease{Generation: 18446744073709551615},
		},
		{name: "empty object", doc: `{}`},
		{name: "truncated", doc: `{"generation":`, wantErr: true},
		{name: "not an object", doc: `[1,2]`, wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseLease([]byte(tt.doc))
			if (err != nil) != tt.wantErr {
				t.Fatalf("err = %v, wantErr %t", err, tt.wantErr)
			}
			if got != tt.want {
				t.Errorf("ParseLease = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// The lease is written by the process under test, which may be killed
// mid-write or be wrong: the observer must never crash on it.
func FuzzParseLease(f *testing.F) {
	f.Add([]byte(`{"generation":1796225121467,"holder":{"pod":"ds-a","pid":42},"phase":"registered"}`))
	f.Add([]byte(`{"generation":"x","holder":[]}`))
	f.Add([]byte(`{"holder":{"pid":1e400}}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		_, _ = ParseLease(b)
	})
}
