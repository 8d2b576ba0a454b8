package ontap_test

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"sync"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// Trident's names (ontap_san_economy.go): pools "trident_lun_pool_" +
// storagePrefix + ten upper-case letters, LUNs /vol/<pool>/<internal name>,
// snapshot LUNs "<lun>_snapshot_<snapshot>" with '-' made '_'.
var tridentLUNPoolRE = regexp.MustCompile(`^trident_lun_pool_trident_[A-Z]{10}$`)

func sanEconomy(t *testing.T, sim ontapsim.Config, extra map[string]any) (backends.Backend, *ontapsim.Simulator) {
	t.Helper()
	return simBackend(t, config.DriverONTAPSANEconomy, sim, extra)
}

func lunsIn(s *ontapsim.Simulator, pool string) []ontapsim.LUNInfo {
	var out []ontapsim.LUNInfo
	for _, l := range s.LUNs() {
		if strings.HasPrefix(l.Path, "/vol/"+pool+"/") {
			out = append(out, l)
		}
	}
	return out
}

func TestSANEconomyLayoutIsTridents(t *testing.T) {
	b, s := sanEconomy(t, ontapsim.Config{}, nil)
	v := create(t, b, pvName(1), gib, backends.AccessMount)
	create(t, b, pvName(2), 2*gib, backends.AccessBlock)
	ps := pools(s)
	if len(ps) != 1 || !tridentLUNPoolRE.MatchString(ps[0].Name) || ps[0].JunctionPath != "" || ps[0].Size < 3*gib {
		t.Fatalf("pools %+v", ps)
	}
	luns := lunsIn(s, ps[0].Name)
	if len(luns) != 2 || luns[0].Path != "/vol/"+ps[0].Name+"/"+tridentQtree(1) {
		t.Fatalf("LUNs %+v", luns)
	}
	if luns[0].Attributes["com.netapp.ndvp.fstype"] != "ext4" || luns[0].Attributes["context"] != "csi" ||
		luns[1].Attributes["com.netapp.ndvp.fstype"] != "raw" {
		t.Errorf("attributes %v / %v", luns[0].Attributes, luns[1].Attributes)
	}
	if v.SizeBytes != gib || v.FSType != "ext4" || v.Context["internalName"] != tridentQtree(1) || v.Incomplete {
		t.Errorf("volume %+v", v)
	}
	vols, err := b.ListVolumes(ctxT(t))
	if err != nil || len(vols) != 2 {
		t.Errorf("list %v %v", vols, err)
	}
}

func TestSANEconomyPublishThroughNodeIgroup(t *testing.T) {
	b, s := sanEconomy(t, ontapsim.Config{}, nil)
	v := create(t, b, pvName(1), gib, backends.AccessMount)
	node := backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1"}
	pc, err := b.Publish(ctxT(t), v, &backends.PublishRequest{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	igs := s.IGroups()
	if len(igs) != 1 || !strings.HasPrefix(igs[0].Name, "worker-1-") || pc["iscsiIgroup"] != igs[0].Name || pc["iscsiLunNumber"] != "0" {
		t.Fatalf("igroups %+v, publish context %v", igs, pc)
	}
	if err := b.Unpublish(ctxT(t), lookup(t, b, v.ID), node.Name, &node); err != nil {
		t.Fatal(err)
	}
	if igs := s.IGroups(); len(igs) != 0 {
		t.Errorf("igroups left %+v", igs)
	}
}

func TestSANEconomyExpandSnapshotsClonesDelete(t *testing.T) {
	b, s := sanEconomy(t, ontapsim.Config{}, nil)
	v := create(t, b, pvName(1), gib, backends.AccessMount)
	pool := pools(s)[0].Name
	if g, err := b.ExpandVolume(ctxT(t), v, 2*gib); err != nil || g.SizeBytes != 2*gib {
		t.Fatalf("expand %v %v", g, err)
	}
	v = lookup(t, b, v.ID)
	snap, err := b.CreateSnapshot(ctxT(t), v, "snapshot-11111111-2222-3333-4444-555555555555")
	if err != nil || snap.SizeBytes != 2*gib || snap.VolumeID != v.ID {
		t.Fatalf("snapshot %+v %v", snap, err)
	}
	snapLUN := "/vol/" + pool + "/" + tridentQtree(1) + "_snapshot_snapshot_11111111_2222_3333_4444_555555555555"
	if _, ok := lunPath(s, snapLUN); !ok {
		t.Fatalf("no snapshot LUN %s: %+v", snapLUN, s.LUNs())
	}
	got, err := b.Snapshots(ctxT(t), backends.SnapshotFilter{Volume: v})
	if err != nil || len(got) != 1 || got[0].Name != snap.Name {
		t.Errorf("snapshots of the volume %v %v", got, err)
	}
	all, err := b.Snapshots(ctxT(t), backends.SnapshotFilter{Name: snap.Name})
	if err != nil || len(all) != 1 || all[0].VolumeID != v.ID {
		t.Errorf("snapshots by name %v %v", all, err)
	}
	fromSnap, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: pvName(2), SizeBytes: 3 * gib, AccessType: backends.AccessMount, FSType: "ext4", Source: &backends.Source{Snapshot: got[0]}})
	if err != nil || fromSnap.SizeBytes != 3*gib || fromSnap.SourceSnapshotID != v.ID+"/"+snap.Name {
		t.Fatalf("clone of the snapshot %+v %v", fromSnap, err)
	}
	fromVol, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: pvName(3), SizeBytes: gib, AccessType: backends.AccessMount, FSType: "ext4", Source: &backends.Source{Volume: v}})
	if err != nil || fromVol.SizeBytes != 2*gib {
		t.Fatalf("clone of the volume %+v %v", fromVol, err)
	}
	if l, _ := lunPath(s, "/vol/"+pool+"/"+tridentQtree(2)); l.Attributes["ontap-csi"] == "" || !strings.Contains(l.Attributes["ontap-csi"], pvName(2)) {
		t.Errorf("the clone kept its source's record: %v", l.Attributes)
	}
	if err := b.DeleteVolume(ctxT(t), lookup(t, b, v.ID)); err != nil {
		t.Fatal(err)
	}
	if _, ok := lunPath(s, snapLUN); ok {
		t.Error("the volume's snapshot LUN outlived it")
	}
	for _, id := range []string{pvName(2), pvName(3)} {
		if err := b.DeleteVolume(ctxT(t), lookup(t, b, id)); err != nil {
			t.Fatal(err)
		}
	}
	if len(s.LUNs()) != 0 || len(pools(s)) != 0 {
		t.Errorf("left: LUNs %v pools %v", s.LUNs(), pools(s))
	}
}

func lunPath(s *ontapsim.Simulator, path string) (ontapsim.LUNInfo, bool) {
	for _, l := range s.LUNs() {
		if l.Path == path {
			return l, true
		}
	}
	return ontapsim.LUNInfo{}, false
}

// TestSANEconomyPoolsFill: lunsPerFlexvol caps a pool, snapshot LUNs do not
// count, and ONTAP's own per-volume LUN limit sends a create to a new pool.
func TestSANEconomyPoolsFill(t *testing.T) {
	b, s := sanEconomy(t, ontapsim.Config{MaxLUNsPerVolume: 55}, map[string]any{"lunsPerFlexvol": "50"})
	var wg sync.WaitGroup
	for w := 0; w < 10; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 60; i += 10 {
				if _, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: pvName(i), Pool: "aggr1", SizeBytes: gib, AccessType: backends.AccessMount}); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	ps := pools(s)
	if len(ps) != 2 || len(lunsIn(s, ps[0].Name))+len(lunsIn(s, ps[1].Name)) != 60 {
		t.Fatalf("pools %v", ps)
	}
	full := ps[0].Name
	if len(lunsIn(s, ps[1].Name)) == 50 {
		full = ps[1].Name
	}
	inFull := strings.TrimPrefix(lunsIn(s, full)[0].Path, "/vol/"+full+"/")
	var v *backends.Volume
	for i := 0; i < 60; i++ {
		if tridentQtree(i) == inFull {
			v = lookup(t, b, pvName(i))
		}
	}
	for i := 0; i < 5; i++ {
		if _, err := b.CreateSnapshot(ctxT(t), v, fmt.Sprintf("s%d", i)); err != nil {
			t.Fatalf("snapshot %d in a pool at lunsPerFlexvol: %v", i, err)
		}
	}
	if _, err := b.CreateSnapshot(ctxT(t), v, "s5"); !errors.Is(err, backends.ErrExhausted) {
		t.Errorf("snapshot past ONTAP's LUNs per volume: %v", err)
	}
	if n := len(lunsIn(s, full)); n != 55 {
		t.Errorf("pool %s holds %d LUNs, want ONTAP's 55", full, n)
	}
}
