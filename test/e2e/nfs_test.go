package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/node/tracking"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// nfsVolume is an ONTAP volume the controller would have made: a volume
// mounted at its junction, with an export policy.
type nfsVolume struct {
	id       string // the CSI volume id (PV name)
	name     string // ONTAP name
	junction string
	context  map[string]string // publish context
}

// makeNFSVolume creates the volume on the simulator and returns the publish
// context Trident's controller hands the node for it.
func (r *rig) makeNFSVolume(id string, clients ...string) nfsVolume {
	r.t.Helper()
	name := "trident_" + filepathSafe(id)
	policy := "trident_policy_" + filepathSafe(id)
	if _, err := r.sim.CreateExportPolicy(policy, ontapsim.ExportRule{Clients: clients, Protocols: []string{"nfs"}}); err != nil {
		r.t.Fatal(err)
	}
	if _, err := r.sim.CreateVolume(ontapsim.VolumeSpec{
		Name: name, Size: 1 << 30, Thin: true, ExportPolicy: policy, JunctionPath: "/" + name, UnixPermissions: 777,
	}); err != nil {
		r.t.Fatal(err)
	}
	return nfsVolume{
		id: id, name: name, junction: "/" + name,
		context: map[string]string{
			"protocol":     "file",
			"nfsServerIp":  r.sim.Info().NFSLIFs[0],
			"nfsPath":      "/" + name,
			"mountOptions": "-o nfsvers=4.1",
		},
	}
}

func filepathSafe(id string) string {
	out := []byte(id)
	for i, c := range out {
		if c == '-' || c == '.' {
			out[i] = '_'
		}
	}
	return string(out)
}

// backingDir is where the simulator keeps the volume's files.
func (r *rig) backingDir(v nfsVolume) string {
	r.t.Helper()
	exp, err := r.sim.ResolveNFSExport(v.context["nfsServerIp"], nfsClientIP, v.junction)
	if err != nil {
		r.t.Fatal(err)
	}
	return exp.Directory
}

// TestNFSEndToEnd runs an ontap-nas volume through its whole life as
// kubelet and the sidecars would, through one ontap-csi process:
// CreateVolume, ControllerPublishVolume, NodeStage, NodePublish (read-write
// and read-only), a write, ControllerExpandVolume and NodeExpandVolume,
// NodeGetVolumeStats, NodeUnpublish, NodeUnstage, ControllerUnpublish,
// DeleteVolume; every call but the first of each twice, as retries are.
// From the expansion on, a restarted process carries on: all either service
// needs is on ONTAP and in the tracking file. Nothing may be left: no mount,
// no tracking file, no ONTAP object.
func TestNFSEndToEnd(t *testing.T) {
	r := newRig(t, rigOptions{})
	l := &nfsLife{t: t, r: r, p: r.startPlugin(pluginOptions{}), ctx: ctxT(t),
		capability: mountCap("nfs", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER, "hard")}
	l.create("pvc-4a1c7f0e-7d39-4c55-9a0e-0d1f3e9b2c11")
	l.controllerPublish()
	l.stage()
	l.publish()
	l.writeThrough()
	l.p.Stop()
	l.p = r.startPlugin(pluginOptions{})
	l.expand()
	stats, err := l.p.Node.NodeGetVolumeStats(l.ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: l.vol.id, VolumePath: l.target})
	if err != nil {
		t.Fatalf("NodeGetVolumeStats: %v", err)
	}
	checkStats(t, stats, 1<<20)
	l.unpublishAndUnstage()
	l.controllerUnpublish()
	for i := 0; i < 2; i++ {
		if _, err := l.p.Controller.DeleteVolume(l.ctx, &csi.DeleteVolumeRequest{VolumeId: l.vol.id}); err != nil {
			t.Fatalf("DeleteVolume #%d: %v", i+1, err)
		}
	}
	plugintest.AssertONTAPClean(t, r.sim.Simulator)
}

// nfsLife is TestNFSEndToEnd's volume and what each step leaves for the
// next.
type nfsLife struct {
	t          *testing.T
	r          *rig
	p          *plugintest.Plugin
	ctx        context.Context
	capability *csi.VolumeCapability
	created    *csi.Volume
	internal   string // the ONTAP volume's name
	pc         map[string]string
	vol        nfsVolume
	staging    string
	target     string // published read-write
	roTarget   string // published read-only
}

// create makes the volume: its id is the PV name, its ONTAP name Trident's.
func (l *nfsLife) create(name string) {
	t := l.t
	created, err := l.p.Controller.CreateVolume(l.ctx, &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{l.capability},
		Parameters:         map[string]string{"backendType": "ontap-nas"},
	})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	l.created = created.GetVolume()
	if l.created.GetVolumeId() != name {
		t.Errorf("volume id %q, want the PV name as Trident's", l.created.GetVolumeId())
	}
	l.internal = "trident_" + filepathSafe(name)
	if _, ok := l.r.sim.Volume(l.internal); !ok {
		t.Fatalf("no ONTAP volume %s", l.internal)
	}
}

// controllerPublish publishes twice; the volume's own export policy then
// admits exactly the node's address.
func (l *nfsLife) controllerPublish() {
	t, r := l.t, l.r
	publish := &csi.ControllerPublishVolumeRequest{
		VolumeId: l.created.GetVolumeId(), NodeId: nodeID, VolumeCapability: l.capability, VolumeContext: l.created.GetVolumeContext(),
	}
	for i := 0; i < 2; i++ {
		resp, err := l.p.Controller.ControllerPublishVolume(l.ctx, publish)
		if err != nil {
			t.Fatalf("ControllerPublishVolume #%d: %v", i+1, err)
		}
		l.pc = resp.GetPublishContext()
	}
	if l.pc["protocol"] != "file" || l.pc["nfsServerIp"] != r.sim.Info().NFSLIFs[0] || l.pc["nfsPath"] != "/"+l.internal {
		t.Fatalf("publish context %v", l.pc)
	}
	if v, _ := r.sim.Volume(l.internal); !policyAdmits(r, v.ExportPolicy, nfsClientIP) {
		t.Fatalf("export policy %q of %s does not admit the node", v.ExportPolicy, l.internal)
	}
	l.vol = nfsVolume{id: l.created.GetVolumeId(), name: l.internal, junction: l.pc["nfsPath"], context: l.pc}
}

// stage stages twice (the second a no-op). NFS stage records the export in
// Trident's 23.01 format and mounts nothing.
func (l *nfsLife) stage() {
	t, r := l.t, l.r
	l.staging = r.makeStaging(l.vol.id)
	stage := &csi.NodeStageVolumeRequest{
		VolumeId: l.vol.id, StagingTargetPath: l.staging, VolumeCapability: l.capability, PublishContext: l.pc,
		VolumeContext: l.created.GetVolumeContext(),
	}
	for i := 0; i < 2; i++ {
		if _, err := l.p.Node.NodeStageVolume(l.ctx, stage); err != nil {
			t.Fatalf("NodeStageVolume #%d: %v", i+1, err)
		}
	}
	if isMountPoint(t, l.staging) {
		t.Fatal("NFS stage mounted the staging path")
	}
	rec := readTracking(t, r.TrackingFile(l.vol.id))
	if rec["nfsServerIp"] != l.pc["nfsServerIp"] || rec["nfsPath"] != l.vol.junction || rec["stagingTargetPath"] != l.staging || rec["fstype"] != "nfs" {
		t.Fatalf("tracking file: %v", rec)
	}
}

// publish publishes read-write twice and read-only once.
func (l *nfsLife) publish() {
	t, r := l.t, l.r
	l.target = r.makeTargetParent("pod-a", l.vol.id)
	l.roTarget = r.makeTargetParent("pod-b", l.vol.id)
	nodePublish := &csi.NodePublishVolumeRequest{
		VolumeId: l.vol.id, StagingTargetPath: l.staging, TargetPath: l.target, VolumeCapability: l.capability, PublishContext: l.pc,
	}
	for i := 0; i < 2; i++ {
		if _, err := l.p.Node.NodePublishVolume(l.ctx, nodePublish); err != nil {
			t.Fatalf("NodePublishVolume #%d: %v", i+1, err)
		}
	}
	roPublish := &csi.NodePublishVolumeRequest{
		VolumeId: l.vol.id, StagingTargetPath: l.staging, TargetPath: l.roTarget, VolumeCapability: l.capability, PublishContext: l.pc, Readonly: true,
	}
	if _, err := l.p.Node.NodePublishVolume(l.ctx, roPublish); err != nil {
		t.Fatalf("read-only NodePublishVolume: %v", err)
	}
}

// writeThrough writes through the read-write publish: the file is in the
// volume on the "server" and readable through the read-only one, which
// refuses writes. Both targets are recorded.
func (l *nfsLife) writeThrough() {
	t, r := l.t, l.r
	if err := os.WriteFile(filepath.Join(l.target, "hello.txt"), []byte("hello from the pod\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(filepath.Join(r.backingDir(l.vol), "hello.txt"))
	if err != nil || string(got) != "hello from the pod\n" {
		t.Fatalf("file in the backing directory: %q, %v", got, err)
	}
	if got, err := os.ReadFile(filepath.Join(l.roTarget, "hello.txt")); err != nil || string(got) != "hello from the pod\n" {
		t.Fatalf("read through the read-only publish: %q, %v", got, err)
	}
	// Enough to show in the stats: a real NFS client's statfs counts in
	// blocks of its wsize (256 KiB on Linux 6.1), so a few bytes show as
	// none used.
	if err := os.WriteFile(filepath.Join(l.target, "data"), bytes.Repeat([]byte("x"), 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(l.roTarget, "nope"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Fatalf("write through the read-only publish: %v, want EROFS", err)
	}
	rec := readTracking(t, r.TrackingFile(l.vol.id))
	published, _ := rec["publishedTargetPaths"].(map[string]any)
	if _, ok := published[l.target]; !ok || len(published) != 2 {
		t.Fatalf("published paths recorded: %v", published)
	}
}

// expand grows the volume. NFS grows on ONTAP alone: the controller says
// so, and node expansion succeeds and does nothing.
func (l *nfsLife) expand() {
	t := l.t
	before, _ := l.r.sim.Volume(l.internal)
	exp, err := l.p.Controller.ControllerExpandVolume(l.ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: l.vol.id, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30}, VolumeCapability: l.capability,
	})
	if err != nil || exp.GetCapacityBytes() != 2<<30 || exp.GetNodeExpansionRequired() {
		t.Fatalf("ControllerExpandVolume: %v, %v", exp, err)
	}
	if after, _ := l.r.sim.Volume(l.internal); after.Size <= before.Size {
		t.Fatalf("ONTAP volume size %d after expansion, was %d", after.Size, before.Size)
	}
	if _, err := l.p.Node.NodeExpandVolume(l.ctx, &csi.NodeExpandVolumeRequest{
		VolumeId: l.vol.id, VolumePath: l.target, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30},
	}); err != nil {
		t.Fatalf("NodeExpandVolume: %v", err)
	}
}

// unpublishAndUnstage unpublishes both targets (one twice) and unstages
// twice: nothing is left on the node, and the data stays on the volume.
func (l *nfsLife) unpublishAndUnstage() {
	t := l.t
	for _, tp := range []string{l.target, l.roTarget, l.target} { // the repeat must succeed
		if _, err := l.p.Node.NodeUnpublishVolume(l.ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: l.vol.id, TargetPath: tp}); err != nil {
			t.Fatalf("NodeUnpublishVolume %s: %v", tp, err)
		}
		if _, err := os.Lstat(tp); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("target %s not removed: %v", tp, err)
		}
	}
	unstage := &csi.NodeUnstageVolumeRequest{VolumeId: l.vol.id, StagingTargetPath: l.staging}
	for i := 0; i < 2; i++ {
		if _, err := l.p.Node.NodeUnstageVolume(l.ctx, unstage); err != nil {
			t.Fatalf("NodeUnstageVolume #%d: %v", i+1, err)
		}
	}
	l.r.assertClean(l.vol.id)
	if _, err := os.Stat(filepath.Join(l.r.backingDir(l.vol), "hello.txt")); err != nil {
		t.Fatal(err)
	}
}

// controllerUnpublish unpublishes twice: the export policy no longer
// admits the node, and on a real kernel nfsd refuses its mount at once.
func (l *nfsLife) controllerUnpublish() {
	t, r := l.t, l.r
	for i := 0; i < 2; i++ {
		if _, err := l.p.Controller.ControllerUnpublishVolume(l.ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: l.vol.id, NodeId: nodeID}); err != nil {
			t.Fatalf("ControllerUnpublishVolume #%d: %v", i+1, err)
		}
	}
	if v, _ := r.sim.Volume(l.internal); policyAdmits(r, v.ExportPolicy, nfsClientIP) {
		t.Fatalf("export policy %q still admits the node after ControllerUnpublishVolume", v.ExportPolicy)
	}
	if !plugintest.RealKernel() {
		return
	}
	mnt := filepath.Join(r.Root, "after-unpublish")
	if err := os.Mkdir(mnt, 0o755); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "nfs", "-o", "vers=4.1", l.pc["nfsServerIp"]+":"+l.pc["nfsPath"], mnt).CombinedOutput()
	if err == nil {
		_ = unix.Unmount(mnt, 0)
		t.Fatal("the node still mounts the volume after ControllerUnpublishVolume")
	} else if !strings.Contains(string(out), "access denied") {
		t.Fatalf("mount after ControllerUnpublishVolume: %v: %s, want access denied", err, out)
	}
}

// policyAdmits reports whether export policy name has a rule for client.
func policyAdmits(r *rig, name, client string) bool {
	for _, pol := range r.sim.ExportPolicies() {
		if pol.Name != name {
			continue
		}
		for _, rule := range pol.Rules {
			if slices.Contains(rule.Clients, client) {
				return true
			}
		}
	}
	return false
}

// An export policy that does not admit the node is PermissionDenied
// (Trident #965: "mount.nfs: access denied"), and leaves nothing behind.
func TestNFSExportPolicyDenies(t *testing.T) {
	r := newRig(t, rigOptions{})
	p := r.startPlugin(pluginOptions{})
	ctx := ctxT(t)
	vol := r.makeNFSVolume("pvc-denied", "198.51.100.0/24")
	staging := r.makeStaging(vol.id)
	target := r.makeTargetParent("pod-a", vol.id)
	capability := mountCap("", snw)
	if _, err := p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: vol.context,
	}); err != nil {
		t.Fatal(err)
	}
	_, err := p.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: vol.context,
	})
	if status.Code(err) != codes.PermissionDenied {
		t.Fatalf("publish through a refusing export policy: %v, want PermissionDenied", err)
	}
	if _, err := os.Lstat(target); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("failed publish left the target behind: %v", err)
	}
	rec := readTracking(t, r.TrackingFile(vol.id))
	if published, _ := rec["publishedTargetPaths"].(map[string]any); len(published) != 0 {
		t.Fatalf("failed publish left a record: %v", published)
	}
	if _, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging}); err != nil {
		t.Fatal(err)
	}
	r.assertClean(vol.id)
}

func readTracking(t testing.TB, path string) map[string]any {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	if st.Mode().Perm() != 0o600 {
		t.Errorf("tracking file mode %v, want 0600", st.Mode().Perm())
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatal(err)
	}
	if _, err := tracking.Decode(data); err != nil {
		t.Fatalf("tracking file does not decode: %v", err)
	}
	return m
}

// checkStats checks a healthy file system volume's stats.
func checkStats(t testing.TB, resp *csi.NodeGetVolumeStatsResponse, minUsedBytes int64) {
	t.Helper()
	if c := resp.GetVolumeCondition(); c == nil || c.GetAbnormal() {
		t.Fatalf("volume condition %v", c)
	}
	var bytes, inodes *csi.VolumeUsage
	for _, u := range resp.GetUsage() {
		switch u.GetUnit() {
		case csi.VolumeUsage_BYTES:
			bytes = u
		case csi.VolumeUsage_INODES:
			inodes = u
		}
	}
	if bytes == nil || inodes == nil || bytes.GetTotal() <= 0 || bytes.GetUsed() < minUsedBytes || bytes.GetAvailable() > bytes.GetTotal() || inodes.GetTotal() <= 0 {
		t.Fatalf("usage %v", resp.GetUsage())
	}
}
