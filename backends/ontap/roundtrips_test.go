package ontap_test

import (
	"errors"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// requestsOf runs f and returns the requests it sent, by endpoint.
func requestsOf(t *testing.T, s *ontapsim.Simulator, f func() error) map[string]int64 {
	t.Helper()
	before := s.Stats()
	if err := f(); err != nil {
		t.Fatal(err)
	}
	after := s.Stats()
	out := map[string]int64{}
	for _, k := range after.Keys() {
		if d := after.Endpoints[k].Requests - before.Endpoints[k].Requests; d > 0 {
			out[k] = d
		}
	}
	return out
}

// An ontap-nas publish with autoExportPolicy makes the volume's policy
// with the node's rule in one request; later publishes and unpublishes
// read the policy with its rules in one.
func TestNASPublishRequests(t *testing.T) {
	const (
		policies = "/api/protocols/nfs/export-policies"
		rules    = policies + "/{policy.id}/rules"
	)
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, map[string]any{
		"autoExportPolicy": true, "autoExportCIDRs": []string{"10.0.0.0/8"},
	})
	ctx := ctxT(t)
	vol := create(t, b, "pvc-r", gib, backends.AccessMount)
	vol = lookup(t, b, vol.ID)
	n1 := backends.Node{Name: "n1", IPs: []string{"10.1.1.1"}}
	n2 := backends.Node{Name: "n2", IPs: []string{"10.2.2.2"}}
	publish := func(n backends.Node) func() error {
		return func() error {
			_, err := b.Publish(ctx, vol, &backends.PublishRequest{Node: n, AccessType: backends.AccessMount})
			return err
		}
	}
	unpublish := func(n backends.Node) func() error {
		return func() error { return b.Unpublish(ctx, vol, n.Name, &n) }
	}
	for _, step := range []struct {
		name  string
		call  func() error
		want  map[string]int64
		rules []string // the policy's afterwards (ruleSummary)
	}{
		{"first publish", publish(n1), map[string]int64{
			"POST " + policies: 1, "PATCH /api/storage/volumes/{uuid}": 1,
		}, []string{"10.1.1.1:any"}},
		{"publish again", publish(n1), map[string]int64{"GET " + policies: 1}, []string{"10.1.1.1:any"}},
		{"second node", publish(n2), map[string]int64{"GET " + policies: 1, "POST " + rules: 1},
			[]string{"10.1.1.1:any", "10.2.2.2:any"}},
		{"unpublish one", unpublish(n1), map[string]int64{"GET " + policies: 1, "DELETE " + rules + "/{index}": 1},
			[]string{"10.2.2.2:any"}},
		// The policy goes with its rules (docs/design/ontap-rest.md §10.3).
		{"unpublish the last", unpublish(n2), map[string]int64{
			"GET " + policies: 1, "PATCH /api/storage/volumes/{uuid}": 1, "DELETE " + policies + "/{id}": 1,
		}, nil},
	} {
		if got := requestsOf(t, s, step.call); !maps.Equal(got, step.want) {
			t.Errorf("%s: requests %v, want %v", step.name, got, step.want)
		}
		if got := ruleSummary(s, "trident_pvc_r"); !slices.Equal(got, step.rules) {
			t.Errorf("%s: rules %v, want %v", step.name, got, step.rules)
		}
	}
}

// An ontap-san create sets Trident's LUN attributes in the LUN's POST.
func TestSANCreateRequests(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, nil)
	create(t, b, "pvc-warm", gib, backends.AccessMount) // connects
	pools, err := b.Pools(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	got := requestsOf(t, s, func() error {
		_, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: "pvc-c", Pool: pools[0].Name, SizeBytes: gib, AccessType: backends.AccessMount, FSType: "xfs"})
		return err
	})
	want := map[string]int64{"POST /api/storage/volumes": 1, "POST /api/storage/luns": 1}
	if !maps.Equal(got, want) {
		t.Errorf("requests %v, want %v", got, want)
	}
	luns := s.LUNs()
	i := slices.IndexFunc(luns, func(l ontapsim.LUNInfo) bool { return l.Path == "/vol/trident_pvc_c/lun0" })
	if i < 0 || luns[i].Attributes["com.netapp.ndvp.fstype"] != "xfs" || luns[i].Attributes["context"] != "csi" {
		t.Errorf("LUNs %+v", luns)
	}
}

// A publish reuses the iSCSI LIFs an earlier one read for ontap.LIFTTL; a
// list in which no LIF is up is read again at once, and a restarted
// controller reads them afresh.
func TestSANPublishLIFCache(t *testing.T) {
	const lifs = "GET /api/network/ip/interfaces"
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{Nodes: 1, ISCSILIFs: []string{"127.0.0.11", "127.0.0.12"}}, nil)
	ctx := ctxT(t)
	clock := time.Now()
	ontap.SetNow(t, func() time.Time { return clock })
	var vols []*backends.Volume
	for _, n := range []string{"pvc-1", "pvc-2", "pvc-3"} {
		vols = append(vols, create(t, b, n, gib, backends.AccessMount))
	}
	restarted := simBackendOpts(t, s, config.DriverONTAPSAN, nil, ontap.Options{})
	for _, step := range []struct {
		name    string
		before  func()
		b       backends.Backend
		vol     int
		reads   int64
		portals string // "" : the publish fails, no LIF being up
	}{
		{"first publish", func() {}, b, 0, 1, "127.0.0.11,127.0.0.12"},
		{"next publish", func() {}, b, 1, 0, "127.0.0.11,127.0.0.12"},
		{"a LIF went down, within the TTL", func() { setLIF(t, s, "127.0.0.12", false) }, b, 2, 0, "127.0.0.11,127.0.0.12"},
		{"after the TTL", func() { clock = clock.Add(ontap.LIFTTL) }, b, 0, 1, "127.0.0.11"},
		{"every LIF down", func() { setLIF(t, s, "127.0.0.11", false); clock = clock.Add(ontap.LIFTTL) }, b, 1, 1, ""},
		{"a LIF back up, within the TTL", func() { setLIF(t, s, "127.0.0.12", true) }, b, 1, 1, "127.0.0.12"},
		{"restarted controller", func() {}, restarted, 2, 1, "127.0.0.12"},
	} {
		step.before()
		var pc map[string]string
		var err error
		vol := lookup(t, step.b, vols[step.vol].ID)
		got := requestsOf(t, s, func() error {
			pc, err = step.b.Publish(ctx, vol, &backends.PublishRequest{
				Node: backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1"}, AccessType: backends.AccessMount,
			})
			return nil
		})[lifs]
		if got != step.reads {
			t.Errorf("%s: %d LIF reads, want %d", step.name, got, step.reads)
		}
		switch {
		case step.portals == "" && !errors.Is(err, backends.ErrUnavailable):
			t.Errorf("%s: %v, want ErrUnavailable", step.name, err)
		case step.portals != "" && err != nil:
			t.Errorf("%s: %v", step.name, err)
		case step.portals != "":
			var portals []string
			for i := 1; pc["p"+strconv.Itoa(i)] != ""; i++ {
				portals = append(portals, pc["p"+strconv.Itoa(i)])
			}
			if strings.Join(portals, ",") != step.portals {
				t.Errorf("%s: portals %v, want %s", step.name, portals, step.portals)
			}
		}
	}
}

func setLIF(t *testing.T, s *ontapsim.Simulator, ip string, up bool) {
	t.Helper()
	if err := s.SetLIFUp(ip, up); err != nil {
		t.Fatal(err)
	}
}

// An ontap-san delete reads the LUN's maps only when the LUN is mapped.
func TestSANDeleteRequests(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, nil)
	ctx := ctxT(t)
	published := create(t, b, "pvc-p", gib, backends.AccessMount)
	if _, err := b.Publish(ctx, published, &backends.PublishRequest{
		Node: backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1"}, AccessType: backends.AccessMount,
	}); err != nil {
		t.Fatal(err)
	}
	plain := create(t, b, "pvc-u", gib, backends.AccessMount)
	for _, step := range []struct {
		vol  *backends.Volume
		maps int64
	}{{plain, 0}, {published, 1}} { // the LUN's maps; the igroup goes unless mapped, in one request
		vol := lookup(t, b, step.vol.ID)
		got := requestsOf(t, s, func() error { return b.DeleteVolume(ctx, vol) })
		if got["GET /api/protocols/san/lun-maps"] != step.maps || got["DELETE /api/storage/volumes/{uuid}"] != 1 ||
			got["GET /api/protocols/san/igroups"] != 0 {
			t.Errorf("delete %s: requests %v", vol.ID, got)
		}
	}
	if len(s.LUNMaps()) != 0 || len(s.IGroups()) != 0 || len(s.LUNs()) != 0 {
		t.Errorf("left: maps %v, igroups %v, LUNs %v", s.LUNMaps(), s.IGroups(), s.LUNs())
	}
}

// Publish, unpublish and delete of a remembered volume need no lookup:
// the requests of each, the lookup included, as the controller makes them.
func TestRememberedVolumeRequests(t *testing.T) {
	for _, tc := range []struct {
		driver string
		extra  map[string]any
		// requests of publish, unpublish, delete
		want [3]map[string]int64
	}{
		{config.DriverONTAPNAS, nasAutoPolicy, [3]map[string]int64{
			// The create's answer carries no UUID: the first call reads it.
			{"GET /api/storage/volumes": 1, "POST /api/protocols/nfs/export-policies": 1, "PATCH /api/storage/volumes/{uuid}": 1},
			{"GET /api/protocols/nfs/export-policies": 1, "PATCH /api/storage/volumes/{uuid}": 1, "DELETE /api/protocols/nfs/export-policies/{id}": 1},
			{"GET /api/protocols/nfs/export-policies": 1, "DELETE /api/storage/volumes/{uuid}": 1},
		}},
		{config.DriverONTAPSAN, nil, [3]map[string]int64{
			{"GET /api/protocols/san/igroups": 1, "POST /api/protocols/san/igroups": 1, "POST /api/protocols/san/lun-maps": 1, "GET /api/network/ip/interfaces": 1},
			{"DELETE /api/protocols/san/lun-maps/{lun.uuid}/{igroup.uuid}": 1, "DELETE /api/protocols/san/igroups/{uuid}": 1},
			{"GET /api/protocols/san/lun-maps": 1, "DELETE /api/storage/volumes/{uuid}": 1},
		}},
	} {
		t.Run(tc.driver, func(t *testing.T) {
			b, s := simBackend(t, tc.driver, ontapsim.Config{}, tc.extra)
			ctx := ctxT(t)
			pools, err := b.Pools(ctx)
			must(t, err)
			_, err = b.CreateVolume(ctx, &backends.CreateRequest{Name: "pvc-r", Pool: pools[0].Name, SizeBytes: gib, AccessType: backends.AccessMount})
			must(t, err)
			steps := []func() error{
				func() error {
					_, err := b.Publish(ctx, remembered(t, b, "pvc-r"), &backends.PublishRequest{Node: cacheNode, AccessType: backends.AccessMount})
					return err
				},
				func() error { return b.Unpublish(ctx, remembered(t, b, "pvc-r"), cacheNode.Name, &cacheNode) },
				func() error { return b.DeleteVolume(ctx, remembered(t, b, "pvc-r")) },
			}
			for i, step := range steps {
				if got := requestsOf(t, s, step); !maps.Equal(got, tc.want[i]) {
					t.Errorf("call %d: requests %v, want %v", i, got, tc.want[i])
				}
			}
			if len(s.Volumes()) != 0 && volumeNamed(s, "trident_pvc_r") {
				t.Error("volume left on ONTAP")
			}
			if known(b, "pvc-r") {
				t.Error("a deleted volume is still remembered")
			}
		})
	}
}
