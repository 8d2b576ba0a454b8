package ontap_test

import (
	"testing"

	"github.com/sirupsen/logrus"
	logtest "github.com/sirupsen/logrus/hooks/test"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// lunIDFixture is a node and three volumes of one backend on a simulator.
type lunIDFixture struct {
	t    *testing.T
	b    backends.Backend
	s    *ontapsim.Simulator
	node backends.Node
	v    [3]*backends.Volume
	// serial is each volume's LUN serial, from its publish.
	serial [3]string
}

func (f *lunIDFixture) publish(b backends.Backend, i int) map[string]string {
	f.t.Helper()
	pc, err := b.Publish(ctxT(f.t), lookup(f.t, b, f.v[i].ID), &backends.PublishRequest{Node: f.node, AccessType: backends.AccessMount})
	if err != nil {
		f.t.Fatalf("publish v%d: %v", i, err)
	}
	f.serial[i] = pc["iscsiLunSerial"]
	return pc
}

func (f *lunIDFixture) unpublish(i int) {
	f.t.Helper()
	if err := f.b.Unpublish(ctxT(f.t), lookup(f.t, f.b, f.v[i].ID), f.node.Name, &f.node); err != nil {
		f.t.Fatalf("unpublish v%d: %v", i, err)
	}
}

// startedBackend is a new driver instance over the same simulator, a
// restarted controller's, checked as the controller's inventory checks
// every backend when it starts (Pools connects it).
func startedBackend(f *lunIDFixture, driver string) backends.Backend {
	f.t.Helper()
	b, _ := simBackendOn(f.t, f.s, driver, nil)
	if _, err := b.Pools(ctxT(f.t)); err != nil {
		f.t.Fatal(err)
	}
	return b
}

// lun is the simulator's LUN of volume i, by the serial its publish
// returned.
func (f *lunIDFixture) lun(i int) ontapsim.LUNInfo {
	f.t.Helper()
	for _, l := range f.s.LUNs() {
		if l.Serial == f.serial[i] {
			return l
		}
	}
	f.t.Fatalf("no LUN of serial %q (volume %d): %+v", f.serial[i], i, f.s.LUNs())
	return ontapsim.LUNInfo{}
}

// unmapByHand deletes volume i's map to the node's igroup as an admin
// would, through ONTAP's REST API.
func (f *lunIDFixture) unmapByHand(i int) {
	f.t.Helper()
	igs := f.s.IGroups()
	if len(igs) != 1 {
		f.t.Fatalf("igroups %+v", igs)
	}
	if _, _, err := f.s.Do("DELETE", "/api/protocols/san/lun-maps/"+f.lun(i).UUID+"/"+igs[0].UUID, nil); err != nil {
		f.t.Fatal(err)
	}
}

// A publish that finds no map of the LUN to the node's igroup makes it at
// the LUN ID the node last had, when this process knows it (from a map it
// made or found, or from a ListVolumes), so that csi-attacher's repair of a
// map removed by hand brings the LUN back where the node's device sits
// (docs/design/ontap-rest.md §10.4). An ID taken meanwhile falls back to
// the lowest free one with a warning. A first publish, and one after an
// unpublish, asks for no ID and sends what it did before.
func TestSANMapKeepsLUNID(t *testing.T) {
	const (
		postMap  = "POST /api/protocols/san/lun-maps"
		listMaps = "GET /api/protocols/san/lun-maps"
	)
	for _, driver := range []string{config.DriverONTAPSAN, config.DriverONTAPSANEconomy} {
		for _, tc := range []struct {
			name string
			// prepare leaves volume 1 to publish, with the backend to
			// publish it with.
			prepare  func(f *lunIDFixture) backends.Backend
			wantID   int
			requests map[string]int64
			warned   bool
		}{
			{"first publish", func(f *lunIDFixture) backends.Backend {
				f.publish(f.b, 0) // LUN 0
				return f.b
			}, 1, map[string]int64{postMap: 1, listMaps: 0}, false},
			{"publish after an unpublish", func(f *lunIDFixture) backends.Backend {
				f.publish(f.b, 2) // LUN 0
				f.publish(f.b, 0) // LUN 1
				f.publish(f.b, 1) // LUN 2
				f.unpublish(1)    // 2 free
				f.unpublish(0)    // 1 free
				return f.b
			}, 1, map[string]int64{postMap: 1, listMaps: 0}, false},
			{"map removed by hand", func(f *lunIDFixture) backends.Backend {
				f.publish(f.b, 0) // LUN 0
				f.publish(f.b, 1) // LUN 1
				f.unpublish(0)    // 0 free
				f.unmapByHand(1)
				return f.b
			}, 1, map[string]int64{postMap: 1, listMaps: 0}, false},
			{"ID taken meanwhile", func(f *lunIDFixture) backends.Backend {
				f.publish(f.b, 0) // LUN 0
				f.publish(f.b, 1) // LUN 1
				f.unmapByHand(1)
				f.publish(f.b, 2) // LUN 1, freed
				return f.b
			}, 2, map[string]int64{postMap: 2, listMaps: 1}, true},
			// ONTAP's code for a taken ID is a guess: another refusal of
			// the POST that asked for an ID (here an unknown code, read
			// as "invalid") falls back too.
			{"ID refused with another code", func(f *lunIDFixture) backends.Backend {
				f.publish(f.b, 0) // LUN 0
				f.publish(f.b, 1) // LUN 1
				f.unpublish(0)    // 0 free
				f.unmapByHand(1)
				f.s.SetFaults([]ontapsim.FaultRule{{Method: "POST", Path: "/protocols/san/lun-maps", Rate: 1, Kind: ontapsim.FaultJob, Code: 1254399, Limit: 1}})
				return f.b
			}, 0, map[string]int64{postMap: 2, listMaps: 1}, true},
			{"new controller after a ListVolumes", func(f *lunIDFixture) backends.Backend {
				f.publish(f.b, 0) // LUN 0
				f.publish(f.b, 1) // LUN 1
				b2, _ := simBackendOn(f.t, f.s, driver, nil)
				vols := []*backends.Volume{lookup(f.t, b2, f.v[0].ID), lookup(f.t, b2, f.v[1].ID)}
				got, err := b2.(backends.PublicationLister).PublishedNodes(ctxT(f.t), vols, []backends.Node{f.node})
				if err != nil || len(got[f.v[1].ID]) != 1 {
					f.t.Fatalf("published nodes %v, %v", got, err)
				}
				f.unpublish(0)
				f.unmapByHand(1)
				return b2
			}, 1, map[string]int64{postMap: 1, listMaps: 0}, false},
			// A controller started (its backend checked, as the
			// inventory does at start) and the map removed before its
			// first ListVolumes: the start's one listing of the maps
			// knows the ID; the publish reads no maps.
			{"new controller, map removed before its first ListVolumes", func(f *lunIDFixture) backends.Backend {
				f.publish(f.b, 0) // LUN 0
				f.publish(f.b, 1) // LUN 1
				b2 := startedBackend(f, driver)
				f.unpublish(0)
				f.unmapByHand(1)
				return b2
			}, 1, map[string]int64{postMap: 1, listMaps: 0}, false},
			// The start's listing failed: a publish that needs an ID it
			// does not know reads the maps then, once; it cannot know a
			// map already removed and maps at the lowest free ID.
			{"new controller whose start could not read the maps", func(f *lunIDFixture) backends.Backend {
				f.publish(f.b, 0) // LUN 0
				f.publish(f.b, 1) // LUN 1
				f.s.SetFaults([]ontapsim.FaultRule{{Method: "GET", Path: "/protocols/san/lun-maps", Rate: 1, Kind: ontapsim.FaultJob, Code: 1254399, Limit: 1}})
				b2 := startedBackend(f, driver)
				f.unpublish(0)
				f.unmapByHand(1)
				return b2
			}, 0, map[string]int64{postMap: 1, listMaps: 1}, false},
			// What it cannot do: a controller that starts after the map
			// was removed never saw it, and maps at the lowest free ID.
			{"new controller started after the removal", func(f *lunIDFixture) backends.Backend {
				f.publish(f.b, 0) // LUN 0
				f.publish(f.b, 1) // LUN 1
				f.unpublish(0)
				f.unmapByHand(1)
				return startedBackend(f, driver)
			}, 0, map[string]int64{postMap: 1, listMaps: 0}, false},
		} {
			t.Run(driver+"/"+tc.name, func(t *testing.T) {
				hook := logtest.NewGlobal()
				t.Cleanup(func() { logrus.StandardLogger().ReplaceHooks(logrus.LevelHooks{}) })
				b, s := simBackend(t, driver, ontapsim.Config{}, nil)
				f := &lunIDFixture{t: t, b: b, s: s, node: backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1"}}
				for i := range f.v {
					f.v[i] = create(t, b, pvName(i+1), gib, backends.AccessMount)
				}
				pb := tc.prepare(f)
				var pc map[string]string
				got := requestsOf(t, s, func() error { pc = f.publish(pb, 1); return nil })
				for ep, want := range tc.requests {
					if got[ep] != want {
						t.Errorf("%d × %s, want %d (all: %v)", got[ep], ep, want, got)
					}
				}
				igs := s.IGroups()
				if len(igs) != 1 {
					t.Fatalf("igroups %+v", igs)
				}
				if id := lunID(t, s, f.lun(1).Path, igs[0].Name); id != tc.wantID || pc["iscsiLunNumber"] != itoa(int64(id)) {
					t.Errorf("mapped at LUN %d, publish context %s, want %d", id, pc["iscsiLunNumber"], tc.wantID)
				}
				warned := false
				for _, e := range hook.AllEntries() {
					if e.Level == logrus.WarnLevel && e.Data["previousLunID"] != nil {
						warned = true
						if e.Data["previousLunID"] != 1 || e.Data["lunID"] != tc.wantID {
							t.Errorf("warning %v", e.Data)
						}
					}
				}
				if warned != tc.warned {
					t.Errorf("warned %v, want %v", warned, tc.warned)
				}
			})
		}
	}
}

// The LUN IDs a restarted controller needs cost one listing of the maps
// per SAN backend start, none per publish: the start check lists them once
// (a second check, and the publishes after, none), and an ontap-nas start
// none.
func TestStartReadsLUNMapsOnce(t *testing.T) {
	const listMaps = "GET /api/protocols/san/lun-maps"
	for _, tc := range []struct {
		driver string
		want   int64
	}{{config.DriverONTAPSAN, 1}, {config.DriverONTAPSANEconomy, 1}, {config.DriverONTAPNAS, 0}} {
		t.Run(tc.driver, func(t *testing.T) {
			s, err := ontapsim.New(ontapsim.Config{})
			must(t, err)
			t.Cleanup(func() { s.Close() })
			_, err = s.Start("127.0.0.1:0", true)
			must(t, err)
			b, _ := simBackendOn(t, s, tc.driver, nil)
			pools := func() error { _, err := b.Pools(ctxT(t)); return err }
			if got := requestsOf(t, s, pools)[listMaps]; got != tc.want {
				t.Errorf("start check: %d × %s, want %d", got, listMaps, tc.want)
			}
			if got := requestsOf(t, s, pools)[listMaps]; got != 0 {
				t.Errorf("second check: %d × %s, want 0", got, listMaps)
			}
			if tc.driver == config.DriverONTAPNAS {
				return
			}
			node := backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1"}
			for _, id := range []string{pvName(1), pvName(2)} {
				v := create(t, b, id, gib, backends.AccessMount)
				got := requestsOf(t, s, func() error {
					_, err := b.Publish(ctxT(t), v, &backends.PublishRequest{Node: node, AccessType: backends.AccessMount})
					return err
				})
				if got[listMaps] != 0 {
					t.Errorf("publish of %s: %d × %s, want 0 (%v)", id, got[listMaps], listMaps, got)
				}
			}
		})
	}
}
