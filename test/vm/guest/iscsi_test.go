package guest

import (
	"bytes"
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
	t.Cleanup(func() { logoutAll(t, roots) })
	const size = 128 << 20
	l := p.createAndPublish(t, "pvc-san-1", "ontap-san", size, mountCap("ext4", csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER))
	if l.pc["iscsiTargetPortalCount"] != "2" {
		t.Fatalf("publish context %v: want two portals", l.pc)
	}

	l.stageAndPublish()
	if sessions := run(t, "iscsiadm", "-m", "session"); strings.Count(sessions, l.pc["iscsiTargetIqn"]) != 2 {
		t.Fatalf("sessions:\n%s", sessions)
	}
	dm := multipathMap(t)
	if slaves, _ := os.ReadDir(filepath.Join("/sys/block", dm, "slaves")); len(slaves) != 2 {
		t.Fatalf("multipath map %s has paths %v, want two", dm, slaves)
	}
	l.writeAndReadBack("data", bytes.Repeat([]byte("ontap-csi "), 10000))

	before := statfsBytes(t, l.target)
	l.expand(2 * size)
	if after := statfsBytes(t, l.target); after < before+size*3/4 {
		t.Fatalf("file system %d -> %d bytes after expansion to %d", before, after, 2*size)
	}

	l.unpublishAndUnstage()
	if out, err := exec.Command("iscsiadm", "-m", "session").CombinedOutput(); err == nil {
		t.Fatalf("sessions left after NodeUnstageVolume:\n%s", out)
	}
	if maps, _ := filepath.Glob("/sys/block/dm-*"); len(maps) > 0 {
		t.Fatalf("multipath maps left after NodeUnstageVolume: %v", maps)
	}
	if disks, _ := filepath.Glob("/sys/block/sd*"); len(disks) > 0 {
		t.Fatalf("SCSI disks left after NodeUnstageVolume: %v", disks)
	}
	l.controllerUnpublish()
	l.delete()
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
