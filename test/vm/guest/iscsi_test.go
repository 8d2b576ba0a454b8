package guest

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestISCSIVolumeLife runs an ontap-san volume through its life on the
// real initiator, udev and dm-multipath against LIO: CreateVolume,
// ControllerPublishVolume (igroup and map: an ACL LUN on both portals at
// once), NodeStage (login through both portals, one multipath map, mkfs,
// mount), NodePublish read-write and read-only, a write,
// ControllerExpandVolume (the backstore grows) and NodeExpandVolume (the
// file system grows), NodeGetVolumeStats, NodeUnpublish, NodeUnstage
// (unmount, flush, log out), ControllerUnpublish, DeleteVolume. No
// session, map, SCSI disk or mount may be left.
func TestISCSIVolumeLife(t *testing.T) {
	roots := plugintest.NewRoots(t)
	s := startSim(t, roots.Root)
	p := startPlugin(t, roots, s.writeBackend(t, roots.Root, "ontap-san", nil))
	ctx := ctxT(t)
	const size = 128 << 20
	capability := mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	t.Cleanup(func() { logoutAll(t, roots) })

	created, err := p.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-san-1", CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{capability}, Parameters: map[string]string{"backendType": "ontap-san"},
	})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	vol := created.GetVolume()
	pub, err := p.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: vol.GetVolumeId(), NodeId: nodeID, VolumeCapability: capability, VolumeContext: vol.GetVolumeContext(),
	})
	if err != nil {
		t.Fatalf("ControllerPublishVolume: %v", err)
	}
	pc := pub.GetPublishContext()
	if pc["iscsiTargetPortalCount"] != "2" {
		t.Fatalf("publish context %v: want two portals", pc)
	}

	staging := p.staging(t, vol.GetVolumeId())
	if _, err := p.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: vol.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc,
	}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	if sessions := run(t, "iscsiadm", "-m", "session"); strings.Count(sessions, pc["iscsiTargetIqn"]) != 2 {
		t.Fatalf("sessions:\n%s", sessions)
	}
	dm := multipathMap(t)
	if slaves, _ := os.ReadDir(filepath.Join("/sys/block", dm, "slaves")); len(slaves) != 2 {
		t.Fatalf("multipath map %s has paths %v, want two", dm, slaves)
	}

	target, roTarget := p.target(t, "pod-a", vol.GetVolumeId()), p.target(t, "pod-b", vol.GetVolumeId())
	for _, tc := range []struct {
		path string
		ro   bool
	}{{target, false}, {roTarget, true}} {
		if _, err := p.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
			VolumeId: vol.GetVolumeId(), StagingTargetPath: staging, TargetPath: tc.path, VolumeCapability: capability,
			PublishContext: pc, Readonly: tc.ro,
		}); err != nil {
			t.Fatalf("NodePublishVolume %s (read-only %v): %v", tc.path, tc.ro, err)
		}
	}
	data := bytes.Repeat([]byte("ontap-csi "), 10000)
	if err := os.WriteFile(filepath.Join(target, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(roTarget, "data")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back through the read-only publish: %d bytes, %v", len(got), err)
	}
	if err := os.WriteFile(filepath.Join(roTarget, "x"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("write through the read-only publish: %v, want EROFS", err)
	}

	before := statfsBytes(t, target)
	if exp, err := p.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: vol.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * size}, VolumeCapability: capability,
	}); err != nil || !exp.GetNodeExpansionRequired() {
		t.Fatalf("ControllerExpandVolume: %v, %v", exp, err)
	}
	if _, err := p.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{
		VolumeId: vol.GetVolumeId(), VolumePath: target, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * size}, VolumeCapability: capability,
	}); err != nil {
		t.Fatalf("NodeExpandVolume: %v", err)
	}
	if after := statfsBytes(t, target); after < before+size*3/4 {
		t.Fatalf("file system %d -> %d bytes after expansion to %d", before, after, 2*size)
	}
	stats, err := p.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol.GetVolumeId(), VolumePath: target})
	if err != nil || len(stats.GetUsage()) == 0 || stats.GetVolumeCondition().GetAbnormal() {
		t.Fatalf("NodeGetVolumeStats: %v, %v", stats, err)
	}

	for _, tp := range []string{target, roTarget} {
		if _, err := p.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), TargetPath: tp}); err != nil {
			t.Fatalf("NodeUnpublishVolume %s: %v", tp, err)
		}
	}
	if _, err := p.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.GetVolumeId(), StagingTargetPath: staging}); err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}
	if out, err := exec.Command("iscsiadm", "-m", "session").CombinedOutput(); err == nil {
		t.Fatalf("sessions left after NodeUnstageVolume:\n%s", out)
	}
	if maps, _ := filepath.Glob("/sys/block/dm-*"); len(maps) > 0 {
		t.Fatalf("multipath maps left after NodeUnstageVolume: %v", maps)
	}
	if disks, _ := filepath.Glob("/sys/block/sd*"); len(disks) > 0 {
		t.Fatalf("SCSI disks left after NodeUnstageVolume: %v", disks)
	}
	if _, err := p.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), NodeId: nodeID}); err != nil {
		t.Fatalf("ControllerUnpublishVolume: %v", err)
	}
	if _, err := p.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId()}); err != nil {
		t.Fatalf("DeleteVolume: %v", err)
	}
	if bs, _ := filepath.Glob("/sys/kernel/config/target/core/fileio_*/*/enable"); len(bs) > 0 {
		t.Fatalf("LIO backstores left after DeleteVolume: %v", bs)
	}
}

// multipathMap is the one dm device there is.
func multipathMap(t testing.TB) string {
	t.Helper()
	maps, _ := filepath.Glob("/sys/block/dm-*")
	if len(maps) != 1 {
		t.Fatalf("dm devices %v, want one multipath map", maps)
	}
	return filepath.Base(maps[0])
}

func statfsBytes(t testing.TB, p string) int64 {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(p, &st); err != nil {
		t.Fatal(err)
	}
	return int64(st.Blocks) * st.Bsize
}

// logoutAll leaves no session behind a failed test: the simulator's
// targets go when it stops, and a session to a vanished target would
// retry until the VM powers off.
func logoutAll(t testing.TB, roots plugintest.Roots) {
	plugintest.UnmountBelow(t, roots.KubeletDir)
	_ = exec.Command("multipath", "-F").Run()
	_ = exec.Command("iscsiadm", "-m", "node", "--logoutall=all").Run()
}
