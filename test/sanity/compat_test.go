package sanity

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// Volumes made by Trident, set up on the simulator the way Trident 20.10
// and 26.06 leave them, must be served by our controller: published,
// expanded, snapshotted, cloned and deleted. Each step goes through a
// freshly attached controller, as after a restart or on a second replica:
// everything the controller needs is on ONTAP.

const (
	tridentPV       = "pvc-0b6c1d2e-3f40-4a5b-8c6d-7e8f90a1b2c3"
	tridentInternal = "trident_pvc_0b6c1d2e_3f40_4a5b_8c6d_7e8f90a1b2c3"
	// Trident ≤ 24.10's per-backend export policy, and Trident's UUID in
	// per-node igroup names.
	tridentBackendPolicy = "trident-6a4f9e2b-1c3d-4e5f-8a9b-0c1d2e3f4a5b"
	tridentUUID          = "9d8c7b6a-5f4e-4d3c-8b2a-1f0e9d8c7b6a"
	tridentLabels        = `{"provisioning":{"cluster":"prod"}}`
	gib                  = int64(1) << 30
)

// controllerCalls are the CSI calls of the lifecycle, each made through a
// new controller attached to the same simulator.
type controllerCalls struct {
	t   *testing.T
	s   *ontapsim.Simulator
	o   Options
	cap *csi.VolumeCapability
}

func (c *controllerCalls) fresh() csi.ControllerClient { return Attach(c.t, c.s, c.o).Controller }

func (c *controllerCalls) publish() map[string]string {
	c.t.Helper()
	resp, err := c.fresh().ControllerPublishVolume(Ctx(c.t), &csi.ControllerPublishVolumeRequest{
		VolumeId: tridentPV, NodeId: NodeID, VolumeCapability: c.cap,
	})
	if err != nil {
		c.t.Fatalf("publish: %v", err)
	}
	return resp.PublishContext
}

func (c *controllerCalls) unpublish() {
	c.t.Helper()
	if _, err := c.fresh().ControllerUnpublishVolume(Ctx(c.t), &csi.ControllerUnpublishVolumeRequest{VolumeId: tridentPV, NodeId: NodeID}); err != nil {
		c.t.Fatalf("unpublish: %v", err)
	}
}

// listed returns the volume as ListVolumes reports it.
func (c *controllerCalls) listed() *csi.Volume {
	c.t.Helper()
	resp, err := c.fresh().ListVolumes(Ctx(c.t), &csi.ListVolumesRequest{})
	if err != nil {
		c.t.Fatalf("list: %v", err)
	}
	for _, e := range resp.Entries {
		if e.Volume.VolumeId == tridentPV {
			return e.Volume
		}
	}
	c.t.Fatalf("ListVolumes does not report %s", tridentPV)
	return nil
}

// expandSnapshotCloneDelete runs the rest of the lifecycle.
func (c *controllerCalls) expandSnapshotCloneDelete() {
	t := c.t
	t.Helper()
	exp, err := c.fresh().ControllerExpandVolume(Ctx(t), &csi.ControllerExpandVolumeRequest{
		VolumeId: tridentPV, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}, VolumeCapability: c.cap,
	})
	if err != nil || exp.CapacityBytes != 2*gib {
		t.Fatalf("expand: %v %v", err, exp)
	}
	if got := c.listed().CapacityBytes; got != 2*gib {
		t.Errorf("capacity after expand %d", got)
	}
	snap, err := c.fresh().CreateSnapshot(Ctx(t), &csi.CreateSnapshotRequest{Name: "snapshot-6f5e4d3c", SourceVolumeId: tridentPV})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if snap.Snapshot.SnapshotId != tridentPV+"/snapshot-6f5e4d3c" {
		t.Errorf("snapshot ID %s", snap.Snapshot.SnapshotId)
	}
	clone, err := c.fresh().CreateVolume(Ctx(t), &csi.CreateVolumeRequest{
		Name: "pvc-clone-of-trident", VolumeCapabilities: []*csi.VolumeCapability{c.cap},
		VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.Snapshot.SnapshotId}}},
	})
	if err != nil || clone.Volume.CapacityBytes < 2*gib {
		t.Fatalf("clone from the snapshot: %v %v", err, clone)
	}
	for _, step := range []func() error{
		func() error {
			_, err := c.fresh().DeleteVolume(Ctx(t), &csi.DeleteVolumeRequest{VolumeId: clone.Volume.VolumeId})
			return err
		},
		func() error {
			_, err := c.fresh().DeleteSnapshot(Ctx(t), &csi.DeleteSnapshotRequest{SnapshotId: snap.Snapshot.SnapshotId})
			return err
		},
		func() error {
			_, err := c.fresh().DeleteVolume(Ctx(t), &csi.DeleteVolumeRequest{VolumeId: tridentPV})
			return err
		},
	} {
		if err := step(); err != nil {
			t.Fatalf("cleanup: %v", err)
		}
	}
	if _, ok := c.s.Volume(tridentInternal); ok {
		t.Errorf("volume %s still exists", tridentInternal)
	}
}

func exportPolicy(s *ontapsim.Simulator, name string) *ontapsim.ExportPolicyInfo {
	for _, p := range s.ExportPolicies() {
		if p.Name == name {
			return &p
		}
	}
	return nil
}

func ruleClients(p *ontapsim.ExportPolicyInfo) []string {
	var out []string
	for _, r := range p.Rules {
		out = append(out, strings.Join(r.Clients, ","))
	}
	slices.Sort(out)
	return out
}

// must fails the test on a fixture error.
func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("fixture: %v", err)
	}
}

// Trident 20.10, ontap-nas with autoExportPolicy: the volume uses the
// backend's shared policy "trident-<backendUUID>", its comment is empty,
// the snapshot reserve is ONTAP's default.
func TestTrident2010NAS(t *testing.T) {
	p := Start(t, Options{Driver: config.DriverONTAPNAS})
	s := p.Sim
	var err error
	// The shared policy admits another node only: ours is missing.
	_, err = s.CreateExportPolicy(tridentBackendPolicy, ontapsim.ExportRule{Clients: []string{"10.10.0.9"}, Protocols: []string{"nfs"}})
	must(t, err)
	_, err = s.CreateVolume(ontapsim.VolumeSpec{
		Name: tridentInternal, Size: gib, Thin: true, ExportPolicy: tridentBackendPolicy,
		JunctionPath: "/" + tridentInternal, SnapshotPolicy: "none", UnixPermissions: 777,
	})
	must(t, err)
	c := &controllerCalls{t: t, s: s, o: Options{Driver: config.DriverONTAPNAS}, cap: mountCapability(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)}

	if v := c.listed(); v.CapacityBytes != gib*95/100 || v.VolumeContext["internalName"] != tridentInternal {
		t.Errorf("listed as %v", v)
	}
	c.wantPublished("the shared policy admits another node only")
	pc := c.publish()
	c.wantPublished("published", NodeID)
	if pc["protocol"] != "file" || pc["nfsPath"] != "/"+tridentInternal || pc["nfsServerIp"] != s.Info().NFSLIFs[0] {
		t.Errorf("publish context %v", pc)
	}
	// The node's rule joins the shared policy; the volume stays on it.
	if got := ruleClients(exportPolicy(s, tridentBackendPolicy)); !slices.Equal(got, []string{"10.10.0.5", "10.10.0.9"}) {
		t.Errorf("shared policy rules %v", got)
	}
	if v, _ := s.Volume(tridentInternal); v.ExportPolicy != tridentBackendPolicy {
		t.Errorf("volume moved to policy %s", v.ExportPolicy)
	}
	// Unpublish never trims the shared policy: other volumes use it.
	c.unpublish()
	if got := ruleClients(exportPolicy(s, tridentBackendPolicy)); len(got) != 2 {
		t.Errorf("shared policy trimmed to %v", got)
	}
	// ONTAP still admits the node: ListVolumes says so.
	c.wantPublished("unpublished from the shared policy", NodeID)
	c.expandSnapshotCloneDelete()
	if v, ok := s.Volume(tridentInternal); ok {
		t.Errorf("not deleted: %+v", v)
	}
}

// Trident 26.06, ontap-nas with autoExportPolicy: the volume sits on
// "<prefix>empty" until published, then on its own policy; its comment
// holds Trident's pool labels.
func TestTrident2606NAS(t *testing.T) {
	p := Start(t, Options{Driver: config.DriverONTAPNAS})
	s := p.Sim
	var err error
	_, err = s.CreateExportPolicy("trident_empty")
	must(t, err)
	zero := 0
	_, err = s.CreateVolume(ontapsim.VolumeSpec{
		Name: tridentInternal, Size: gib, Thin: true, ExportPolicy: "trident_empty", JunctionPath: "/" + tridentInternal,
		SnapshotPolicy: "none", SnapshotReserve: &zero, Comment: tridentLabels, UnixPermissions: 777,
	})
	must(t, err)
	c := &controllerCalls{t: t, s: s, o: Options{Driver: config.DriverONTAPNAS}, cap: mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}

	c.publish()
	own := exportPolicy(s, tridentInternal)
	if own == nil || !slices.Equal(ruleClients(own), []string{"10.10.0.5"}) {
		t.Fatalf("volume policy %+v", own)
	}
	if v, _ := s.Volume(tridentInternal); v.ExportPolicy != tridentInternal {
		t.Errorf("volume on policy %s", v.ExportPolicy)
	}
	c.unpublish()
	if v, _ := s.Volume(tridentInternal); v.ExportPolicy != "trident_empty" || exportPolicy(s, tridentInternal) != nil {
		t.Errorf("after unpublish: volume on %s, own policy %v", v.ExportPolicy, exportPolicy(s, tridentInternal))
	}
	// Expanding records the size next to Trident's labels, which stay.
	if _, err := c.fresh().ControllerExpandVolume(Ctx(t), &csi.ControllerExpandVolumeRequest{
		VolumeId: tridentPV, CapacityRange: &csi.CapacityRange{RequiredBytes: 3 * gib / 2},
	}); err != nil {
		t.Fatal(err)
	}
	v, _ := s.Volume(tridentInternal)
	var comment map[string]map[string]string
	if err := json.Unmarshal([]byte(v.Comment), &comment); err != nil || comment["provisioning"]["cluster"] != "prod" {
		t.Errorf("comment %q: %v", v.Comment, err)
	}
	c.expandSnapshotCloneDelete()
}

// Trident 20.10, ontap-san: the LUN is mapped at create time to the
// backend's igroup "trident", which holds every node's IQN; the filesystem
// type is a LUN attribute.
func TestTrident2010SAN(t *testing.T) {
	p := Start(t, Options{Driver: config.DriverONTAPSAN})
	s := p.Sim
	var err error
	zero := 0
	_, err = s.CreateVolume(ontapsim.VolumeSpec{Name: tridentInternal, Size: gib * 11 / 10, Thin: true, SnapshotPolicy: "none", SnapshotReserve: &zero})
	must(t, err)
	_, err = s.CreateLUN(ontapsim.LUNSpec{Path: "/vol/" + tridentInternal + "/lun0", Size: gib,
		Attributes: map[string]string{"com.netapp.ndvp.fstype": "ext4", "context": "csi"}})
	must(t, err)
	_, err = s.CreateIGroup("trident", "", "", NodeIQN, "iqn.1994-05.com.redhat:other-node")
	must(t, err)
	lunID, err := s.MapLUN("/vol/"+tridentInternal+"/lun0", "trident")
	must(t, err)
	c := &controllerCalls{t: t, s: s, o: Options{Driver: config.DriverONTAPSAN}, cap: mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}

	if v := c.listed(); v.CapacityBytes != gib {
		t.Errorf("listed capacity %d, want the LUN's", v.CapacityBytes)
	}
	// Trident's map to the shared igroup holding the node's IQN already
	// publishes it.
	c.wantPublished("mapped to the shared igroup", NodeID)
	// Served through the existing map: no per-node igroup is needed.
	pc := c.publish()
	if pc["iscsiIgroup"] != "trident" || pc["iscsiLunNumber"] != itoa(lunID) || pc["filesystemType"] != "ext4" || pc["protocol"] != "block" {
		t.Errorf("publish context %v", pc)
	}
	if igs := s.IGroups(); len(igs) != 1 {
		t.Errorf("igroups %+v", igs)
	}
	c.unpublish()
	if maps := s.LUNMaps(); len(maps) != 1 || maps[0].IGroup != "trident" {
		t.Errorf("the shared igroup's map was touched: %+v", maps)
	}
	c.expandSnapshotCloneDelete()
	if luns := s.LUNs(); len(luns) != 0 {
		t.Errorf("LUNs left: %+v", luns)
	}
}

// Trident 26.06, ontap-san: per-node igroups "<node>-<tridentUUID>"; the
// volume is still published to our node through Trident's igroup when we
// take over.
func TestTrident2606SAN(t *testing.T) {
	p := Start(t, Options{Driver: config.DriverONTAPSAN})
	s := p.Sim
	var err error
	zero := 0
	lun := "/vol/" + tridentInternal + "/lun0"
	_, err = s.CreateVolume(ontapsim.VolumeSpec{Name: tridentInternal, Size: gib * 11 / 10, Thin: true, SnapshotPolicy: "none",
		SnapshotReserve: &zero, Comment: tridentLabels})
	must(t, err)
	_, err = s.CreateLUN(ontapsim.LUNSpec{Path: lun, Size: gib, Attributes: map[string]string{"com.netapp.ndvp.fstype": "xfs", "context": "csi"}})
	must(t, err)
	tridentIgroup := NodeID + "-" + tridentUUID
	_, err = s.CreateIGroup(tridentIgroup, "", "", NodeIQN)
	must(t, err)
	_, err = s.MapLUN(lun, tridentIgroup)
	must(t, err)
	c := &controllerCalls{t: t, s: s, o: Options{Driver: config.DriverONTAPSAN}, cap: mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}

	c.wantPublished("mapped to Trident's per-node igroup", NodeID)
	pc := c.publish()
	if pc["iscsiIgroup"] != tridentIgroup || pc["filesystemType"] != "xfs" || pc["iscsiLunSerial"] != s.LUNs()[0].Serial {
		t.Errorf("publish context %v", pc)
	}
	// Unpublish recognises Trident's per-node igroup and removes it empty.
	c.unpublish()
	if len(s.IGroups()) != 0 || len(s.LUNMaps()) != 0 {
		t.Errorf("after unpublish: igroups %+v, maps %+v", s.IGroups(), s.LUNMaps())
	}
	c.wantPublished("unpublished")
	// A new publish uses our own per-node igroup.
	pc = c.publish()
	if igs := s.IGroups(); len(igs) != 1 || igs[0].Name == tridentIgroup || pc["iscsiIgroup"] != igs[0].Name ||
		!strings.HasPrefix(igs[0].Name, NodeID+"-") {
		t.Errorf("igroups %+v, context %v", igs, pc)
	}
	c.unpublish()
	c.expandSnapshotCloneDelete()
	p.AssertClean(t)
}

func itoa(n int) string { b, _ := json.Marshal(n); return string(b) }
