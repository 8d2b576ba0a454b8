package guest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestNFSVolumeLife runs an ontap-nas volume through its life on the real
// NFS client and server: CreateVolume, ControllerPublishVolume (the
// volume's export policy gets a rule for the node's address, which nfsd
// exports at once), NodeStage, NodePublish read-write and read-only, a
// write that lands in the volume, ControllerExpandVolume,
// NodeGetVolumeStats, NodeUnpublish, NodeUnstage, ControllerUnpublish (the
// export goes), DeleteVolume. No NFS mount or export may be left.
func TestNFSVolumeLife(t *testing.T) {
	roots := plugintest.NewRoots(t)
	s := startSim(t, roots.Root)
	p := startPlugin(t, roots, s.writeBackend(t, roots.Root, "ontap-nas", map[string]any{"autoExportPolicy": true}))
	ctx := ctxT(t)
	capability := mountCap("nfs", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)

	created, err := p.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-nfs-1", CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{capability}, Parameters: map[string]string{"backendType": "ontap-nas"},
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
	junction := pc["nfsPath"]
	if etab := run(t, "exportfs", "-v"); !strings.Contains(etab, junction) || !strings.Contains(etab, nodeIP) {
		t.Fatalf("after ControllerPublishVolume nfsd does not export %s to %s:\n%s", junction, nodeIP, etab)
	}

	staging := p.staging(t, vol.GetVolumeId())
	if _, err := p.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: vol.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc, VolumeContext: vol.GetVolumeContext(),
	}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
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
	if got := mountsOfType(t, "nfs4"); len(got) != 2 {
		t.Fatalf("NFSv4 mounts %v, want the two publishes", got)
	}
	if err := os.WriteFile(filepath.Join(target, "hello.txt"), []byte("hello over NFS\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	// On the "storage": the file is in the volume's directory.
	found, _ := filepath.Glob(filepath.Join(s.dataDir, "volumes", "*", "hello.txt"))
	if len(found) != 1 {
		t.Fatalf("the file is not in the simulator's volume: %v", found)
	}
	if got, err := os.ReadFile(filepath.Join(roTarget, "hello.txt")); err != nil || string(got) != "hello over NFS\n" {
		t.Fatalf("read through the read-only publish: %q, %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(roTarget, "nope"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("write through the read-only publish: %v, want EROFS", err)
	}

	if exp, err := p.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: vol.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}, VolumeCapability: capability,
	}); err != nil || exp.GetNodeExpansionRequired() {
		t.Fatalf("ControllerExpandVolume: %v, %v", exp, err)
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
	if got := append(mountsOfType(t, "nfs4"), mountsOfType(t, "nfs")...); len(got) > 0 {
		t.Fatalf("NFS mounts left: %v", got)
	}
	if _, err := p.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol.GetVolumeId(), NodeId: nodeID}); err != nil {
		t.Fatalf("ControllerUnpublishVolume: %v", err)
	}
	if etab := run(t, "exportfs", "-v"); strings.Contains(etab, nodeIP) {
		t.Fatalf("after ControllerUnpublishVolume nfsd still exports to the node:\n%s", etab)
	}
	if _, err := p.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol.GetVolumeId()}); err != nil {
		t.Fatalf("DeleteVolume: %v", err)
	}
	if etab := strings.TrimSpace(run(t, "exportfs", "-v")); etab != "" {
		t.Fatalf("exports left after DeleteVolume:\n%s", etab)
	}
}
