package sanity

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
)

// TestVolumeGroupSnapshot drives the GroupController through gRPC for
// ontap-nas and ontap-san: two volumes snapshot at one instant through an
// ONTAP consistency group that does not outlive the call, the same call
// again returns the same group, a member restores into a new volume with
// the data of that instant, and deleting the group leaves ONTAP clean.
func TestVolumeGroupSnapshot(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) { testVolumeGroupSnapshot(t, driver) })
	}
}

func testVolumeGroupSnapshot(t *testing.T, driver string) {
	p := Start(t, Options{Driver: driver})
	capability := mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	var ids, internal []string
	for _, n := range []string{"pvc-db", "pvc-log"} {
		v, err := p.Controller.CreateVolume(Ctx(t), &csi.CreateVolumeRequest{Name: n, VolumeCapabilities: []*csi.VolumeCapability{capability},
			CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30}})
		if err != nil {
			t.Fatal(err)
		}
		ids, internal = append(ids, v.Volume.VolumeId), append(internal, v.Volume.VolumeContext["internalName"])
	}
	dataFile := func(name string) string {
		v, _ := p.Sim.Volume(name)
		return filepath.Join(v.Directory, "marker")
	}
	if driver == config.DriverONTAPNAS {
		if err := os.WriteFile(dataFile(internal[1]), []byte("before"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	req := &csi.CreateVolumeGroupSnapshotRequest{Name: "groupsnapshot-1", SourceVolumeIds: ids}
	var g *csi.VolumeGroupSnapshot
	for i := range 3 {
		resp, err := p.Group.CreateVolumeGroupSnapshot(Ctx(t), req)
		if err != nil {
			t.Fatalf("create #%d: %v", i+1, err)
		}
		if g != nil && !sameGroup(g, resp.GroupSnapshot) {
			t.Fatalf("create #%d answered %v, then %v", i+1, g, resp.GroupSnapshot)
		}
		g = resp.GroupSnapshot
	}
	if len(g.Snapshots) != 2 || !g.ReadyToUse {
		t.Fatalf("group snapshot %v", g)
	}
	a, b := p.Sim.Snapshots(internal[0]), p.Sim.Snapshots(internal[1])
	if len(a) != 1 || len(b) != 1 || !a[0].CreateTime.Equal(b[0].CreateTime) {
		t.Fatalf("ONTAP snapshots %+v and %+v, want one each at one instant", a, b)
	}
	if _, body, _ := p.Sim.Do("GET", "/api/application/consistency-groups", nil); body["num_records"] != float64(0) {
		t.Errorf("consistency groups left after the call: %v", body)
	}
	if driver == config.DriverONTAPNAS {
		if err := os.WriteFile(dataFile(internal[1]), []byte("after"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	restoreMember(t, p, g.Snapshots[1].SnapshotId, capability, func(internal string) {
		if driver == config.DriverONTAPNAS {
			if data, err := os.ReadFile(dataFile(internal)); err != nil || string(data) != "before" {
				t.Errorf("restored volume holds %q (%v), want the snapshot's %q", data, err, "before")
			}
		}
	})
	sids := []string{g.Snapshots[0].SnapshotId, g.Snapshots[1].SnapshotId}
	if _, err := p.Group.GetVolumeGroupSnapshot(Ctx(t), &csi.GetVolumeGroupSnapshotRequest{GroupSnapshotId: g.GroupSnapshotId, SnapshotIds: sids}); err != nil {
		t.Fatalf("get: %v", err)
	}
	for range 2 {
		if _, err := p.Group.DeleteVolumeGroupSnapshot(Ctx(t), &csi.DeleteVolumeGroupSnapshotRequest{GroupSnapshotId: g.GroupSnapshotId, SnapshotIds: sids}); err != nil {
			t.Fatalf("delete group: %v", err)
		}
	}
	for _, n := range internal {
		if snaps := p.Sim.Snapshots(n); len(snaps) != 0 {
			t.Errorf("snapshots of %s left after the group's delete: %+v", n, snaps)
		}
	}
	for _, id := range ids {
		if _, err := p.Controller.DeleteVolume(Ctx(t), &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
	}
	p.AssertClean(t)
}

// restoreMember restores a member snapshot into a new volume, checks it,
// and deletes it again.
func restoreMember(t *testing.T, p *Plugin, snapshotID string, capability *csi.VolumeCapability, check func(internal string)) {
	t.Helper()
	r, err := p.Controller.CreateVolume(Ctx(t), &csi.CreateVolumeRequest{Name: "pvc-restored", VolumeCapabilities: []*csi.VolumeCapability{capability},
		CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snapshotID}}}})
	if err != nil {
		t.Fatalf("restore from member %s: %v", snapshotID, err)
	}
	check(r.Volume.VolumeContext["internalName"])
	if _, err := p.Controller.DeleteVolume(Ctx(t), &csi.DeleteVolumeRequest{VolumeId: r.Volume.VolumeId}); err != nil {
		t.Fatalf("delete the restored volume: %v", err)
	}
}

func sameGroup(a, b *csi.VolumeGroupSnapshot) bool {
	if a.GroupSnapshotId != b.GroupSnapshotId || len(a.Snapshots) != len(b.Snapshots) || !a.CreationTime.AsTime().Equal(b.CreationTime.AsTime()) {
		return false
	}
	for i := range a.Snapshots {
		if a.Snapshots[i].SnapshotId != b.Snapshots[i].SnapshotId {
			return false
		}
	}
	return true
}
