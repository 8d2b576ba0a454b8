package e2e

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestHostRootWithoutPropagation runs the node plugin as Trident 20.10's
// DaemonSet has it (docs/design/trident-compat.md §2.1): host tools run chrooted into a
// host root (/host there), and what they mount under it never reaches the
// container's own view of <kubelet-dir>/plugins, a volume without mount
// propagation in 20.10. The plugin must judge its mounts where they are,
// under the host root: a repeated stage or publish adds nothing, stats read
// the volume and not the directory beneath it, and unpublish and unstage
// remove everything, so the LUN detaches instead of being refused as busy
// on every retry.
func TestHostRootWithoutPropagation(t *testing.T) {
	skipOnRealKernel(t, "the host root holds the shims")
	r := newRig(t, rigOptions{iscsi: true})
	// A plugin with a host root finds host tools in the host's PATH only.
	host := privateHostRoot(t, r.iscsi.host.Shim.BinDir)
	p := r.startPlugin(pluginOptions{args: []string{"--host-root=" + host}})
	ctx := ctxT(t)
	seen := func(path string) string { return filepath.Join(host, path) }

	capability := mountCap("ext4", snw)
	vol, pc := r.createAndPublish(p, "pvc-5b0c8d1e-2f3a-4b5c-9d6e-7f8091a2b3c4", 64<<20, capability)
	staging := r.makeStaging(vol)
	target := r.makeTargetParent("pod-a", vol)

	for i := 0; i < 2; i++ {
		if _, err := p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
			VolumeId: vol, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc,
		}); err != nil {
			t.Fatalf("NodeStageVolume #%d: %v", i+1, err)
		}
	}
	if isMountPoint(t, staging) {
		t.Fatal("the staging mount reached the plugin's own view: the host root does not model 20.10's")
	}
	if n := plugintest.MountsAt(t, seen(staging)); n != 1 {
		t.Fatalf("%d mounts at the staging path under the host root after two stages, want 1", n)
	}
	for i := 0; i < 2; i++ {
		if _, err := p.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
			VolumeId: vol, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: pc,
		}); err != nil {
			t.Fatalf("NodePublishVolume #%d: %v", i+1, err)
		}
	}
	if n := plugintest.MountsAt(t, seen(target)); n != 1 {
		t.Fatalf("%d mounts at the target under the host root after two publishes, want 1", n)
	}
	data := bytes.Repeat([]byte("20.10 "), 50000)
	if err := os.WriteFile(filepath.Join(seen(target), "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(seen(staging), "data")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("the target is not the staged file system: %d bytes, %v", len(got), err)
	}
	stats, err := p.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol, VolumePath: target})
	if err != nil {
		t.Fatalf("NodeGetVolumeStats: %v", err)
	}
	checkStats(t, stats, int64(len(data)))
	if total := stats.GetUsage()[0].GetTotal(); total != statfsBytes(t, seen(target)) {
		t.Fatalf("stats total %d is not the volume's %d", total, statfsBytes(t, seen(target)))
	}

	for i := 0; i < 2; i++ {
		if _, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: target}); err != nil {
			t.Fatalf("NodeUnpublishVolume #%d: %v", i+1, err)
		}
		if _, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging}); err != nil {
			t.Fatalf("NodeUnstageVolume #%d: %v", i+1, err)
		}
	}
	if mps := plugintest.MountPointsBelow(t, seen(r.KubeletDir)); len(mps) > 0 {
		t.Errorf("mounts left under the host root: %v", mps)
	}
	r.assertClean(vol)
	r.unpublishAndDelete(p, vol)
}

// privateHostRoot builds a host root like the DaemonSet's /host: the root
// file system with /proc, /dev and /sys (and the temp dir's file system when
// it has its own), each bound on its own and made private, and tools as its
// /usr/local/sbin. What is mounted under it stays there, as in a container
// whose kubelet dir volume has no mount propagation, and no other test's
// mounts are copied into it (they would hold those tests' devices busy).
func privateHostRoot(t *testing.T, tools string) string {
	t.Helper()
	host := filepath.Join(t.TempDir(), "host")
	if err := os.Mkdir(host, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(host, unix.MNT_DETACH); err != nil {
			t.Errorf("detach the host root: %v", err)
		}
	})
	dirs := []string{"/", "/proc", "/dev", "/sys"}
	if tmp := filepath.Clean(os.TempDir()); plugintest.MountsAt(t, tmp) > 0 {
		dirs = append(dirs, tmp)
	}
	binds := [][2]string{}
	for _, d := range dirs {
		binds = append(binds, [2]string{d, d})
	}
	binds = append(binds, [2]string{tools, "/usr/local/sbin"})
	for _, b := range binds {
		at := filepath.Join(host, b[1])
		if err := unix.Mount(b[0], at, "", unix.MS_BIND, ""); err != nil {
			t.Fatalf("bind %s at %s: %v", b[0], at, err)
		}
		if err := unix.Mount("", at, "", unix.MS_PRIVATE, ""); err != nil {
			t.Fatalf("make %s private: %v", at, err)
		}
	}
	return host
}
