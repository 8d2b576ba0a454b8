package controller

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"
)

// state lists what a fake backend holds, for "nothing changed" checks.
func (f *fakeBackend) state() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for id, v := range f.vols {
		out = append(out, fmt.Sprintf("volume %s %d", id, v.SizeBytes))
	}
	for id := range f.snaps {
		out = append(out, "snapshot "+id)
	}
	for id, nodes := range f.published {
		out = append(out, fmt.Sprintf("published %s %v", id, nodes))
	}
	out = append(out, fmt.Sprintf("creates %d", len(f.creates)))
	slices.Sort(out)
	return out
}

// The controller's cells of docs/errors.md: each bad input is InvalidArgument
// with a message naming the field, and neither backend changes.
func TestBadInputIsRefusedBeforeAnythingChanges(t *testing.T) {
	s, nas, san := newService(t)
	ctx := context.Background()
	caps := []*csi.VolumeCapability{mountCap(rwo, "")}
	if _, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v1", VolumeCapabilities: caps, Parameters: map[string]string{"backendType": "ontap-nas"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s1", SourceVolumeId: "v1"}); err != nil {
		t.Fatal(err)
	}
	long, huge := strings.Repeat("n", 129), strings.Repeat("n", 2000)
	withMode := func(m csi.VolumeCapability_AccessMode_Mode) []*csi.VolumeCapability {
		return []*csi.VolumeCapability{mountCap(m, "")}
	}
	bigMap := map[string]string{"backendType": strings.Repeat("x", 5000)}
	tests := []struct {
		name, field string // field: what the message must name
		call        func() error
	}{
		{"CreateVolume name of 129 bytes", "name", func() error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: long, VolumeCapabilities: caps})
			return err
		}},
		{"CreateVolume name of 2000 bytes", "name", func() error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: huge, VolumeCapabilities: caps})
			return err
		}},
		{"CreateVolume parameters over 4 KiB", "parameters", func() error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v2", VolumeCapabilities: caps, Parameters: bigMap})
			return err
		}},
		{"CreateVolume snapshot source id over 257 bytes", "snapshot_id", func() error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v2", VolumeCapabilities: caps, VolumeContentSource: &csi.VolumeContentSource{
				Type: &csi.VolumeContentSource_Snapshot{Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: huge}}}})
			return err
		}},
		{"CreateVolume access mode UNKNOWN", "access_mode", func() error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v2", VolumeCapabilities: withMode(csi.VolumeCapability_AccessMode_UNKNOWN)})
			return err
		}},
		{"CreateVolume access mode 99", "access_mode", func() error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v2", VolumeCapabilities: withMode(99)})
			return err
		}},
		{"CreateVolume access mode 8", "access_mode", func() error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v2", VolumeCapabilities: withMode(8)})
			return err
		}},
		{"CreateVolume one good and one mode 99", "volume capability 1", func() error {
			_, err := s.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "v2", VolumeCapabilities: append(withMode(rwo), mountCap(99, ""))})
			return err
		}},
		{"DeleteVolume id of 2000 bytes", "volume_id", func() error {
			_, err := s.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: huge})
			return err
		}},
		{"ControllerPublishVolume readonly", "PUBLISH_READONLY", func() error {
			_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v1", NodeId: "node-1", VolumeCapability: caps[0], Readonly: true})
			return err
		}},
		{"ControllerPublishVolume mode 99", "access_mode", func() error {
			_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v1", NodeId: "node-1", VolumeCapability: mountCap(99, "")})
			return err
		}},
		{"ControllerPublishVolume node id over 256 bytes", "node_id", func() error {
			_, err := s.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: "v1", NodeId: huge, VolumeCapability: caps[0]})
			return err
		}},
		{"ControllerUnpublishVolume volume id of 129 bytes", "volume_id", func() error {
			_, err := s.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: long, NodeId: "node-1"})
			return err
		}},
		{"ValidateVolumeCapabilities mode UNKNOWN", "access_mode", func() error {
			_, err := s.ValidateVolumeCapabilities(ctx, &csi.ValidateVolumeCapabilitiesRequest{VolumeId: "v1", VolumeCapabilities: withMode(0)})
			return err
		}},
		{"ControllerExpandVolume volume id of 129 bytes", "volume_id", func() error {
			_, err := s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: long, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
			return err
		}},
		{"ControllerExpandVolume mode 99", "access_mode", func() error {
			_, err := s.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{VolumeId: "v1", CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}, VolumeCapability: mountCap(99, "")})
			return err
		}},
		{"CreateSnapshot name of 129 bytes", "name", func() error {
			_, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: long, SourceVolumeId: "v1"})
			return err
		}},
		{"CreateSnapshot source volume id of 2000 bytes", "source_volume_id", func() error {
			_, err := s.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{Name: "s2", SourceVolumeId: huge})
			return err
		}},
		{"DeleteSnapshot id of 2000 bytes", "snapshot_id", func() error {
			_, err := s.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: huge})
			return err
		}},
		{"ListSnapshots source volume id of 129 bytes", "source_volume_id", func() error {
			_, err := s.ListSnapshots(ctx, &csi.ListSnapshotsRequest{SourceVolumeId: long})
			return err
		}},
	}
	before := append(nas.state(), san.state()...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.call()
			if code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), tc.field) {
				t.Fatalf("got %v (%v), want InvalidArgument naming %s", code(err), err, tc.field)
			}
			if after := append(nas.state(), san.state()...); !slices.Equal(before, after) {
				t.Fatalf("the refusal changed the backends: %v, was %v", after, before)
			}
		})
	}
}

// Names and IDs at the CSI limit are accepted.
func TestNamesAtTheLimitAreAccepted(t *testing.T) {
	s, _, _ := newService(t)
	name := strings.Repeat("n", maxStringBytes)
	if _, err := s.CreateVolume(context.Background(), &csi.CreateVolumeRequest{Name: name, VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "")}}); err != nil {
		t.Fatal(err)
	}
	snap, err := s.CreateSnapshot(context.Background(), &csi.CreateSnapshotRequest{Name: name, SourceVolumeId: name})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.DeleteSnapshot(context.Background(), &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId()}); err != nil {
		t.Fatalf("the snapshot ID the controller handed out (%d bytes) was refused: %v", len(snap.GetSnapshot().GetSnapshotId()), err)
	}
}

// FuzzParseCapabilities: any capability list a CO can encode is either
// InvalidArgument or one access type throughout, access modes of the enum,
// and at most one file system type.
func FuzzParseCapabilities(f *testing.F) {
	for _, req := range []*csi.CreateVolumeRequest{
		{VolumeCapabilities: []*csi.VolumeCapability{mountCap(rwo, "ext4"), mountCap(rox, "")}},
		{VolumeCapabilities: []*csi.VolumeCapability{blockCap(rwx), mountCap(99, "")}},
		{VolumeCapabilities: []*csi.VolumeCapability{{AccessMode: &csi.VolumeCapability_AccessMode{Mode: rwo}}}},
	} {
		b, err := proto.Marshal(req)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var req csi.CreateVolumeRequest
		if proto.Unmarshal(data, &req) != nil {
			return
		}
		use, err := parseCapabilities(req.GetVolumeCapabilities())
		if err != nil {
			if c := codeOf(err); c != codes.InvalidArgument {
				t.Fatalf("code %v: %v", c, err)
			}
			return
		}
		fsTypes := map[string]bool{}
		for i, c := range req.GetVolumeCapabilities() {
			if checkAccessMode("mode", c.GetAccessMode().GetMode()) != nil {
				t.Fatalf("capability %d: mode %v accepted", i, c.GetAccessMode().GetMode())
			}
			if (c.GetBlock() != nil) != (use.access == "block") || c.GetBlock() == nil && c.GetMount() == nil {
				t.Fatalf("capability %d does not have access type %s", i, use.access)
			}
			if fs := strings.ToLower(c.GetMount().GetFsType()); fs != "" {
				fsTypes[fs] = true
			}
		}
		if len(fsTypes) > 1 || len(fsTypes) == 1 && !fsTypes[use.fsType] {
			t.Fatalf("file system types %v accepted as %q", fsTypes, use.fsType)
		}
	})
}
