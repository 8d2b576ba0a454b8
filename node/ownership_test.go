package node

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"

	"github.com/ontap-csi/ontap-csi/node/tracking"
)

// nodeState is what a refused call must leave as it was: the mount table
// and the tracking files.
func (ts *testService) nodeState(t *testing.T) []string {
	t.Helper()
	var out []string
	for _, m := range ts.host.mounts {
		out = append(out, "mount "+m.source+" "+m.target+" "+m.fsType)
	}
	entries, _ := os.ReadDir(ts.state.Dir())
	for _, e := range entries {
		data, _ := os.ReadFile(filepath.Join(ts.state.Dir(), e.Name()))
		out = append(out, e.Name()+" "+string(data))
	}
	return out
}

func (ts *testService) stageNFS(t *testing.T, vol string, pc map[string]string) string {
	t.Helper()
	staging := ts.staging(t, vol)
	if _, err := ts.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: vol, StagingTargetPath: staging, VolumeCapability: mountCapability("", snw), PublishContext: pc,
	}); err != nil {
		t.Fatalf("stage %s: %v", vol, err)
	}
	return staging
}

func (ts *testService) mount(t *testing.T, args ...string) {
	t.Helper()
	if _, err := ts.host.Run(context.Background(), "mount", args...); err != nil {
		t.Fatal(err)
	}
}

func (ts *testService) umount(t *testing.T, path string) {
	t.Helper()
	if _, err := ts.host.Run(context.Background(), "umount", path); err != nil {
		t.Fatal(err)
	}
}

func (ts *testService) recordTarget(t *testing.T, vol, target string) {
	t.Helper()
	info, err := ts.state.Read(vol)
	if err != nil {
		t.Fatal(err)
	}
	info.AddPublished(target)
	if err := ts.state.Write(vol, info); err != nil {
		t.Fatal(err)
	}
}

// The cells of docs/errors.md for unpublish of a target the record and the
// mount table disagree about, with a real-looking NFS mount (its source is
// the export) and iSCSI mounts (their source is the device).
func TestUnpublishRemovesOnlyThisVolumesMount(t *testing.T) {
	const exportA, exportB = "10.193.108.20:/trident_pvc_1", "10.193.108.20:/trident_pvc_2"
	tests := []struct {
		name string
		// setup stages pvc-1 and leaves something at target.
		setup   func(t *testing.T, ts *testService, target string)
		code    codes.Code
		removed bool // the mount at target is gone afterwards
	}{
		{"recorded, the volume's export (Trident 23.01: no mount recorded)", func(t *testing.T, ts *testService, target string) {
			ts.stageNFS(t, "pvc-1", nfsContext)
			ts.recordTarget(t, "pvc-1", target)
			ts.mount(t, "-t", "nfs", exportA, target)
		}, codes.OK, true},
		{"recorded, another export mounted", func(t *testing.T, ts *testService, target string) {
			ts.stageNFS(t, "pvc-1", nfsContext)
			ts.recordTarget(t, "pvc-1", target)
			ts.mount(t, "-t", "nfs", exportB, target)
		}, codes.FailedPrecondition, false},
		{"published here, then replaced by another mount", func(t *testing.T, ts *testService, target string) {
			staging := ts.stageNFS(t, "pvc-1", nfsContext)
			if err := ts.publish("pvc-1", staging, target, snw, false); err != nil {
				t.Fatal(err)
			}
			ts.umount(t, target)
			ts.mount(t, "-t", "ext4", "/dev/sdz", target)
		}, codes.FailedPrecondition, false},
		{"not recorded, the volume's export (a mount Trident made)", func(t *testing.T, ts *testService, target string) {
			ts.stageNFS(t, "pvc-1", nfsContext)
			ts.mount(t, "-t", "nfs", exportA, target)
		}, codes.OK, true},
		{"not recorded, another export mounted", func(t *testing.T, ts *testService, target string) {
			ts.stageNFS(t, "pvc-1", nfsContext)
			ts.mount(t, "-t", "nfs", exportB, target)
		}, codes.FailedPrecondition, false},
		{"not recorded, another volume records it", func(t *testing.T, ts *testService, target string) {
			ts.stageNFS(t, "pvc-1", nfsContext)
			staging := ts.stageNFS(t, "pvc-2", with(nfsContext, "nfsPath", "/trident_pvc_2"))
			if err := ts.publish("pvc-2", staging, target, snw, false); err != nil {
				t.Fatal(err)
			}
		}, codes.FailedPrecondition, false},
		{"both volumes record it", func(t *testing.T, ts *testService, target string) {
			ts.stageNFS(t, "pvc-1", nfsContext)
			staging := ts.stageNFS(t, "pvc-2", with(nfsContext, "nfsPath", "/trident_pvc_2"))
			if err := ts.publish("pvc-2", staging, target, snw, false); err != nil {
				t.Fatal(err)
			}
			ts.recordTarget(t, "pvc-1", target)
		}, codes.FailedPrecondition, false},
		{"not staged, nothing of it mounted", func(t *testing.T, ts *testService, target string) {
			ts.mount(t, "-t", "nfs", exportB, target)
		}, codes.FailedPrecondition, false},
		{"iSCSI, recorded, another device mounted", func(t *testing.T, ts *testService, target string) {
			ts.stageISCSI(t, "pvc-1", "ext4")
			ts.recordTarget(t, "pvc-1", target)
			ts.mount(t, "-t", "ext4", "/dev/sdz", target)
		}, codes.FailedPrecondition, false},
		{"iSCSI, recorded, the LUN gone, its recorded device mounted", func(t *testing.T, ts *testService, target string) {
			ts.stageISCSI(t, "pvc-1", "ext4")
			ts.recordTarget(t, "pvc-1", target)
			info, _ := ts.state.Read("pvc-1")
			ts.mount(t, "-t", "ext4", info.Device(), target)
			delete(ts.ini.devices, "serial-pvc-1")
		}, codes.OK, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ts := newTestService(t)
			target := filepath.Join(ts.kubelet, "elsewhere", "target")
			if err := os.MkdirAll(target, 0o750); err != nil {
				t.Fatal(err)
			}
			tc.setup(t, ts, target)
			before := ts.nodeState(t)
			_, err := ts.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target})
			wantCode(t, err, tc.code)
			if gone := ts.host.mountedAt(target) == nil; gone != tc.removed {
				t.Fatalf("mount at the target gone: %v, want %v", gone, tc.removed)
			}
			if tc.code != codes.OK && !slices.Equal(before, ts.nodeState(t)) {
				t.Fatalf("refused unpublish changed the node:\n%v\n%v", before, ts.nodeState(t))
			}
		})
	}
}

// Unpublish of a target that holds nothing of the volume succeeds and
// leaves it alone (kubelet may call it again after a success).
func TestUnpublishOfAnUnknownTargetChangesNothing(t *testing.T) {
	ts := newTestService(t)
	target := filepath.Join(ts.kubelet, "elsewhere", "target")
	if err := os.MkdirAll(target, 0o750); err != nil {
		t.Fatal(err)
	}
	if _, err := ts.NodeUnpublishVolume(context.Background(), &csi.NodeUnpublishVolumeRequest{VolumeId: "pvc-1", TargetPath: target}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(target); err != nil {
		t.Fatalf("unpublish removed a directory it did not make: %v", err)
	}
}

func TestUnstageRemovesOnlyThisVolumesMount(t *testing.T) {
	t.Run("staging path holds another device", func(t *testing.T) {
		ts := newTestService(t)
		staging := ts.stageISCSI(t, "pvc-1", "ext4")
		ts.umount(t, staging)
		ts.mount(t, "-t", "ext4", "/dev/sdz", staging)
		before := ts.nodeState(t)
		_, err := ts.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging})
		wantCode(t, err, codes.FailedPrecondition)
		if !slices.Equal(before, ts.nodeState(t)) || ts.ini.detach != 0 {
			t.Fatal("refused unstage changed the node")
		}
	})
	t.Run("unreadable state, not kubelet's path for it", func(t *testing.T) {
		ts := newTestService(t)
		staging := filepath.Join(ts.kubelet, "elsewhere", "globalmount")
		if err := os.MkdirAll(staging, 0o750); err != nil {
			t.Fatal(err)
		}
		path, _ := ts.state.Path("pvc-1")
		if err := os.WriteFile(path, []byte("{truncated"), 0o600); err != nil {
			t.Fatal(err)
		}
		ts.mount(t, "-t", "ext4", "/dev/sdz", staging)
		_, err := ts.NodeUnstageVolume(context.Background(), &csi.NodeUnstageVolumeRequest{VolumeId: "pvc-1", StagingTargetPath: staging})
		wantCode(t, err, codes.OK)
		if ts.host.mountedAt(staging) == nil {
			t.Fatal("unstage without a record removed a mount at a path that does not name the volume")
		}
	})
}

// Stage compares the device mounted at the staging path, not its file
// system type.
func TestStageRefusesAStagingPathHoldingAnotherDevice(t *testing.T) {
	ts := newTestService(t)
	staging := ts.staging(t, "pvc-1")
	ts.mount(t, "-t", "ext4", "/dev/sdz", staging)
	before := ts.nodeState(t)
	_, err := ts.NodeStageVolume(context.Background(), &csi.NodeStageVolumeRequest{
		VolumeId: "pvc-1", StagingTargetPath: staging, VolumeCapability: mountCapability("ext4", snw),
		PublishContext: with(iscsiContext, "iscsiLunSerial", "serial-pvc-1"),
	})
	wantCode(t, err, codes.FailedPrecondition)
	if !slices.Equal(before, ts.nodeState(t)) || ts.ini.attach != 0 {
		t.Fatal("refused stage changed the node")
	}
}

// A reader-only access mode publishes read-only whatever readonly says.
func TestReaderOnlyModesPublishReadOnly(t *testing.T) {
	for _, mode := range []csi.VolumeCapability_AccessMode_Mode{
		csi.VolumeCapability_AccessMode_SINGLE_NODE_READER_ONLY, csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY,
	} {
		ts := newTestService(t)
		staging := ts.stageNFS(t, "pvc-1", nfsContext)
		target := ts.target(t, "pod-a", "pvc-1")
		if err := ts.publish("pvc-1", staging, target, mode, false); err != nil {
			t.Fatal(err)
		}
		if m := ts.host.mountedAt(target); m == nil || !m.ro {
			t.Fatalf("%v: target %+v is writable", mode, m)
		}
	}
}

func TestOthersReadsEveryOtherVolumesState(t *testing.T) {
	ts := newTestService(t)
	ts.stageNFS(t, "pvc-1", nfsContext)
	ts.stageNFS(t, "pvc-2", with(nfsContext, "nfsPath", "/trident_pvc_2"))
	if err := os.WriteFile(filepath.Join(ts.state.Dir(), "pvc-3.json"), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	others, err := ts.state.Others("pvc-1")
	if err != nil || len(others) != 1 || others["pvc-2"] == nil || others["pvc-2"].Protocol() != tracking.ProtocolFile {
		t.Fatalf("Others = %v, %v", others, err)
	}
	// The read is shared among calls (sharedread): one volume's exclusion
	// is not another's, and a record written before a call is in it.
	ts.stageNFS(t, "pvc-4", with(nfsContext, "nfsPath", "/trident_pvc_4"))
	others, err = ts.state.Others("pvc-2")
	if err != nil || len(others) != 2 || others["pvc-1"] == nil || others["pvc-4"] == nil {
		t.Fatalf("Others = %v, %v", others, err)
	}
}
