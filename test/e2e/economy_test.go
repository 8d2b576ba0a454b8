package e2e

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// Trident's economy names (ontap_nas_qtree.go, ontap_san_economy.go):
// pools "trident_qtree_pool_<prefix>_" or "trident_lun_pool_<prefix>_" and
// ten upper-case letters; qtrees and LUNs the prefix and the PV name with
// '-' made '_'.
var (
	qtreePoolRE = regexp.MustCompile(`^trident_qtree_pool_trident_[A-Z]{10}$`)
	lunPoolRE   = regexp.MustCompile(`^trident_lun_pool_trident_[A-Z]{10}$`)
)

func economyName(pv string) string { return "trident_" + strings.ReplaceAll(pv, "-", "_") }

// nasEconomyRig is an ontap-nas-economy rig whose simulator enforces tree
// quotas on the file data plane (each qtree a tmpfs of its hard limit).
// One aggregate: pools are per aggregate, as in Trident, and the
// controller spreads volumes over the aggregates.
func nasEconomyRig(t *testing.T) *rig {
	return newRig(t, rigOptions{
		driver: config.DriverONTAPNASEconomy,
		keys:   map[string]any{"emptyFlexvolDeferredDeletePeriod": "0", "aggregate": "aggr1"},
		sim:    ontapsim.Config{QtreeQuotaMounts: true},
	})
}

func (r *rig) createVolume(p *plugintest.Plugin, name string, size int64, capability *csi.VolumeCapability) *csi.Volume {
	r.t.Helper()
	created, err := p.Controller.CreateVolume(ctxT(r.t), &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{capability},
		Parameters:         map[string]string{"backendType": r.driver},
	})
	if err != nil {
		r.t.Fatalf("CreateVolume %s: %v", name, err)
	}
	return created.GetVolume()
}

func (r *rig) qtree(name string) ontapsim.QtreeInfo {
	r.t.Helper()
	for _, q := range r.sim.Qtrees() {
		if q.Name == name {
			return q
		}
	}
	r.t.Fatalf("no qtree %s: %+v", name, r.sim.Qtrees())
	return ontapsim.QtreeInfo{}
}

// TestNASEconomyEndToEnd runs two ontap-nas-economy volumes through the
// data path. They are qtrees of one pool FlexVol; the node mounts
// "/<pool>/<qtree>" (Trident's nfsPath), which only the published qtree's
// own export policy admits. The tree quota is the size the pod sees
// (statfs, NodeGetVolumeStats) and the most it can write; expansion raises
// it online, on ONTAP alone. Deleting the last qtree deletes the pool.
func TestNASEconomyEndToEnd(t *testing.T) {
	r := nasEconomyRig(t)
	p := r.startPlugin(pluginOptions{})
	ctx := ctxT(t)
	const size = 64 << 20
	capability := mountCap("nfs", snw)
	a := r.createVolume(p, "pvc-0e7c59a2-5b0d-4d59-9d1a-4f3c2b1a0901", size, capability)
	b := r.createVolume(p, "pvc-0e7c59a2-5b0d-4d59-9d1a-4f3c2b1a0902", size/2, capability)
	qa, qb := r.qtree(economyName(a.GetVolumeId())), r.qtree(economyName(b.GetVolumeId()))
	if qa.Volume != qb.Volume || !qtreePoolRE.MatchString(qa.Volume) || qa.HardLimit != size || qb.HardLimit != size/2 {
		t.Fatalf("qtrees %+v, %+v: want both in one Trident pool with their sizes as tree quotas", qa, qb)
	}

	pc := r.controllerPublishNFS(p, a, capability)
	if want := "/" + qa.Volume + "/" + qa.Name; pc["nfsPath"] != want {
		t.Fatalf("nfsPath %q, want %q", pc["nfsPath"], want)
	}
	staging, target := r.makeStaging(a.GetVolumeId()), r.makeTargetParent("pod-a", a.GetVolumeId())
	r.nodeStagePublish(p, a, pc, capability, staging, target)
	if got := statfsBytes(t, target); got != size {
		t.Errorf("statfs of the qtree mount: %d bytes, want the quota %d", got, size)
	}
	data := bytes.Repeat([]byte("economy "), 1<<17) // 1 MiB
	if err := os.WriteFile(filepath.Join(target, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(r.qtree(qa.Name).Directory, "data")); err != nil || !bytes.Equal(got, data) {
		t.Fatalf("file in the qtree on the server: %d bytes, %v", len(got), err)
	}
	if err := writeZeros(filepath.Join(target, "big"), size); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("writing past the tree quota: %v, want ENOSPC", err)
	}
	_ = os.Remove(filepath.Join(target, "big"))
	r.otherQtreeRefused(p, b, pc, capability)

	p.Stop()
	p = r.startPlugin(pluginOptions{})
	exp, err := p.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: a.GetVolumeId(), CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * size}, VolumeCapability: capability,
	})
	if err != nil || exp.GetCapacityBytes() != 2*size || exp.GetNodeExpansionRequired() {
		t.Fatalf("ControllerExpandVolume: %v, %v", exp, err)
	}
	if got := statfsBytes(t, target); got != 2*size {
		t.Errorf("statfs after expansion: %d bytes, want %d", got, 2*size)
	}
	if err := writeZeros(filepath.Join(target, "big"), size+size/2); err != nil {
		t.Fatalf("writing within the grown quota: %v", err)
	}
	stats, err := p.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: a.GetVolumeId(), VolumePath: target})
	if err != nil || stats.GetUsage()[0].GetTotal() != 2*size {
		t.Fatalf("NodeGetVolumeStats: %v, %v", stats, err)
	}
	checkStats(t, stats, size)

	r.nodeUnpublishUnstage(p, a.GetVolumeId(), staging, target)
	r.controllerUnpublishDelete(p, a.GetVolumeId(), b.GetVolumeId())
	if qs := r.sim.Qtrees(); len(qs) != 0 || len(pools(r.sim.Simulator)) != 0 {
		t.Fatalf("left: qtrees %+v, pools %v", qs, pools(r.sim.Simulator))
	}
	plugintest.AssertONTAPClean(t, r.sim.Simulator)
}

// otherQtreeRefused: a qtree not published to the node is refused to it,
// although its pool is exported to the node for the published one.
func (r *rig) otherQtreeRefused(p *plugintest.Plugin, b *csi.Volume, pc map[string]string, capability *csi.VolumeCapability) {
	r.t.Helper()
	ctx := ctxT(r.t)
	other := map[string]string{}
	for k, v := range pc {
		other[k] = v
	}
	other["nfsPath"] = filepath.Join(filepath.Dir(pc["nfsPath"]), economyName(b.GetVolumeId()))
	staging, target := r.makeStaging(b.GetVolumeId()), r.makeTargetParent("pod-b", b.GetVolumeId())
	if _, err := p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: b.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: capability, PublishContext: other,
	}); err != nil {
		r.t.Fatal(err)
	}
	_, err := p.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: b.GetVolumeId(), StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: other,
	})
	if status.Code(err) != codes.PermissionDenied {
		r.t.Fatalf("mounting an unpublished qtree: %v, want PermissionDenied", err)
	}
	if _, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: b.GetVolumeId(), StagingTargetPath: staging}); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) controllerPublishNFS(p *plugintest.Plugin, v *csi.Volume, capability *csi.VolumeCapability) map[string]string {
	r.t.Helper()
	resp, err := p.Controller.ControllerPublishVolume(ctxT(r.t), &csi.ControllerPublishVolumeRequest{
		VolumeId: v.GetVolumeId(), NodeId: nodeID, VolumeCapability: capability, VolumeContext: v.GetVolumeContext(),
	})
	if err != nil {
		r.t.Fatalf("ControllerPublishVolume: %v", err)
	}
	pc := resp.GetPublishContext()
	if q := r.qtree(economyName(v.GetVolumeId())); !policyAdmits(r, q.ExportPolicy, nfsClientIP) || q.ExportPolicy != q.Name {
		r.t.Fatalf("qtree %s: export policy %q, want its own admitting the node", q.Name, q.ExportPolicy)
	}
	return pc
}

func (r *rig) nodeStagePublish(p *plugintest.Plugin, v *csi.Volume, pc map[string]string, capability *csi.VolumeCapability, staging, target string) {
	r.t.Helper()
	ctx := ctxT(r.t)
	if _, err := p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: v.GetVolumeId(), StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc, VolumeContext: v.GetVolumeContext(),
	}); err != nil {
		r.t.Fatalf("NodeStageVolume: %v", err)
	}
	if _, err := p.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: v.GetVolumeId(), StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: pc,
	}); err != nil {
		r.t.Fatalf("NodePublishVolume: %v", err)
	}
}

func (r *rig) nodeUnpublishUnstage(p *plugintest.Plugin, vol, staging, target string) {
	r.t.Helper()
	ctx := ctxT(r.t)
	if _, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol, TargetPath: target}); err != nil {
		r.t.Fatalf("NodeUnpublishVolume: %v", err)
	}
	if _, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging}); err != nil {
		r.t.Fatalf("NodeUnstageVolume: %v", err)
	}
	r.assertClean(vol)
}

// controllerUnpublishDelete unpublishes vols from the node (a volume not
// published is a no-op) and deletes them.
func (r *rig) controllerUnpublishDelete(p *plugintest.Plugin, vols ...string) {
	r.t.Helper()
	ctx := ctxT(r.t)
	for _, vol := range vols {
		if _, err := p.Controller.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: nodeID}); err != nil {
			r.t.Fatalf("ControllerUnpublishVolume %s: %v", vol, err)
		}
		if _, err := p.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: vol}); err != nil {
			r.t.Fatalf("DeleteVolume %s: %v", vol, err)
		}
	}
}

func pools(s *ontapsim.Simulator) []string {
	var out []string
	for _, v := range s.Volumes() {
		if qtreePoolRE.MatchString(v.Name) || lunPoolRE.MatchString(v.Name) {
			out = append(out, v.Name)
		}
	}
	return out
}

// writeZeros writes n bytes of zeros to path, synced.
func writeZeros(path string, n int64) error {
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	buf := make([]byte, 1<<20)
	for ; n > 0; n -= int64(len(buf)) {
		if _, err := f.Write(buf[:min(n, int64(len(buf)))]); err != nil {
			return err
		}
	}
	return f.Sync()
}

// TestSANEconomyEndToEnd runs ontap-san-economy LUNs through the data
// path: two volumes share a pool FlexVol; one is attached, formatted,
// written and grown online; its snapshot is a LUN clone in the same pool
// (Trident's "<lun>_snapshot_<name>"), and a volume made from it, another
// LUN clone there, holds the data. The LUNs go through the node's igroup as
// ontap-san's. Deleting the last LUN deletes the pool.
func TestSANEconomyEndToEnd(t *testing.T) {
	r := newRig(t, rigOptions{iscsi: true, driver: config.DriverONTAPSANEconomy, keys: map[string]any{"aggregate": "aggr1"}})
	p := r.startPlugin(pluginOptions{})
	ctx := ctxT(t)
	const size = 512 << 20 // mkfs.xfs wants 300 MiB at least
	capability := mountCap("xfs", snw)
	a, pc := r.createAndPublish(p, "pvc-5d1f2a3b-6c7d-4e8f-9a0b-1c2d3e4f5a01", size, capability)
	b := r.createVolume(p, "pvc-5d1f2a3b-6c7d-4e8f-9a0b-1c2d3e4f5a02", size, capability)
	lunA, lunB := r.lun(economyName(a)), r.lun(economyName(b.GetVolumeId()))
	if lunA.Volume != lunB.Volume || !lunPoolRE.MatchString(lunA.Volume) || lunA.Path != "/vol/"+lunA.Volume+"/"+economyName(a) {
		t.Fatalf("LUNs %s, %s: want both in one Trident pool", lunA.Path, lunB.Path)
	}
	vol := &csi.Volume{VolumeId: a}
	staging, target := r.makeStaging(a), r.makeTargetParent("pod-a", a)
	r.nodeStagePublish(p, vol, pc, capability, staging, target)
	data := bytes.Repeat([]byte("san economy "), 100000)
	if err := os.WriteFile(filepath.Join(target, "data"), data, 0o644); err != nil {
		t.Fatal(err)
	}
	unix.Sync()

	snap, err := p.Controller.CreateSnapshot(ctx, &csi.CreateSnapshotRequest{SourceVolumeId: a, Name: "snapshot-6e0a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b"})
	if err != nil || snap.GetSnapshot().GetSnapshotId() != a+"/snapshot-6e0a1b2c-3d4e-4f50-8a6b-7c8d9e0f1a2b" {
		t.Fatalf("CreateSnapshot: %v, %v", snap, err)
	}
	if l := r.lun(economyName(a) + "_snapshot_snapshot_6e0a1b2c_3d4e_4f50_8a6b_7c8d9e0f1a2b"); l.Volume != lunA.Volume {
		t.Fatalf("snapshot LUN %s outside the pool", l.Path)
	}
	if _, err := p.Controller.ControllerExpandVolume(ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: a, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * size}, VolumeCapability: capability,
	}); err != nil {
		t.Fatalf("ControllerExpandVolume: %v", err)
	}
	nodeExpandAndCheck(t, p, a, target, capability, size, data)
	r.nodeUnpublishUnstage(p, a, staging, target)

	c := r.restoreAndRead(p, snap.GetSnapshot().GetSnapshotId(), capability, data)
	if _, err := p.Controller.DeleteSnapshot(ctx, &csi.DeleteSnapshotRequest{SnapshotId: snap.GetSnapshot().GetSnapshotId()}); err != nil {
		t.Fatalf("DeleteSnapshot: %v", err)
	}
	r.controllerUnpublishDelete(p, a, b.GetVolumeId(), c)
	if ls := r.sim.LUNs(); len(ls) != 0 || len(pools(r.sim.Simulator)) != 0 {
		t.Fatalf("left: LUNs %+v, pools %v", ls, pools(r.sim.Simulator))
	}
	plugintest.AssertONTAPClean(t, r.sim.Simulator)
}

// restoreAndRead makes a volume of the snapshot, attaches it and checks
// that it holds data; it returns the volume, detached but published.
func (r *rig) restoreAndRead(p *plugintest.Plugin, snapID string, capability *csi.VolumeCapability, data []byte) string {
	r.t.Helper()
	ctx := ctxT(r.t)
	created, err := p.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
		Name: "pvc-5d1f2a3b-6c7d-4e8f-9a0b-1c2d3e4f5a03", VolumeCapabilities: []*csi.VolumeCapability{capability},
		Parameters: map[string]string{"backendType": r.driver},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snapID},
		}},
	})
	if err != nil {
		r.t.Fatalf("CreateVolume from snapshot: %v", err)
	}
	c := created.GetVolume()
	if l := r.lun(economyName(c.GetVolumeId())); !lunPoolRE.MatchString(l.Volume) {
		r.t.Fatalf("restored LUN %s outside a pool", l.Path)
	}
	resp, err := p.Controller.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: c.GetVolumeId(), NodeId: nodeID, VolumeCapability: capability, VolumeContext: c.GetVolumeContext(),
	})
	if err != nil {
		r.t.Fatalf("ControllerPublishVolume: %v", err)
	}
	staging, target := r.makeStaging(c.GetVolumeId()), r.makeTargetParent("pod-c", c.GetVolumeId())
	r.nodeStagePublish(p, c, resp.GetPublishContext(), capability, staging, target)
	if got, err := os.ReadFile(filepath.Join(target, "data")); err != nil || !bytes.Equal(got, data) {
		r.t.Fatalf("data in the volume made of the snapshot: %d bytes, %v", len(got), err)
	}
	r.nodeUnpublishUnstage(p, c.GetVolumeId(), staging, target)
	return c.GetVolumeId()
}

func (r *rig) lun(name string) ontapsim.LUNInfo {
	r.t.Helper()
	for _, l := range r.sim.LUNs() {
		if filepath.Base(l.Path) == name {
			return l
		}
	}
	r.t.Fatalf("no LUN %s", name)
	return ontapsim.LUNInfo{}
}
