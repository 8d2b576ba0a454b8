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

// Trident's names, written out from its code (ontap_nas_qtree.go): pools
// "trident_qtree_pool_<storagePrefix>_" + ten upper-case letters, qtrees
// storagePrefix + PV name with '-' made '_'.
var tridentQtreePoolRE = regexp.MustCompile(`^trident_qtree_pool_trident_[A-Z]{10}$`)

func nasEconomy(t *testing.T, sim ontapsim.Config, extra map[string]any) (backends.Backend, *ontapsim.Simulator) {
	t.Helper()
	keys := map[string]any{"autoExportPolicy": true, "emptyFlexvolDeferredDeletePeriod": "0"}
	for k, v := range extra {
		keys[k] = v
	}
	return simBackend(t, config.DriverONTAPNASEconomy, sim, keys)
}

func pvName(i int) string { return fmt.Sprintf("pvc-%08x-1111-2222-3333-444455556666", i) }

func tridentQtree(i int) string {
	return fmt.Sprintf("trident_pvc_%08x_1111_2222_3333_444455556666", i)
}

func pools(s *ontapsim.Simulator) []ontapsim.VolumeInfo {
	var out []ontapsim.VolumeInfo
	for _, v := range s.Volumes() {
		if strings.HasPrefix(v.Name, "trident_qtree_pool_") || strings.HasPrefix(v.Name, "trident_lun_pool_") {
			out = append(out, v)
		}
	}
	return out
}

func TestNASEconomyLayoutIsTridents(t *testing.T) {
	b, s := nasEconomy(t, ontapsim.Config{}, map[string]any{"defaults": map[string]any{"unixPermissions": "0750"}})
	v1 := create(t, b, pvName(1), 2*gib, backends.AccessMount)
	create(t, b, pvName(2), gib, backends.AccessMount)
	ps := pools(s)
	if len(ps) != 1 || !tridentQtreePoolRE.MatchString(ps[0].Name) {
		t.Fatalf("pools %+v", ps)
	}
	p := ps[0]
	if p.JunctionPath != "/"+p.Name || p.UnixPermissions != 711 || p.ExportPolicy != "trident_empty" || s.QuotaState(p.Name) != "on" {
		t.Errorf("pool %+v, quotas %s", p, s.QuotaState(p.Name))
	}
	if p.Size < 3*gib {
		t.Errorf("pool of %d bytes cannot hold 3 GiB of quotas", p.Size)
	}
	qs := s.Qtrees()
	if len(qs) != 2 || qs[0].Name != tridentQtree(1) || qs[0].HardLimit != 2*gib || qs[0].UnixPermissions != 750 || qs[0].ExportPolicy != "trident_empty" {
		t.Fatalf("qtrees %+v", qs)
	}
	rules := s.QuotaRules()
	if len(rules) != 3 || rules[0].Qtree != "" || rules[0].HardLimit != -1 {
		t.Errorf("want the default tree rule and one per qtree: %+v", rules)
	}
	if v1.SizeBytes != 2*gib || v1.Context["internalName"] != tridentQtree(1) || v1.Incomplete {
		t.Errorf("volume %+v", v1)
	}
	vols, err := b.ListVolumes(ctxT(t))
	if err != nil || len(vols) != 2 || vols[0].ID != pvName(1) {
		t.Errorf("list %v %v", vols, err)
	}
}

func TestNASEconomyPublishExportsTheQtree(t *testing.T) {
	b, s := nasEconomy(t, ontapsim.Config{}, nil)
	vol := create(t, b, pvName(1), gib, backends.AccessMount)
	node := backends.Node{Name: "n1", IPs: []string{"10.0.0.7"}}
	var pc map[string]string
	got := requestsOf(t, s, func() (err error) {
		pc, err = b.Publish(ctxT(t), vol, &backends.PublishRequest{Node: node})
		return err
	})
	// The pool's and the qtree's policies are made with their rules.
	if n := got["POST /api/protocols/nfs/export-policies/{policy.id}/rules"]; n != 0 {
		t.Errorf("%d rules added one by one (%v)", n, got)
	}
	pool := pools(s)[0]
	if want := "/" + pool.Name + "/" + tridentQtree(1); pc["nfsPath"] != want || pc["protocol"] != "file" {
		t.Fatalf("publish context %v, want nfsPath %s", pc, want)
	}
	q := s.Qtrees()[0]
	if q.ExportPolicy != tridentQtree(1) || policy(s, q.ExportPolicy) == nil || policy(s, q.ExportPolicy).Rules[0].Clients[0] != "10.0.0.7" {
		t.Errorf("qtree policy %q", q.ExportPolicy)
	}
	if p := simVolume(t, s, pool.Name); !strings.HasPrefix(p.ExportPolicy, "trident-") || len(policy(s, p.ExportPolicy).Rules) != 1 {
		t.Errorf("pool policy %q", p.ExportPolicy)
	}
	lif := s.Info().NFSLIFs[0]
	if _, err := s.ResolveNFSExport(lif, "10.0.0.7", pc["nfsPath"]); err != nil {
		t.Errorf("the node cannot mount: %v", err)
	}
	if _, err := s.ResolveNFSExport(lif, "10.0.0.8", pc["nfsPath"]); err == nil {
		t.Error("another client can mount")
	}
	if err := b.Unpublish(ctxT(t), lookup(t, b, vol.ID), "n1", &node); err != nil {
		t.Fatal(err)
	}
	if q := s.Qtrees()[0]; q.ExportPolicy != "trident_empty" || policy(s, tridentQtree(1)) != nil {
		t.Errorf("after unpublish: qtree on %q, own policy %v", q.ExportPolicy, policy(s, tridentQtree(1)))
	}
}

func TestNASEconomyExpandAndDelete(t *testing.T) {
	b, s := nasEconomy(t, ontapsim.Config{}, nil)
	vol := create(t, b, pvName(1), gib, backends.AccessMount)
	pool := pools(s)[0]
	grown, err := b.ExpandVolume(ctxT(t), vol, 3*gib)
	if err != nil || grown.SizeBytes != 3*gib {
		t.Fatalf("expand %v %v", grown, err)
	}
	if q := s.Qtrees()[0]; q.HardLimit != 3*gib || simVolume(t, s, pool.Name).Size < 3*gib {
		t.Errorf("after expand: quota %d, pool %d", q.HardLimit, simVolume(t, s, pool.Name).Size)
	}
	if err := b.DeleteVolume(ctxT(t), lookup(t, b, vol.ID)); err != nil {
		t.Fatal(err)
	}
	if len(s.Qtrees()) != 0 || len(s.QuotaRules()) > 1 || len(pools(s)) != 0 {
		t.Errorf("left: qtrees %v rules %v pools %v", s.Qtrees(), s.QuotaRules(), pools(s))
	}
	if _, err := b.Volume(ctxT(t), vol.ID); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("deleted volume: %v", err)
	}
}

// TestNASEconomyDeferredPoolDelete: a pool emptied is marked, kept while the
// period runs, and reused by a create meanwhile.
func TestNASEconomyDeferredPoolDelete(t *testing.T) {
	b, s := nasEconomy(t, ontapsim.Config{}, map[string]any{"emptyFlexvolDeferredDeletePeriod": "3600"})
	vol := create(t, b, pvName(1), gib, backends.AccessMount)
	if err := b.DeleteVolume(ctxT(t), vol); err != nil {
		t.Fatal(err)
	}
	ps := pools(s)
	if len(ps) != 1 || !strings.Contains(ps[0].Comment, "emptySince") {
		t.Fatalf("want the pool kept and marked: %+v", ps)
	}
	create(t, b, pvName(2), gib, backends.AccessMount)
	if ps2 := pools(s); len(ps2) != 1 || ps2[0].Name != ps[0].Name {
		t.Errorf("a new pool instead of the empty one: %+v", ps2)
	}
}

// TestNASEconomyPoolsFill: qtreesPerFlexvol is a hard cap, pools are filled
// before a new one is made, and a restarted driver (no memory) goes on
// filling the same pools.
func TestNASEconomyPoolsFill(t *testing.T) {
	b, s := nasEconomy(t, ontapsim.Config{}, map[string]any{"qtreesPerFlexvol": "50"})
	var wg sync.WaitGroup
	errs := make(chan error, 120)
	for w := 0; w < 20; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			for i := w; i < 120; i += 20 {
				if _, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: pvName(i), Pool: "aggr1", SizeBytes: gib, AccessType: backends.AccessMount}); err != nil {
					errs <- err
				}
			}
		}(w)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	assertPools(t, s, 3, 50)
	b2, _ := simBackendOn(t, s, config.DriverONTAPNASEconomy, map[string]any{"autoExportPolicy": true, "qtreesPerFlexvol": "50"})
	for i := 120; i < 150; i++ {
		create(t, b2, pvName(i), gib, backends.AccessMount)
	}
	assertPools(t, s, 3, 50)
}

// assertPools checks the number of pools and that none holds more qtrees
// than the cap.
func assertPools(t *testing.T, s *ontapsim.Simulator, want, limit int) {
	t.Helper()
	per := map[string]int{}
	for _, q := range s.Qtrees() {
		per[q.Volume]++
	}
	for p, n := range per {
		if n > limit {
			t.Errorf("pool %s holds %d qtrees, above %d", p, n, limit)
		}
	}
	if got := len(pools(s)); got != want {
		t.Errorf("%d pools, want %d (%v)", got, want, per)
	}
}

// TestNASEconomyTwoControllers: two controllers creating into the same
// SVM at once never overfill a pool.
func TestNASEconomyTwoControllers(t *testing.T) {
	b1, s := nasEconomy(t, ontapsim.Config{}, map[string]any{"qtreesPerFlexvol": "50"})
	b2, _ := simBackendOn(t, s, config.DriverONTAPNASEconomy, map[string]any{"autoExportPolicy": true, "qtreesPerFlexvol": "50", "emptyFlexvolDeferredDeletePeriod": "0"})
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			b := []backends.Backend{b1, b2}[w%2]
			for i := w; i < 160; i += 16 {
				if _, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: pvName(i), Pool: "aggr1", SizeBytes: gib, AccessType: backends.AccessMount}); err != nil {
					t.Error(err)
				}
			}
		}(w)
	}
	wg.Wait()
	if n := len(s.Qtrees()); n != 160 {
		t.Errorf("%d qtrees, want 160", n)
	}
	per := map[string]int{}
	for _, q := range s.Qtrees() {
		per[q.Volume]++
	}
	for p, n := range per {
		if n > 50 {
			t.Errorf("pool %s overfilled: %d", p, n)
		}
	}
	if n := len(pools(s)); n < 4 || n > 6 {
		t.Errorf("%d pools for 160 qtrees of at most 50", n)
	}
}

func TestNASEconomyLimits(t *testing.T) {
	b, _ := nasEconomy(t, ontapsim.Config{}, map[string]any{"limitVolumePoolSize": "2Gi"})
	_, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: pvName(1), Pool: "aggr1", SizeBytes: 3 * gib, AccessType: backends.AccessMount})
	if !errors.Is(err, backends.ErrOutOfRange) {
		t.Errorf("bigger than limitVolumePoolSize: %v", err)
	}
	b, _ = nasEconomy(t, ontapsim.Config{}, map[string]any{"denyNewVolumePools": "true"})
	_, err = b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: pvName(1), Pool: "aggr1", SizeBytes: gib, AccessType: backends.AccessMount})
	if !errors.Is(err, backends.ErrExhausted) {
		t.Errorf("no pool and denyNewVolumePools: %v", err)
	}
}

func TestNASEconomyClonesAndSnapshots(t *testing.T) {
	b, s := nasEconomy(t, ontapsim.Config{}, nil)
	vol := create(t, b, pvName(1), gib, backends.AccessMount)
	_, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: pvName(2), Pool: "aggr1", SizeBytes: gib, Source: &backends.Source{Volume: vol}})
	if !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("clone: %v", err)
	}
	if _, err := b.CreateSnapshot(ctxT(t), vol, "snapshot-1"); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("snapshot with snapshotDir false: %v", err)
	}

	// Trident's qtree pools offer snapshots and clones false, so a
	// StorageClass asking for either does not land here.
	if ps, err := b.Pools(ctxT(t)); err != nil || len(ps) == 0 || !ps[0].NoSnapshots || !ps[0].NoClones {
		t.Errorf("pools %+v %v", ps, err)
	}

	b, s = nasEconomy(t, ontapsim.Config{}, map[string]any{"defaults": map[string]any{"snapshotDir": "true"}})
	vol = create(t, b, pvName(1), gib, backends.AccessMount)
	other := create(t, b, pvName(2), gib, backends.AccessMount)
	snap, err := b.CreateSnapshot(ctxT(t), vol, "snapshot-1")
	if err != nil || snap.VolumeID != vol.ID || !snap.Ready || snap.SizeBytes != gib {
		t.Fatalf("snapshot %+v %v", snap, err)
	}
	if _, err := b.CreateSnapshot(ctxT(t), other, "snapshot-1"); !errors.Is(err, backends.ErrAlreadyExists) {
		t.Errorf("same name for another volume of the pool: %v", err)
	}
	if got, _ := b.Snapshots(ctxT(t), backends.SnapshotFilter{Volume: other}); len(got) != 0 {
		t.Errorf("the other volume lists %v", got)
	}
	if got, _ := b.Snapshots(ctxT(t), backends.SnapshotFilter{}); len(got) != 1 || got[0].VolumeID != vol.ID {
		t.Errorf("all snapshots %v", got)
	}
	if err := b.DeleteVolume(ctxT(t), lookup(t, b, vol.ID)); err != nil {
		t.Fatal(err)
	}
	if snaps := simVolume(t, s, pools(s)[0].Name).Snapshots; len(snaps) != 0 {
		t.Errorf("the deleted volume's snapshots stay: %v", snaps)
	}
}
