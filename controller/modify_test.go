package controller

import (
	"context"
	"reflect"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/ontap-csi/ontap-csi/backends"
)

func ptr[T any](v T) *T { return &v }

func createOn(t *testing.T, s *Service, name, backendType string, mutable map[string]string) error {
	t.Helper()
	_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: name, VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
		Parameters: map[string]string{"backendType": backendType}, MutableParameters: mutable,
	})
	return err
}

// TestModifyVolume: mutable parameters are checked before the volume is
// looked up, refusals change nothing, and what is accepted reaches the
// backend parsed.
func TestModifyVolume(t *testing.T) {
	for _, tc := range []struct {
		name   string
		id     string
		params map[string]string
		want   codes.Code
		lookup bool             // the volume may be looked up
		apply  *backends.Modify // what the backend is asked to apply
	}{
		{name: "no volume id", params: map[string]string{"qosPolicy": "gold"}, want: codes.InvalidArgument},
		{name: "unknown key", id: "nas-vol", params: map[string]string{"XXX_FakeKey": "v"}, want: codes.InvalidArgument},
		{name: "immutable key", id: "nas-vol", params: map[string]string{"backendType": "ontap-san"}, want: codes.InvalidArgument},
		{name: "immutable key of Trident's spelling", id: "nas-vol", params: map[string]string{"trident.netapp.io/encryption": "true"}, want: codes.InvalidArgument},
		{name: "reserve over 90", id: "nas-vol", params: map[string]string{"snapshotReserve": "95"}, want: codes.InvalidArgument},
		{name: "reserve not a number", id: "nas-vol", params: map[string]string{"snapshotReserve": "ten"}, want: codes.InvalidArgument},
		{name: "unknown tiering policy", id: "nas-vol", params: map[string]string{"tieringPolicy": "sometimes"}, want: codes.InvalidArgument},
		{name: "snapshotDir not a boolean", id: "nas-vol", params: map[string]string{"snapshotDir": "maybe"}, want: codes.InvalidArgument},
		{name: "empty QoS policy name", id: "nas-vol", params: map[string]string{"qosPolicy": ""}, want: codes.InvalidArgument},
		{name: "policy name with a comma", id: "nas-vol", params: map[string]string{"snapshotPolicy": "a,b"}, want: codes.InvalidArgument},
		{name: "fixed and adaptive QoS together", id: "nas-vol", params: map[string]string{"qosPolicy": "gold", "adaptiveQosPolicy": "extreme"}, want: codes.InvalidArgument},
		{name: "empty permissions", id: "nas-vol", params: map[string]string{"unixPermissions": ""}, want: codes.InvalidArgument},
		{name: "permissions neither octal nor symbolic", id: "nas-vol", params: map[string]string{"unixPermissions": "0 0"}, want: codes.InvalidArgument},
		{name: "unknown volume", id: "nope", params: map[string]string{"qosPolicy": "gold"}, want: codes.NotFound, lookup: true},
		{name: "export policy of an iSCSI volume", id: "san-vol", params: map[string]string{"exportPolicy": "p"}, want: codes.InvalidArgument, lookup: true},
		{name: "nothing to change", id: "nas-vol", params: map[string]string{}, want: codes.OK, lookup: true},
		{name: "every NAS key", id: "nas-vol", want: codes.OK, lookup: true, params: map[string]string{
			"qosPolicy": "gold", "snapshotPolicy": "none", "snapshotReserve": "10%", "tieringPolicy": "snapshot-only",
			"snapshotDir": "true", "unixPermissions": "0750", "exportPolicy": "p", "csi.storage.k8s.io/pvc/name": "data",
		}, apply: &backends.Modify{
			QoSPolicy: ptr("gold"), SnapshotPolicy: ptr("none"), SnapshotReserve: ptr(10), TieringPolicy: ptr("snapshot_only"),
			SnapshotDir: ptr(true), UnixPermissions: ptr("0750"), ExportPolicy: ptr("p"),
		}},
		{name: "adaptive QoS on SAN, Trident's spelling", id: "san-vol", want: codes.OK, lookup: true,
			params: map[string]string{"trident.netapp.io/adaptiveQosPolicy": "extreme"},
			apply:  &backends.Modify{AdaptiveQoSPolicy: ptr("extreme")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, nas, san := newService(t)
			if err := createOn(t, s, "nas-vol", "ontap-nas", nil); err != nil {
				t.Fatal(err)
			}
			if err := createOn(t, s, "san-vol", "ontap-san", nil); err != nil {
				t.Fatal(err)
			}
			nas.lookups, san.lookups = 0, 0
			resp, err := s.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: tc.id, MutableParameters: tc.params})
			if code(err) != tc.want || (err == nil) != (resp != nil) {
				t.Fatalf("got %v (%v), want %v", code(err), err, tc.want)
			}
			if looked := nas.lookups+san.lookups > 0; looked && !tc.lookup {
				t.Errorf("refused after a lookup: arguments must be checked first")
			}
			var applied []backends.Modify
			applied = append(append(applied, nas.modifies...), san.modifies...)
			switch {
			case tc.apply == nil && len(applied) > 0:
				t.Errorf("changed %+v", applied)
			case tc.apply != nil && (len(applied) != 1 || !reflect.DeepEqual(applied[0], *tc.apply)):
				t.Errorf("applied %+v, want %+v", applied, *tc.apply)
			}
		})
	}
}

// TestModifyVolumeBackendFailure: the backend's failure keeps its code.
func TestModifyVolumeBackendFailure(t *testing.T) {
	s, nas, _ := newService(t)
	if err := createOn(t, s, "v", "ontap-nas", nil); err != nil {
		t.Fatal(err)
	}
	nas.failWith = backends.Errorf(backends.ErrUnavailable, "ONTAP is down")
	_, err := s.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: "v", MutableParameters: map[string]string{"qosPolicy": "gold"}})
	if code(err) != codes.Unavailable {
		t.Fatalf("got %v (%v), want Unavailable", code(err), err)
	}
}

// plainBackend is a backend that cannot modify volumes.
type plainBackend struct{ backends.Backend }

func TestModifyVolumeUnsupportedBackend(t *testing.T) {
	f := newFake("old", "ontap-nas", backends.ProtocolFile)
	s, err := New(Config{Backends: []backends.Backend{plainBackend{f}}, Nodes: NewNodes()})
	if err != nil {
		t.Fatal(err)
	}
	if err := createOn(t, s, "v", "ontap-nas", nil); err != nil {
		t.Fatal(err)
	}
	_, err = s.ControllerModifyVolume(context.Background(), &csi.ControllerModifyVolumeRequest{VolumeId: "v", MutableParameters: map[string]string{"qosPolicy": "gold"}})
	if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "cannot modify") {
		t.Fatalf("got %v (%v), want InvalidArgument", code(err), err)
	}
	if err := createOn(t, s, "w", "ontap-nas", map[string]string{"qosPolicy": "gold"}); code(err) != codes.InvalidArgument {
		t.Fatalf("create with mutable parameters on it: %v, want InvalidArgument", err)
	}
}

// TestCreateVolumeMutableParameters: a VolumeAttributesClass at creation
// becomes the new volume's options; one a backend refuses is refused
// before anything is created.
func TestCreateVolumeMutableParameters(t *testing.T) {
	s, nas, san := newService(t)
	err := createOn(t, s, "v", "ontap-nas", map[string]string{"qosPolicy": "gold", "snapshotReserve": "20", "tieringPolicy": "auto"})
	if err != nil {
		t.Fatal(err)
	}
	o := nas.creates[0].Options
	if o.QoSPolicy != "gold" || *o.SnapshotReserve != 20 || o.TieringPolicy != "auto" {
		t.Errorf("options %+v", o)
	}
	if len(nas.modifies) != 0 {
		t.Errorf("a new volume was modified after its create: %+v", nas.modifies)
	}
	if err := createOn(t, s, "w", "ontap-san", map[string]string{"unixPermissions": "0700"}); code(err) != codes.InvalidArgument {
		t.Fatalf("SAN with unixPermissions: %v, want InvalidArgument", err)
	}
	if err := createOn(t, s, "x", "ontap-nas", map[string]string{"fsType": "xfs"}); code(err) != codes.InvalidArgument {
		t.Fatalf("immutable key: %v, want InvalidArgument", err)
	}
	if len(san.creates) != 0 || len(nas.creates) != 1 {
		t.Errorf("refused creates reached a backend")
	}
	// A clone inherits its source's attributes: the class is applied to
	// it after the clone is made, and again by a retry.
	for range 2 {
		_, err = s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
			Name: "clone", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
			MutableParameters: map[string]string{"qosPolicy": "silver"},
			VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
				Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "v"}}},
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(nas.modifies) != 2 || *nas.modifies[0].QoSPolicy != "silver" {
		t.Errorf("clone modifies %+v, want silver twice", nas.modifies)
	}
}

// FuzzParseMutableParameters: whatever a VolumeAttributesClass holds is
// refused, or parsed into values the backends can send as they are.
func FuzzParseMutableParameters(f *testing.F) {
	f.Add("qosPolicy", "gold", "snapshotReserve", "10%")
	f.Add("trident.netapp.io/tieringPolicy", "snapshot-only", "unixPermissions", "---rwxr-x---")
	f.Add("adaptiveQosPolicy", "extreme", "qosPolicy", "none")
	f.Fuzz(func(t *testing.T, k1, v1, k2, v2 string) {
		m, err := parseMutableParameters(map[string]string{k1: v1, k2: v2})
		if err != nil {
			if code(toStatus(err)) != codes.InvalidArgument {
				t.Fatalf("refusal %v is not INVALID_ARGUMENT", err)
			}
			return
		}
		if r := m.SnapshotReserve; r != nil && (*r < 0 || *r > 90) {
			t.Fatalf("snapshot reserve %d accepted", *r)
		}
		if m.QoSPolicy != nil && m.AdaptiveQoSPolicy != nil {
			t.Fatal("fixed and adaptive QoS accepted together")
		}
		if p := m.TieringPolicy; p != nil && tieringPolicies[*p] != *p {
			t.Fatalf("tiering policy %q is not ONTAP's", *p)
		}
		for _, name := range []*string{m.QoSPolicy, m.AdaptiveQoSPolicy, m.SnapshotPolicy, m.ExportPolicy, m.UnixPermissions} {
			if name != nil && (*name == "" || strings.ContainsAny(*name, " ,\n")) {
				t.Fatalf("name %q accepted", *name)
			}
		}
	})
}
