package rest

import (
	"encoding/json"
	"testing"
)

// TestVolumeModifyBody: every change of a volume goes into one PATCH body,
// in ONTAP's field names; nothing to change is refused before a request.
func TestVolumeModifyBody(t *testing.T) {
	s := func(v string) *string { return &v }
	n := func(v int) *int { return &v }
	f := false
	for _, tc := range []struct {
		name string
		m    VolumeModify
		want string // the body as JSON; "" for an error
	}{
		{"nothing", VolumeModify{}, `{}`},
		{"QoS and snapshot policy", VolumeModify{QoSPolicy: s("gold"), SnapshotPolicy: s("none")},
			`{"qos":{"policy":{"name":"gold"}},"snapshot_policy":{"name":"none"}}`},
		{"reserve with growth", VolumeModify{SnapshotReservePercent: n(20), Size: func() *int64 { v := int64(1 << 30); return &v }(), LargeSize: true},
			`{"size":1073741824,"space":{"large_size_enabled":true,"snapshot":{"reserve_percent":20}}}`},
		{"NAS attributes", VolumeModify{UnixPermissions: s("750"), ExportPolicy: s("p"), SnapshotDirAccess: &f, TieringPolicy: s("auto")},
			`{"nas":{"export_policy":{"name":"p"},"unix_permissions":750},"snapshot_directory_access_enabled":false,"tiering":{"policy":"auto"}}`},
		{"permissions not octal", VolumeModify{UnixPermissions: s("rwx")}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			body, err := volumeModifyBody(tc.m)
			if tc.want == "" {
				if err == nil {
					t.Fatalf("accepted: %v", body)
				}
				return
			}
			got, _ := json.Marshal(body)
			if err != nil || string(got) != tc.want {
				t.Fatalf("got %s (%v), want %s", got, err, tc.want)
			}
		})
	}
}
