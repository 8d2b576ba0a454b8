package sanity

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

var allDrivers = []string{config.DriverONTAPNAS, config.DriverONTAPNASEconomy, config.DriverONTAPSAN, config.DriverONTAPSANEconomy}

func isSAN(driver string) bool {
	return driver == config.DriverONTAPSAN || driver == config.DriverONTAPSANEconomy
}

func capabilityFor(driver string) *csi.VolumeCapability {
	if isSAN(driver) {
		return blockCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
	}
	return mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
}

// publishedOn returns ListVolumes' published node IDs by volume ID, over
// every page of size max.
func publishedOn(t *testing.T, p *Plugin, max int32) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	tok := ""
	for {
		resp, err := p.Controller.ListVolumes(Ctx(t), &csi.ListVolumesRequest{MaxEntries: max, StartingToken: tok})
		if err != nil {
			t.Fatalf("ListVolumes: %v", err)
		}
		for _, e := range resp.Entries {
			out[e.Volume.VolumeId] = slices.Clone(e.GetStatus().GetPublishedNodeIds())
		}
		if tok = resp.NextToken; tok == "" {
			return out
		}
	}
}

// removeAccess deletes, with the simulator's own REST calls as an admin
// would, the export rule of the node (ontap-nas: the FlexVol's policy;
// economy: the qtree's) or the LUN's map to the node's igroup. It reports
// whether it found one.
func removeAccess(t *testing.T, s *ontapsim.Simulator, driver, internalName string) bool {
	t.Helper()
	do := func(path string) {
		t.Helper()
		if st, _, err := s.Do("DELETE", path, nil); err != nil || st != 200 {
			t.Fatalf("DELETE %s: %d %v", path, st, err)
		}
	}
	if !isSAN(driver) {
		for _, pol := range s.ExportPolicies() {
			if pol.Name != internalName {
				continue
			}
			for _, r := range pol.Rules {
				if slices.Contains(r.Clients, NodeIPs[0]) {
					do("/api/protocols/nfs/export-policies/" + strconv.FormatInt(pol.ID, 10) + "/rules/" + strconv.FormatInt(r.Index, 10))
					return true
				}
			}
		}
		return false
	}
	for _, l := range s.LUNs() {
		if l.Path != "/vol/"+internalName+"/lun0" && !strings.HasSuffix(l.Path, "/"+internalName) {
			continue
		}
		for _, m := range s.LUNMaps() {
			if m.LUNPath != l.Path || !strings.HasPrefix(m.IGroup, NodeID+"-") {
				continue
			}
			for _, ig := range s.IGroups() {
				if ig.Name == m.IGroup {
					do("/api/protocols/san/lun-maps/" + l.UUID + "/" + ig.UUID)
					return true
				}
			}
		}
	}
	return false
}

// The drift repair end to end through the CSI controller: ListVolumes
// reports what ONTAP grants, so a rule or map removed on ONTAP drops the
// node from it; the ControllerPublishVolume that external-attacher then
// sends puts the rule or map back, and ListVolumes lists the node again
// (Trident #965, #1181).
func TestListVolumesPublishedNodesRepair(t *testing.T) {
	for _, driver := range allDrivers {
		t.Run(driver, func(t *testing.T) {
			p := Start(t, Options{Driver: driver})
			ctx := Ctx(t)
			vc := capabilityFor(driver)
			created, err := p.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: "pvc-drift", VolumeCapabilities: []*csi.VolumeCapability{vc}})
			if err != nil {
				t.Fatal(err)
			}
			id, internal := created.Volume.VolumeId, created.Volume.VolumeContext["internalName"]
			pub := &csi.ControllerPublishVolumeRequest{VolumeId: id, NodeId: NodeID, VolumeCapability: vc}
			want := func(step string, nodes ...string) {
				t.Helper()
				if nodes == nil {
					nodes = []string{}
				}
				got := publishedOn(t, p, 0)
				if !maps.EqualFunc(got, map[string][]string{id: nodes}, func(a, b []string) bool { return slices.Equal(a, b) }) {
					t.Errorf("%s: ListVolumes published %v, want %s on %v", step, got, id, nodes)
				}
			}
			want("created")
			if _, err := p.Controller.ControllerPublishVolume(ctx, pub); err != nil {
				t.Fatal(err)
			}
			want("published", NodeID)
			if !removeAccess(t, p.Sim, driver, internal) {
				t.Fatalf("no rule or map of %s for %s on ONTAP", internal, NodeID)
			}
			want("access removed on ONTAP")
			if _, err := p.Controller.ControllerPublishVolume(ctx, pub); err != nil {
				t.Fatal(err)
			}
			want("published again", NodeID)
			// The rule or map itself is back, not just reported.
			if !removeAccess(t, p.Sim, driver, internal) {
				t.Errorf("publish did not put the rule or map back")
			}
			if _, err := p.Controller.ControllerPublishVolume(ctx, pub); err != nil {
				t.Fatal(err)
			}
			if _, err := p.Controller.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: NodeID}); err != nil {
				t.Fatal(err)
			}
			want("unpublished")
			if _, err := p.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
				t.Fatal(err)
			}
			p.AssertClean(t)
		})
	}
}

// ListVolumes costs the same ONTAP requests with 2 published volumes as
// with 10, in one page or in pages of 3 per page: published nodes come
// from one listing per kind per page.
func TestListVolumesRequestsDoNotGrow(t *testing.T) {
	for _, driver := range allDrivers {
		t.Run(driver, func(t *testing.T) {
			p := Start(t, Options{Driver: driver})
			ctx := Ctx(t)
			vc := capabilityFor(driver)
			requests := func(max int32) (int64, map[string][]string) {
				before := p.Sim.Stats()
				got := publishedOn(t, p, max)
				after := p.Sim.Stats()
				var n int64
				for _, k := range after.Keys() {
					n += after.Endpoints[k].Requests - before.Endpoints[k].Requests
				}
				return n, got
			}
			made := 0
			perN := map[int]int64{}
			for _, n := range []int{2, 10} {
				for ; made < n; made++ {
					v, err := p.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{Name: fmt.Sprintf("pvc-count-%02d", made), VolumeCapabilities: []*csi.VolumeCapability{vc}})
					if err != nil {
						t.Fatal(err)
					}
					if _, err := p.Controller.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{VolumeId: v.Volume.VolumeId, NodeId: NodeID, VolumeCapability: vc}); err != nil {
						t.Fatal(err)
					}
				}
				publishedOn(t, p, 0) // caches warm
				reqs, got := requests(0)
				if len(got) != n {
					t.Fatalf("%d volumes listed, want %d", len(got), n)
				}
				for id, nodes := range got {
					if !slices.Equal(nodes, []string{NodeID}) {
						t.Errorf("%s published on %v, want [%s]", id, nodes, NodeID)
					}
				}
				perN[n] = reqs
				paged, _ := requests(3)
				pages := int64((n + 2) / 3)
				t.Logf("%s: %d volumes: %d ONTAP requests in one page, %d in %d pages of 3", driver, n, reqs, paged, pages)
				if paged != pages*reqs {
					t.Errorf("%d volumes in %d pages: %d requests, want %d per page (%d)", n, pages, paged, reqs, pages*reqs)
				}
			}
			if perN[2] != perN[10] {
				t.Errorf("ListVolumes: %d ONTAP requests with 2 volumes, %d with 10", perN[2], perN[10])
			}
		})
	}
}

// publishedTo returns the nodes ListVolumes reports Trident's volume
// published to, through a new controller.
func (c *controllerCalls) publishedTo() []string {
	c.t.Helper()
	resp, err := c.fresh().ListVolumes(Ctx(c.t), &csi.ListVolumesRequest{})
	if err != nil {
		c.t.Fatalf("list: %v", err)
	}
	for _, e := range resp.Entries {
		if e.Volume.VolumeId == tridentPV {
			return e.GetStatus().GetPublishedNodeIds()
		}
	}
	c.t.Fatalf("ListVolumes does not report %s", tridentPV)
	return nil
}

// wantPublished checks publishedTo against nodes.
func (c *controllerCalls) wantPublished(step string, nodes ...string) {
	c.t.Helper()
	if got := c.publishedTo(); !slices.Equal(got, nodes) {
		c.t.Errorf("%s: ListVolumes reports %s published to %v, want %v", step, tridentPV, got, nodes)
	}
}
