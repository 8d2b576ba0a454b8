package e2e

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestCorruptedMountsAreCleanedUp puts a real corrupted mount where kubelet
// points the plugin: a FUSE mount whose daemon is gone, so that stat fails
// with ENOTCONN, as for a crashed FUSE daemon or an NFS server that is gone
// for good (Trident #812). Publish removes it and publishes the volume; stats
// report it as abnormal instead of failing; unpublish removes it with the
// volume's mount beneath. Nothing is left.
func TestCorruptedMountsAreCleanedUp(t *testing.T) {
	r := newRig(t, rigOptions{})
	p := r.startPlugin(pluginOptions{role: "node"})
	ctx := ctxT(t)
	vol := r.makeNFSVolume("pvc-0c1d2e3f-4a5b-4c6d-8e9f-a0b1c2d3e4f5", nfsClientIP)
	capability := mountCap("nfs", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	staging := r.makeStaging(vol.id)
	target := r.makeTargetParent("pod-a", vol.id)
	if _, err := p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: vol.context,
	}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}

	if err := os.Mkdir(target, 0o750); err != nil {
		t.Fatal(err)
	}
	deadMount(t, target)
	publish := &csi.NodePublishVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: vol.context,
	}
	if _, err := p.Node.NodePublishVolume(ctx, publish); err != nil {
		t.Fatalf("NodePublishVolume onto a corrupted mount: %v", err)
	}
	if n := plugintest.MountsAt(t, target); n != 1 {
		t.Fatalf("%d mounts at the target, want the volume's alone", n)
	}
	if err := os.WriteFile(filepath.Join(target, "data"), []byte("after"), 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(r.backingDir(vol), "data")); err != nil || string(got) != "after" {
		t.Fatalf("the target is not the volume: %q, %v", got, err)
	}

	// The volume's mount goes bad under the pod.
	deadMount(t, target)
	stats, err := p.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol.id, VolumePath: target})
	if err != nil {
		t.Fatalf("NodeGetVolumeStats on a corrupted mount: %v, want an abnormal condition", err)
	}
	if c := stats.GetVolumeCondition(); !c.GetAbnormal() {
		t.Fatalf("volume condition %v, want abnormal", c)
	}
	for i := 0; i < 2; i++ {
		if _, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.id, TargetPath: target}); err != nil {
			t.Fatalf("NodeUnpublishVolume #%d of a corrupted mount: %v", i+1, err)
		}
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("target left behind: %v", err)
	}
	if _, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging}); err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}
	r.assertClean(vol.id)
}

// deadMount mounts at dir a FUSE file system whose daemon is already gone:
// every stat of dir fails with ENOTCONN until it is unmounted.
func deadMount(t *testing.T, dir string) {
	t.Helper()
	fd, err := unix.Open("/dev/fuse", unix.O_RDWR|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Skipf("no FUSE here: %v", err)
	}
	opts := fmt.Sprintf("fd=%d,rootmode=40000,user_id=0,group_id=0", fd)
	err = unix.Mount("ontap-csi-test-dead", dir, "fuse", unix.MS_NOSUID|unix.MS_NODEV, opts)
	unix.Close(fd) // the daemon dies
	if err != nil {
		t.Skipf("cannot mount FUSE here: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(dir, unix.MNT_DETACH) })
	if _, err := os.Stat(dir); !errors.Is(err, unix.ENOTCONN) {
		t.Fatalf("stat of the dead mount: %v, want ENOTCONN", err)
	}
}
