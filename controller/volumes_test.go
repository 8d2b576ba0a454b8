package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/backends"
)

const gib = int64(1) << 30

func mountCap(mode csi.VolumeCapability_AccessMode_Mode, fs string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func blockCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

var (
	rwo = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	rwx = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	rox = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
)

// newService serves a NAS and a SAN fake backend and one registered node.
func newService(t *testing.T) (*Service, *fakeBackend, *fakeBackend) {
	t.Helper()
	nas := newFake("nas1", "ontap-nas", backends.ProtocolFile)
	san := newFake("san1", "ontap-san", backends.ProtocolBlock)
	nodes := NewNodes()
	nodes.Set(backends.Node{Name: "node-1", IQN: "iqn.2020-01.io.example:node-1", IPs: []string{"10.0.0.1"}})
	s, err := New(Config{Backends: []backends.Backend{nas, san}, Nodes: nodes})
	if err != nil {
		t.Fatal(err)
	}
	return s, nas, san
}

func code(err error) codes.Code { return status.Code(err) }

func TestNewRejectsBadConfig(t *testing.T) {
	nodes := NewNodes()
	a, b := newFake("x", "ontap-nas", backends.ProtocolFile), newFake("x", "ontap-san", backends.ProtocolBlock)
	for name, cfg := range map[string]Config{
		"no registry":    {Backends: []backends.Backend{a}},
		"duplicate name": {Backends: []backends.Backend{a, b}, Nodes: nodes},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New succeeded", name)
		}
	}
}

// Without backends the controller still serves, so a Trident controller
// Deployment (whose backends come later) starts; creation is Unavailable.
func TestNoBackendYet(t *testing.T) {
	s, err := New(Config{Nodes: NewNodes()})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
	})
	if code(err) != codes.Unavailable {
		t.Fatalf("CreateVolume without backends: %v, want Unavailable", err)
	}
	if _, err := s.DeleteVolume(context.Background(), &csi.DeleteVolumeRequest{VolumeId: "pvc-1"}); err != nil {
		t.Fatalf("DeleteVolume of an unknown volume must succeed: %v", err)
	}
	// Capacity tracking sees zero, not an error, as for a class nothing
	// matches.
	if resp, err := s.GetCapacity(context.Background(), &csi.GetCapacityRequest{}); err != nil || resp.GetAvailableCapacity() != 0 {
		t.Fatalf("GetCapacity without backends: %v, %v; want 0", resp, err)
	}
}

func TestCreateVolumeArguments(t *testing.T) {
	caps := []*csi.VolumeCapability{mountCap(rwo, "")}
	for _, tc := range []struct {
		name string
		req  *csi.CreateVolumeRequest
		want codes.Code
	}{
		{"no name", &csi.CreateVolumeRequest{VolumeCapabilities: caps}, codes.InvalidArgument},
		{"no capabilities", &csi.CreateVolumeRequest{Name: "v"}, codes.InvalidArgument},
		{"no access mode", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{{
			AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{}}}}}, codes.InvalidArgument},
		{"no access type", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{{
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: rwo}}}}, codes.InvalidArgument},
		{"mixed block and mount", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, ""), blockCap(rwo)}}, codes.InvalidArgument},
		{"two fs types", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "ext4"), mountCap(rwo, "xfs")}}, codes.InvalidArgument},
		{"negative capacity", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, CapacityRange: &csi.CapacityRange{RequiredBytes: -1}}, codes.OutOfRange},
		{"required above limit", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib, LimitBytes: gib}}, codes.OutOfRange},
		{"limit below minimum", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, CapacityRange: &csi.CapacityRange{LimitBytes: 1 << 20}}, codes.OutOfRange},
		{"unknown parameter", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, Parameters: map[string]string{"iops": "5"}}, codes.InvalidArgument},
		{"bad provisioningType", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, Parameters: map[string]string{"provisioningType": "fat"}}, codes.InvalidArgument},
		{"IOPS, which no ONTAP pool offers", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, Parameters: map[string]string{"IOPS": "500"}}, codes.InvalidArgument},
		{"bad snapshotReserve", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, Parameters: map[string]string{"snapshotReserve": "95"}}, codes.InvalidArgument},
		{"bad storagePools", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, Parameters: map[string]string{"storagePools": "nopool"}}, codes.InvalidArgument},
		{"bad selector", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, Parameters: map[string]string{"selector": "a in (b"}}, codes.InvalidArgument},
		{"mutable parameters", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, MutableParameters: map[string]string{"a": "b"}}, codes.InvalidArgument},
		{"block on a NAS-only class", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{blockCap(rwo)},
			Parameters: map[string]string{"backendType": "ontap-nas"}}, codes.InvalidArgument},
		{"RWX filesystem on a SAN-only class", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwx, "ext4")},
			Parameters: map[string]string{"backendType": "ontap-san"}}, codes.InvalidArgument},
		{"unsupported fs on SAN", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "btrfs")},
			Parameters: map[string]string{"backendType": "ontap-san"}}, codes.InvalidArgument},
		{"unknown snapshot source", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, VolumeContentSource: &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "nope/snap"}}}}, codes.NotFound},
		{"malformed snapshot source", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, VolumeContentSource: &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "no-slash"}}}}, codes.NotFound},
		{"unknown volume source", &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: caps, VolumeContentSource: &csi.VolumeContentSource{
			Type: &csi.VolumeContentSource_Volume{Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "nope"}}}}, codes.NotFound},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, nas, san := newService(t)
			resp, err := s.CreateVolume(context.Background(), tc.req)
			if code(err) != tc.want || resp != nil {
				t.Fatalf("got %v (%v), want %v", code(err), err, tc.want)
			}
			if len(nas.creates)+len(san.creates) != 0 {
				t.Fatalf("a failed request created a volume")
			}
		})
	}
}

func TestCreateVolumeSizeAndPlacement(t *testing.T) {
	for _, tc := range []struct {
		name        string
		caps        []*csi.VolumeCapability
		rng         *csi.CapacityRange
		params      map[string]string
		wantBackend string
		wantSize    int64
		wantFS      string
	}{
		{"default size", []*csi.VolumeCapability{mountCap(rwo, "")}, nil, map[string]string{"backendType": "ontap-nas"}, "nas1", gib, ""},
		{"raised to the minimum", []*csi.VolumeCapability{mountCap(rwo, "")}, &csi.CapacityRange{RequiredBytes: 1}, map[string]string{"backendType": "ontap-nas"}, "nas1", 20 << 20, ""},
		{"exact size", []*csi.VolumeCapability{mountCap(rwo, "")}, &csi.CapacityRange{RequiredBytes: 10 * gib, LimitBytes: 10 * gib}, map[string]string{"backendType": "ontap-nas"}, "nas1", 10 * gib, ""},
		{"default capped by limit", []*csi.VolumeCapability{mountCap(rwo, "")}, &csi.CapacityRange{LimitBytes: 512 << 20}, map[string]string{"backendType": "ontap-nas"}, "nas1", 512 << 20, ""},
		{"block goes to SAN", []*csi.VolumeCapability{blockCap(rwx)}, &csi.CapacityRange{RequiredBytes: gib}, nil, "san1", gib, backends.FSTypeRaw},
		{"RWX filesystem goes to NAS", []*csi.VolumeCapability{mountCap(rwx, "")}, &csi.CapacityRange{RequiredBytes: gib}, nil, "nas1", gib, ""},
		{"fs type is kept for SAN", []*csi.VolumeCapability{mountCap(rwo, "XFS")}, &csi.CapacityRange{RequiredBytes: gib}, map[string]string{"backendType": "ontap-san"}, "san1", gib, "xfs"},
		{"storagePools picks the backend", []*csi.VolumeCapability{mountCap(rox, "")}, nil, map[string]string{"storagePools": "san.*:aggr1"}, "san1", gib, ""},
		{"excludeStoragePools", []*csi.VolumeCapability{mountCap(rwo, "")}, nil, map[string]string{"excludeStoragePools": "nas1:.*"}, "san1", gib, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, nas, san := newService(t)
			resp, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
				Name: "pvc-1", VolumeCapabilities: tc.caps, CapacityRange: tc.rng, Parameters: tc.params,
			})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.GetVolume().GetCapacityBytes(); got != tc.wantSize {
				t.Errorf("capacity %d, want %d", got, tc.wantSize)
			}
			b := map[string]*fakeBackend{"nas1": nas, "san1": san}[tc.wantBackend]
			if len(b.creates) != 1 {
				t.Fatalf("backend %s got %d creates", tc.wantBackend, len(b.creates))
			}
			if got := b.creates[0].FSType; got != tc.wantFS {
				t.Errorf("fs type %q, want %q", got, tc.wantFS)
			}
		})
	}
}

func TestCreateVolumeOptions(t *testing.T) {
	s, nas, _ := newService(t)
	_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
		Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
		Parameters: map[string]string{
			"backendType": "ontap-nas", "provisioningType": "thick", "trident.netapp.io/snapshotPolicy": "default",
			"snapshotReserve": "10", "unixPermissions": "0750", "exportPolicy": "custom", "snapshotDirectory": "true",
			"csi.storage.k8s.io/pvc/name": "data", "fsType": "ext4",
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	o := nas.creates[0].Options
	if o.SpaceReserve != "volume" || o.SnapshotPolicy != "default" || *o.SnapshotReserve != 10 ||
		o.UnixPermissions != "0750" || o.ExportPolicy != "custom" || !*o.SnapshotDir {
		t.Errorf("options not passed on: %+v", o)
	}
}

func TestCreateVolumeIdempotency(t *testing.T) {
	s, nas, _ := newService(t)
	ctx := context.Background()
	req := func(size int64) *csi.CreateVolumeRequest {
		return &csi.CreateVolumeRequest{
			Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
			CapacityRange: &csi.CapacityRange{RequiredBytes: size, LimitBytes: size},
			Parameters:    map[string]string{"backendType": "ontap-nas"},
		}
	}
	first, err := s.CreateVolume(ctx, req(10*gib))
	if err != nil {
		t.Fatal(err)
	}
	again, err := s.CreateVolume(ctx, req(10*gib))
	if err != nil || again.Volume.VolumeId != first.Volume.VolumeId || len(nas.creates) != 1 {
		t.Fatalf("second create: %v, %d creates", err, len(nas.creates))
	}
	if _, err := s.CreateVolume(ctx, req(20*gib)); code(err) != codes.AlreadyExists {
		t.Errorf("bigger size: %v, want AlreadyExists", err)
	}
	// The same name asked of another backend type is another volume.
	r := req(10 * gib)
	r.Parameters["backendType"] = "ontap-san"
	if _, err := s.CreateVolume(ctx, r); code(err) != codes.AlreadyExists {
		t.Errorf("other backend type: %v, want AlreadyExists", err)
	}
}

func TestCreateVolumeConcurrentSameName(t *testing.T) {
	s, nas, _ := newService(t)
	nas.block, nas.entered = make(chan struct{}), make(chan struct{})
	req := &csi.CreateVolumeRequest{Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")},
		Parameters: map[string]string{"backendType": "ontap-nas"}}
	done := make(chan error)
	go func() {
		_, err := s.CreateVolume(context.Background(), req)
		done <- err
	}()
	<-nas.entered // the first call holds the name
	if _, err := s.CreateVolume(context.Background(), req); code(err) != codes.Aborted {
		t.Errorf("concurrent create: %v, want Aborted", err)
	}
	close(nas.block)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}

func TestTopology(t *testing.T) {
	zoneA := map[string]string{"topology.kubernetes.io/zone": "a"}
	zoneB := map[string]string{"topology.kubernetes.io/zone": "b"}
	pools := []backends.Pool{
		{Name: "pa", Topologies: []map[string]string{zoneA}},
		{Name: "pb", Topologies: []map[string]string{zoneB}},
	}
	topo := func(req, pref []map[string]string) *csi.TopologyRequirement {
		t := &csi.TopologyRequirement{}
		for _, s := range req {
			t.Requisite = append(t.Requisite, &csi.Topology{Segments: s})
		}
		for _, s := range pref {
			t.Preferred = append(t.Preferred, &csi.Topology{Segments: s})
		}
		return t
	}
	for _, tc := range []struct {
		name     string
		req      *csi.TopologyRequirement
		wantPool string
		wantCode codes.Code
	}{
		{"requisite a", topo([]map[string]string{zoneA}, nil), "pa", codes.OK},
		{"requisite b with extra segments", topo([]map[string]string{{"topology.kubernetes.io/zone": "b", "region": "r"}}, nil), "pb", codes.OK},
		{"preferred b first", topo([]map[string]string{zoneA, zoneB}, []map[string]string{zoneB, zoneA}), "pb", codes.OK},
		{"preferred only", topo(nil, []map[string]string{zoneA}), "pa", codes.OK},
		{"nowhere", topo([]map[string]string{{"topology.kubernetes.io/zone": "c"}}, nil), "", codes.ResourceExhausted},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nas := newFake("nas1", "ontap-nas", backends.ProtocolFile, pools...)
			s, err := New(Config{Backends: []backends.Backend{nas}, Nodes: NewNodes()})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{
				Name: "pvc-1", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")}, AccessibilityRequirements: tc.req,
			})
			if code(err) != tc.wantCode {
				t.Fatalf("got %v, want %v", err, tc.wantCode)
			}
			if err != nil {
				return
			}
			if got := nas.creates[0].Pool; got != tc.wantPool {
				t.Errorf("pool %s, want %s", got, tc.wantPool)
			}
			at := resp.Volume.GetAccessibleTopology()
			if len(at) != 1 || at[0].Segments["topology.kubernetes.io/zone"] != tc.wantPool[1:] {
				t.Errorf("accessible topology %v", at)
			}
		})
	}
}

func TestCloneFromSnapshotAndVolume(t *testing.T) {
	s, nas, _ := newService(t)
	ctx := context.Background()
	caps := []*csi.VolumeCapability{mountCap(rwo, "")}
	params := map[string]string{"backendType": "ontap-nas"}
	if _, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "src", VolumeCapabilities: caps, Parameters: params,
		CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "src"})
	if err != nil {
		t.Fatal(err)
	}
	if snap.Snapshot.SnapshotId != "src/snap-1" || !snap.Snapshot.ReadyToUse || snap.Snapshot.CreationTime == nil {
		t.Errorf("snapshot %+v", snap.Snapshot)
	}
	fromSnap, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "c1", VolumeCapabilities: caps,
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: "src/snap-1"}}}})
	if err != nil {
		t.Fatal(err)
	}
	if fromSnap.Volume.CapacityBytes != 2*gib || fromSnap.Volume.GetContentSource().GetSnapshot().GetSnapshotId() != "src/snap-1" {
		t.Errorf("clone from snapshot %+v", fromSnap.Volume)
	}
	// A clone smaller than its source is impossible.
	_, err = s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "c2", VolumeCapabilities: caps,
		CapacityRange: &csi.CapacityRange{LimitBytes: gib},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "src"}}}})
	if code(err) != codes.OutOfRange {
		t.Errorf("clone below source size: %v, want OutOfRange", err)
	}
	// A clone cannot leave its source's backend.
	_, err = s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "c3", VolumeCapabilities: caps,
		Parameters: map[string]string{"backendType": "ontap-san"},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "src"}}}})
	if code(err) != codes.InvalidArgument {
		t.Errorf("clone to another backend type: %v, want InvalidArgument", err)
	}
	// Same name, different source.
	_, err = s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "c1", VolumeCapabilities: caps,
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: "src"}}}})
	if code(err) != codes.AlreadyExists {
		t.Errorf("same name, other source: %v, want AlreadyExists", err)
	}
	if n := len(nas.creates); n != 2 {
		t.Errorf("%d creates, want 2", n)
	}
}

func TestDeleteVolume(t *testing.T) {
	s, nas, _ := newService(t)
	ctx := context.Background()
	if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{}); code(err) != codes.InvalidArgument {
		t.Errorf("no ID: %v", err)
	}
	if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "unknown"}); err != nil {
		t.Errorf("unknown volume: %v, want OK", err)
	}
	nas.vols["v"] = &backends.Volume{ID: "v"}
	nas.snaps["v/s"] = &backends.Snapshot{Name: "s", VolumeID: "v"}
	if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "v"}); code(err) != codes.FailedPrecondition {
		t.Errorf("volume in use: %v, want FailedPrecondition", err)
	}
	// A backend that cannot answer may hold the volume: never report it gone.
	nas.failWith = backends.Errorf(backends.ErrUnavailable, "ONTAP down")
	if _, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: "unknown"}); code(err) != codes.Unavailable {
		t.Errorf("backend down: %v, want Unavailable", err)
	}
}

func TestValidateVolumeCapabilities(t *testing.T) {
	s, nas, san := newService(t)
	nas.vols["file"] = &backends.Volume{ID: "file"}
	san.vols["fs"] = &backends.Volume{ID: "fs", AccessType: backends.AccessMount, FSType: "ext4"}
	san.vols["raw"] = &backends.Volume{ID: "raw", AccessType: backends.AccessBlock, FSType: backends.FSTypeRaw}
	san.vols["trident"] = &backends.Volume{ID: "trident"} // made by Trident: access unknown
	for _, tc := range []struct {
		vol       string
		caps      []*csi.VolumeCapability
		confirmed bool
	}{
		{"file", []*csi.VolumeCapability{mountCap(rwx, "")}, true},
		{"file", []*csi.VolumeCapability{blockCap(rwo)}, false},
		{"fs", []*csi.VolumeCapability{mountCap(rwo, "ext4")}, true},
		{"fs", []*csi.VolumeCapability{mountCap(rwo, "xfs")}, false},
		{"fs", []*csi.VolumeCapability{mountCap(rwx, "")}, false},
		{"fs", []*csi.VolumeCapability{blockCap(rwo)}, false},
		{"raw", []*csi.VolumeCapability{blockCap(rwx)}, true},
		{"raw", []*csi.VolumeCapability{mountCap(rwo, "")}, false},
		{"trident", []*csi.VolumeCapability{mountCap(rwo, "ext4")}, true},
	} {
		resp, err := s.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: tc.vol, VolumeCapabilities: tc.caps})
		if err != nil {
			t.Fatalf("%s: %v", tc.vol, err)
		}
		if got := resp.Confirmed != nil; got != tc.confirmed {
			t.Errorf("%s %v: confirmed %v, want %v (%s)", tc.vol, tc.caps, got, tc.confirmed, resp.Message)
		}
	}
	if _, err := s.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "none",
		VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")}}); code(err) != codes.NotFound {
		t.Errorf("unknown volume: %v", err)
	}
	if _, err := s.ValidateVolumeCapabilities(context.Background(), &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "none"}); code(err) != codes.InvalidArgument {
		t.Errorf("no capabilities: %v", err)
	}
}

func TestExpandVolume(t *testing.T) {
	s, nas, san := newService(t)
	ctx := context.Background()
	nas.vols["n"] = &backends.Volume{ID: "n", SizeBytes: gib}
	san.vols["s"] = &backends.Volume{ID: "s", SizeBytes: gib, AccessType: backends.AccessMount, FSType: "ext4"}
	san.limits.MaxVolumeSize = 4 * gib
	for _, tc := range []struct {
		name     string
		req      *csi.ControllerExpandVolumeRequest
		want     codes.Code
		size     int64
		nodeStep bool
	}{
		{"no ID", &csi.ControllerExpandVolumeRequest{CapacityRange: &csi.CapacityRange{RequiredBytes: gib}}, codes.InvalidArgument, 0, false},
		{"no range", &csi.ControllerExpandVolumeRequest{VolumeId: "n"}, codes.InvalidArgument, 0, false},
		{"unknown", &csi.ControllerExpandVolumeRequest{VolumeId: "x", CapacityRange: &csi.CapacityRange{RequiredBytes: gib}}, codes.NotFound, 0, false},
		{"NAS grows, no node step", &csi.ControllerExpandVolumeRequest{VolumeId: "n", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}}, codes.OK, 2 * gib, false},
		{"SAN grows, node step", &csi.ControllerExpandVolumeRequest{VolumeId: "s", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}}, codes.OK, 2 * gib, true},
		{"smaller is a no-op", &csi.ControllerExpandVolumeRequest{VolumeId: "s", CapacityRange: &csi.CapacityRange{RequiredBytes: gib}}, codes.OK, 2 * gib, true},
		{"over limitVolumeSize", &csi.ControllerExpandVolumeRequest{VolumeId: "s", CapacityRange: &csi.CapacityRange{RequiredBytes: 5 * gib}}, codes.OutOfRange, 0, false},
		{"incompatible capability", &csi.ControllerExpandVolumeRequest{VolumeId: "s", CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * gib},
			VolumeCapability: blockCap(rwo)}, codes.InvalidArgument, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, err := s.ControllerExpandVolume(ctx, tc.req)
			if code(err) != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			if err == nil && (resp.CapacityBytes != tc.size || resp.NodeExpansionRequired != tc.nodeStep) {
				t.Errorf("got %d/%v, want %d/%v", resp.CapacityBytes, resp.NodeExpansionRequired, tc.size, tc.nodeStep)
			}
		})
	}
}

func TestListVolumesPagination(t *testing.T) {
	s, nas, san := newService(t)
	ctx := context.Background()
	for i := 0; i < 5; i++ {
		nas.vols[fmt.Sprintf("vol-%d", i)] = &backends.Volume{ID: fmt.Sprintf("vol-%d", i)}
	}
	san.vols["vol-5"] = &backends.Volume{ID: "vol-5"}
	var got []string
	tok := ""
	for pages := 0; ; pages++ {
		resp, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: 2, StartingToken: tok})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range resp.Entries {
			got = append(got, e.Volume.VolumeId)
		}
		if resp.NextToken == "" {
			break
		}
		if pages > 5 {
			t.Fatal("pagination does not end")
		}
		tok = resp.NextToken
		// A volume deleted between pages does not break the token.
		if pages == 0 {
			delete(nas.vols, "vol-2")
		}
	}
	if want := []string{"vol-0", "vol-1", "vol-3", "vol-4", "vol-5"}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("listed %v, want %v", got, want)
	}
	for _, bad := range []string{"invalid-token", "djE6", pageToken("x")[1:]} {
		if _, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: bad}); code(err) != codes.Aborted {
			t.Errorf("token %q: %v, want Aborted", bad, err)
		}
	}
	// A negative max_entries is refused before ONTAP's publications are read.
	before := nas.listings
	if _, err := s.ListVolumes(ctx, &csi.ListVolumesRequest{MaxEntries: -1}); code(err) != codes.InvalidArgument {
		t.Errorf("max_entries -1: %v, want InvalidArgument", err)
	}
	if nas.listings != before {
		t.Errorf("max_entries -1 read published nodes %d times", nas.listings-before)
	}
}

func TestGetCapacity(t *testing.T) {
	s, _, _ := newService(t)
	resp, err := s.GetCapacity(context.Background(), &csi.GetCapacityRequest{Parameters: map[string]string{"backendType": "ontap-nas"}})
	if err != nil {
		t.Fatal(err)
	}
	if resp.AvailableCapacity != 5*gib || resp.MinimumVolumeSize.GetValue() != 20<<20 {
		t.Errorf("capacity %+v", resp)
	}
	resp, err = s.GetCapacity(context.Background(), &csi.GetCapacityRequest{Parameters: map[string]string{"backendType": "ontap-nas-economy"}})
	if err != nil || resp.AvailableCapacity != 0 {
		t.Errorf("no matching pool: %v %+v, want 0", err, resp)
	}
	if _, err := s.GetCapacity(context.Background(), &csi.GetCapacityRequest{Parameters: map[string]string{"bogus": "1"}}); code(err) != codes.InvalidArgument {
		t.Errorf("bad parameter: %v", err)
	}
}

// csi-provisioner's --enable-capacity calls GetCapacity once per
// StorageClass and topology segment and publishes a CSIStorageCapacity for
// each; the scheduler then skips nodes whose segment reports too little. So
// the answer must be the pool the class may use that is reachable from that
// segment, and zero where none is. The fake's pool capacity is its name's
// length in GiB: "pa" 2, "pool-b" 6, "pool-any" 8 (no topology: any segment).
func TestGetCapacityPerPoolAndTopology(t *testing.T) {
	zoneA := map[string]string{"topology.kubernetes.io/zone": "a"}
	zoneB := map[string]string{"topology.kubernetes.io/zone": "b"}
	zoneC := map[string]string{"topology.kubernetes.io/zone": "c"}
	zoned := []backends.Pool{
		{Name: "pa", Topologies: []map[string]string{zoneA}},
		{Name: "pool-b", Topologies: []map[string]string{zoneB}},
	}
	for _, tc := range []struct {
		name   string
		pools  []backends.Pool
		params map[string]string
		seg    map[string]string
		want   int64
	}{
		{"no segment: the largest pool", zoned, nil, nil, 6 * gib},
		{"zone a", zoned, nil, zoneA, 2 * gib},
		{"zone b", zoned, nil, zoneB, 6 * gib},
		{"segment with more keys than the pool's", zoned, nil, map[string]string{"topology.kubernetes.io/zone": "a", "region": "r"}, 2 * gib},
		{"zone nobody serves", zoned, nil, zoneC, 0},
		{"storagePools narrows to pa", zoned, map[string]string{"storagePools": "nas1:pa"}, nil, 2 * gib},
		{"storagePools pa, seen from zone b", zoned, map[string]string{"storagePools": "nas1:pa"}, zoneB, 0},
		{"a pool without topology serves every zone", append(slices.Clone(zoned), backends.Pool{Name: "pool-any"}), nil, zoneC, 8 * gib},
		// Nodes without topology labels form one segment with no keys: a
		// zoned pool's volumes would be usable on none of them.
		{"empty segment, zoned pools only", zoned, nil, map[string]string{}, 0},
		{"empty segment, a pool without topology", append(slices.Clone(zoned), backends.Pool{Name: "pool-any"}), nil, map[string]string{}, 8 * gib},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nas := newFake("nas1", "ontap-nas", backends.ProtocolFile, tc.pools...)
			s, err := New(Config{Backends: []backends.Backend{nas}, Nodes: NewNodes()})
			if err != nil {
				t.Fatal(err)
			}
			req := &csi.GetCapacityRequest{Parameters: tc.params}
			if tc.seg != nil {
				req.AccessibleTopology = &csi.Topology{Segments: tc.seg}
			}
			resp, err := s.GetCapacity(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.AvailableCapacity != tc.want {
				t.Errorf("available %d, want %d", resp.AvailableCapacity, tc.want)
			}
		})
	}
}

// maximum_volume_size is the largest required_bytes a create with the
// class's parameters can ask for. A create tries every pool, so it is the
// largest over the pools that may take the volume, counting a pool with no
// bound of its own (a thin pool without limitVolumeSize) at its free space,
// what the scheduler would compare with; unset when no pool is bounded. The
// class's parameters reach the backend (thick or thin decides the bound).
// Pool capacities as in TestGetCapacityPerPoolAndTopology: "pa" 2 GiB,
// "pool-b" 6 GiB.
func TestGetCapacityMaximumVolumeSize(t *testing.T) {
	both := []string{"thin", "thick"}
	pools := []backends.Pool{{Name: "pa", ProvisioningTypes: both}, {Name: "pool-b", ProvisioningTypes: both}}
	for _, tc := range []struct {
		name    string
		capMax  map[string]int64
		params  map[string]string
		want    int64 // -1: unset
		reserve string
	}{
		{"no pool bounded", nil, nil, -1, ""},
		{"the larger pool's thick bound", map[string]int64{"pa": gib, "pool-b": 5 * gib}, nil, 5 * gib, ""},
		{"the smaller pool's thin bound above the larger's", map[string]int64{"pa": 50 * gib, "pool-b": 5 * gib}, nil, 50 * gib, ""},
		{"an unbounded pool counts its free space", map[string]int64{"pa": gib}, nil, 6 * gib, ""},
		{"nothing fits anywhere", map[string]int64{"pa": 0, "pool-b": 0}, nil, 0, ""},
		{"provisioningType reaches the backend", map[string]int64{"pa": gib}, map[string]string{"provisioningType": "thick"}, 6 * gib, "volume"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nas := newFake("nas1", "ontap-nas", backends.ProtocolFile, pools...)
			nas.capMax = tc.capMax
			s, err := New(Config{Backends: []backends.Backend{nas}, Nodes: NewNodes()})
			if err != nil {
				t.Fatal(err)
			}
			resp, err := s.GetCapacity(context.Background(), &csi.GetCapacityRequest{Parameters: tc.params})
			if err != nil {
				t.Fatal(err)
			}
			if resp.AvailableCapacity != 6*gib {
				t.Errorf("available %d, want the larger pool's %d", resp.AvailableCapacity, 6*gib)
			}
			switch got := resp.MaximumVolumeSize; {
			case tc.want < 0 && got != nil:
				t.Errorf("maximum_volume_size %d, want unset", got.GetValue())
			case tc.want >= 0 && (got == nil || got.GetValue() != tc.want):
				t.Errorf("maximum_volume_size %v, want %d", got, tc.want)
			}
			if nas.capOpts.SpaceReserve != tc.reserve {
				t.Errorf("backend asked with spaceReserve %q, want %q", nas.capOpts.SpaceReserve, tc.reserve)
			}
		})
	}
}

func TestToStatus(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want codes.Code
	}{
		{backends.Errorf(backends.ErrNotFound, "x"), codes.NotFound},
		{backends.Errorf(backends.ErrAlreadyExists, "x"), codes.AlreadyExists},
		{backends.Errorf(backends.ErrInUse, "x"), codes.FailedPrecondition},
		{backends.Errorf(backends.ErrInvalid, "x"), codes.InvalidArgument},
		{backends.Errorf(backends.ErrOutOfRange, "x"), codes.OutOfRange},
		{backends.Errorf(backends.ErrExhausted, "x"), codes.ResourceExhausted},
		{backends.Errorf(backends.ErrUnavailable, "x"), codes.Unavailable},
		{backends.Errorf(backends.ErrPending, "x"), codes.Aborted},
		{fmt.Errorf("wrapped: %w", backends.Errorf(backends.ErrNotFound, "x")), codes.NotFound},
		{backends.Errorf(backends.ErrUnavailable, "outer: %w", backends.Errorf(backends.ErrNotFound, "inner")), codes.Unavailable},
		{fmt.Errorf("op: %w", context.DeadlineExceeded), codes.DeadlineExceeded},
		{fmt.Errorf("op: %w", context.Canceled), codes.Canceled},
		{fmt.Errorf("node: %w", ErrNodeNotFound), codes.NotFound},
		{pending("volume v"), codes.Aborted},
		{fmt.Errorf("wrapped: %w", invalidArg("x")), codes.InvalidArgument},
		{unconfigured("x"), codes.Unavailable},
		{errors.New("boom"), codes.Internal},
	} {
		if got := code(toStatus(tc.err)); got != tc.want {
			t.Errorf("%v: %v, want %v", tc.err, got, tc.want)
		}
	}
	if toStatus(nil) != nil {
		t.Error("nil error mapped to non-nil")
	}
}

// The advertised set, written out: a capability added or dropped by
// accident (say PUBLISH_READONLY, which ControllerPublishVolume refuses)
// fails here.
func TestControllerGetCapabilities(t *testing.T) {
	s, _, _ := newService(t)
	resp, err := s.ControllerGetCapabilities(context.Background(), &csi.ControllerGetCapabilitiesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range resp.Capabilities {
		got = append(got, c.GetRpc().GetType().String())
	}
	want := []string{
		"CREATE_DELETE_VOLUME", "PUBLISH_UNPUBLISH_VOLUME", "LIST_VOLUMES", "LIST_VOLUMES_PUBLISHED_NODES", "GET_CAPACITY",
		"CREATE_DELETE_SNAPSHOT", "LIST_SNAPSHOTS", "GET_SNAPSHOT", "CLONE_VOLUME", "EXPAND_VOLUME", "MODIFY_VOLUME",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("advertised %v, want %v", got, want)
	}
}

// TestBackendNamedOnce: a backend's failure that names the backend (as
// its connection failures do) reaches the CO with the name once.
func TestBackendNamedOnce(t *testing.T) {
	s, nas, _ := newService(t)
	nas.failWith = backends.Named("nas1", backends.Errorf(backends.ErrUnavailable, "cannot reach SVM svm0"))
	_, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: "v", VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")}})
	if code(err) != codes.Unavailable || strings.Count(err.Error(), "nas1") != 1 {
		t.Fatalf("err = %v: want Unavailable naming nas1 once", err)
	}
}
