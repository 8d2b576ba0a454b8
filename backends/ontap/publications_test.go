package ontap_test

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

var pubNodes = []backends.Node{
	{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1", IPs: []string{"10.1.1.1"}},
	{Name: "worker-2", IQN: "iqn.1994-05.com.redhat:w2", IPs: []string{"10.2.2.2"}},
	{Name: "worker-3", IQN: "iqn.1994-05.com.redhat:w3", IPs: []string{"10.3.3.3"}},
}

// pubDriver is one driver under the published-nodes tests: how to make
// it, and how an admin removes a node's access on ONTAP by hand.
type pubDriver struct {
	driver string
	extra  map[string]any
	access backends.AccessType
	// revoke removes node's access to vol with a REST call of the
	// simulator's own, behind the driver's back.
	revoke func(t *testing.T, s *ontapsim.Simulator, vol *backends.Volume, node backends.Node)
}

var nasKeys = map[string]any{"autoExportPolicy": true, "autoExportCIDRs": []string{"10.0.0.0/8"}, "emptyFlexvolDeferredDeletePeriod": "0"}

var pubDrivers = []pubDriver{
	{config.DriverONTAPNAS, nasKeys, backends.AccessMount, deleteNodeRule},
	{config.DriverONTAPNASEconomy, nasKeys, backends.AccessMount, deleteNodeRule},
	{config.DriverONTAPSAN, nil, backends.AccessBlock, deleteNodeMap},
	{config.DriverONTAPSANEconomy, nil, backends.AccessBlock, deleteNodeMap},
}

// deleteNodeRule deletes the rule admitting node from the volume's own
// export policy (named after its FlexVol or qtree).
func deleteNodeRule(t *testing.T, s *ontapsim.Simulator, vol *backends.Volume, node backends.Node) {
	t.Helper()
	p := policy(s, vol.Context["internalName"])
	if p == nil {
		t.Fatalf("no export policy %s", vol.Context["internalName"])
	}
	for _, r := range p.Rules {
		if slices.Contains(r.Clients, node.IPs[0]) {
			if st, _, err := s.Do("DELETE", "/api/protocols/nfs/export-policies/"+itoa(p.ID)+"/rules/"+itoa(r.Index), nil); err != nil || st != 200 {
				t.Fatalf("deleting rule %d of %s: %d %v", r.Index, p.Name, st, err)
			}
			return
		}
	}
	t.Fatalf("policy %s has no rule for %s: %+v", p.Name, node.Name, p.Rules)
}

// deleteNodeMap unmaps the volume's LUN from the node's igroup.
func deleteNodeMap(t *testing.T, s *ontapsim.Simulator, vol *backends.Volume, node backends.Node) {
	t.Helper()
	var lunUUID, lunPath string
	for _, l := range s.LUNs() {
		if strings.HasSuffix(l.Path, "/"+vol.Context["internalName"]) || l.Volume == vol.Context["internalName"] {
			lunUUID, lunPath = l.UUID, l.Path
		}
	}
	for _, m := range s.LUNMaps() {
		if m.LUNPath != lunPath || !strings.HasPrefix(m.IGroup, node.Name+"-") {
			continue
		}
		for _, ig := range s.IGroups() {
			if ig.Name == m.IGroup {
				if st, _, err := s.Do("DELETE", "/api/protocols/san/lun-maps/"+lunUUID+"/"+ig.UUID, nil); err != nil || st != 200 {
					t.Fatalf("unmapping %s from %s: %d %v", lunPath, ig.Name, st, err)
				}
				return
			}
		}
	}
	t.Fatalf("LUN %s is not mapped to %s's igroup: %+v", lunPath, node.Name, s.LUNMaps())
}

func publishedNodes(t *testing.T, b backends.Backend, vols ...*backends.Volume) map[string][]string {
	t.Helper()
	got, err := b.(backends.PublicationLister).PublishedNodes(ctxT(t), vols, pubNodes)
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func listed(t *testing.T, b backends.Backend) []*backends.Volume {
	t.Helper()
	vols, err := b.ListVolumes(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	return vols
}

// Published nodes follow ONTAP: a rule or map removed by hand makes the
// node unpublished, and a publish (what external-attacher does then)
// brings it back (Trident #965, #1181).
func TestPublishedNodesFollowONTAP(t *testing.T) {
	for _, d := range pubDrivers {
		t.Run(d.driver, func(t *testing.T) {
			b, s := simBackend(t, d.driver, ontapsim.Config{}, d.extra)
			ctx := ctxT(t)
			v1 := create(t, b, "pvc-p1", gib, d.access)
			v2 := create(t, b, "pvc-p2", gib, d.access)
			publish := func(v *backends.Volume, n backends.Node) {
				t.Helper()
				if _, err := b.Publish(ctx, lookup(t, b, v.ID), &backends.PublishRequest{Node: n, AccessType: d.access}); err != nil {
					t.Fatalf("publish %s on %s: %v", v.ID, n.Name, err)
				}
			}
			check := func(step string, want map[string][]string) {
				t.Helper()
				if got := publishedNodes(t, b, listed(t, b)...); !maps.EqualFunc(got, want, slices.Equal) {
					t.Errorf("%s: published %v, want %v", step, got, want)
				}
			}
			check("nothing published", map[string][]string{"pvc-p1": {}, "pvc-p2": {}})
			publish(v1, pubNodes[0])
			publish(v1, pubNodes[1])
			publish(v2, pubNodes[1])
			check("published", map[string][]string{"pvc-p1": {"worker-1", "worker-2"}, "pvc-p2": {"worker-2"}})

			d.revoke(t, s, lookup(t, b, v1.ID), pubNodes[0])
			check("worker-1's access removed on ONTAP", map[string][]string{"pvc-p1": {"worker-2"}, "pvc-p2": {"worker-2"}})

			publish(v1, pubNodes[0])
			check("published again", map[string][]string{"pvc-p1": {"worker-1", "worker-2"}, "pvc-p2": {"worker-2"}})

			n2 := pubNodes[1]
			if err := b.Unpublish(ctx, lookup(t, b, v2.ID), n2.Name, &n2); err != nil {
				t.Fatal(err)
			}
			check("unpublished", map[string][]string{"pvc-p1": {"worker-1", "worker-2"}, "pvc-p2": {}})
		})
	}
}

// A page costs the same requests with 1 volume as with 12: one listing
// per kind, never one per volume.
func TestPublishedNodesRequests(t *testing.T) {
	want := map[string]map[string]int64{
		config.DriverONTAPNAS:        {"GET /api/protocols/nfs/export-policies": 1},
		config.DriverONTAPNASEconomy: {"GET /api/protocols/nfs/export-policies": 1, "GET /api/storage/volumes": 1},
		config.DriverONTAPSAN:        {"GET /api/protocols/san/lun-maps": 1, "GET /api/protocols/san/igroups": 1},
		config.DriverONTAPSANEconomy: {"GET /api/protocols/san/lun-maps": 1, "GET /api/protocols/san/igroups": 1},
	}
	for _, d := range pubDrivers {
		t.Run(d.driver, func(t *testing.T) {
			b, s := simBackend(t, d.driver, ontapsim.Config{}, d.extra)
			ctx := ctxT(t)
			counts := map[int]map[string]int64{}
			made := 0
			for _, n := range []int{1, 12} {
				for ; made < n; made++ {
					v := create(t, b, fmt.Sprintf("pvc-n%d", made), gib, d.access)
					if _, err := b.Publish(ctx, v, &backends.PublishRequest{Node: pubNodes[made%3], AccessType: d.access}); err != nil {
						t.Fatal(err)
					}
				}
				vols := listed(t, b)
				if len(vols) != n {
					t.Fatalf("listed %d volumes, want %d", len(vols), n)
				}
				counts[n] = requestsOf(t, s, func() error {
					got, err := b.(backends.PublicationLister).PublishedNodes(ctx, vols, pubNodes)
					for i, v := range vols {
						if id := v.ID; len(got[id]) != 1 {
							return fmt.Errorf("volume %d (%s) published on %v, want one node", i, id, got[id])
						}
					}
					return err
				})
			}
			if !maps.Equal(counts[1], want[d.driver]) || !maps.Equal(counts[12], want[d.driver]) {
				t.Errorf("requests with 1 volume %v, with 12 %v; want %v for both", counts[1], counts[12], want[d.driver])
			}
		})
	}
}
