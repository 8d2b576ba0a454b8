package ontap_test

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// Compatibility of the economy drivers with Trident 26.06, both ways. The
// ONTAP objects Trident leaves and the requests Trident makes are written
// out here from its code (ontap_nas_qtree.go, ontap_san_economy.go,
// ontap_common.go, api/ontap_rest.go), never derived from ours.

const (
	tridentPV       = "pvc-954876af-3a32-4ca4-b507-d5b5424e337e"
	tridentInternal = "trident_pvc_954876af_3a32_4ca4_b507_d5b5424e337e"
	// A Trident qtree pool: "trident_qtree_pool_trident_" + RandomString(10).
	tridentQtreePool = "trident_qtree_pool_trident_MACNWIILZO"
	tridentLUNPool   = "trident_lun_pool_trident_QWERTYUIOP"
	tridentSnapshot  = "snapshot-11111111-2222-3333-4444-555555555555"
	// The UUID of a Trident installation: its per-node igroups are
	// "<node>-<uuid>".
	tridentUUID = "8a4c2d1e-0f3b-4c5d-9e6f-7a8b9c0d1e2f"
)

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// tridentQtreePoolFixture makes what Trident's createFlexvolForQtree and
// Create leave for one volume: a thin 1g FlexVol mounted at /<name>, mode
// 0711, on the empty policy, with a default tree rule and quotas on; a
// qtree named after the PV (mode 0777, on the empty policy) with a 1 GiB
// tree quota; a snapshot of the pool.
func tridentQtreePoolFixture(t *testing.T, s *ontapsim.Simulator) {
	reserve, snapdir := 0, false
	_, err := s.CreateExportPolicy("trident_empty")
	must(t, err)
	_, err = s.CreateVolume(ontapsim.VolumeSpec{
		Name: tridentQtreePool, Size: 1 << 30, Thin: true, ExportPolicy: "trident_empty", JunctionPath: "/" + tridentQtreePool,
		SnapshotPolicy: "none", SnapshotReserve: &reserve, UnixPermissions: 711, SnapdirAccess: &snapdir, SecurityStyle: "unix",
	})
	must(t, err)
	must(t, s.SetTreeQuota(tridentQtreePool, "", -1))
	must(t, s.SetQuotaEnabled(tridentQtreePool, true))
	must(t, s.CreateQtree(tridentQtreePool, tridentInternal, "trident_empty", 777))
	must(t, s.SetTreeQuota(tridentQtreePool, tridentInternal, 1<<30))
	_, err = s.CreateSnapshot(tridentQtreePool, tridentSnapshot)
	must(t, err)
}

// TestNASEconomyServesTridentsVolumes: a volume Trident made is found,
// published, expanded, snapshotted by ID and deleted, and a new volume
// goes into Trident's pool rather than a new one.
func TestNASEconomyServesTridentsVolumes(t *testing.T) {
	b, s := nasEconomy(t, ontapsim.Config{}, nil)
	tridentQtreePoolFixture(t, s)
	v := lookup(t, b, tridentPV)
	if v.SizeBytes != 1<<30 || v.Incomplete {
		t.Fatalf("Trident's volume %+v", v)
	}
	pc, err := b.Publish(ctxT(t), v, &backends.PublishRequest{Node: backends.Node{Name: "n1", IPs: []string{"10.0.0.9"}}})
	if err != nil || pc["nfsPath"] != "/"+tridentQtreePool+"/"+tridentInternal {
		t.Fatalf("publish %v %v", pc, err)
	}
	if _, err := s.ResolveNFSExport(s.Info().NFSLIFs[0], "10.0.0.9", pc["nfsPath"]); err != nil {
		t.Errorf("the node cannot mount Trident's qtree: %v", err)
	}
	snaps, err := b.Snapshots(ctxT(t), backends.SnapshotFilter{Volume: v, Name: tridentSnapshot})
	if err != nil || len(snaps) != 1 {
		t.Errorf("Trident's snapshot by ID: %v %v", snaps, err)
	}
	if _, err := b.ExpandVolume(ctxT(t), v, 2<<30); err != nil {
		t.Fatal(err)
	}
	if q := s.Qtrees()[0]; q.HardLimit != 2<<30 || simVolume(t, s, tridentQtreePool).Size < 2<<30 {
		t.Errorf("after expand: quota %d pool %d", q.HardLimit, simVolume(t, s, tridentQtreePool).Size)
	}
	create(t, b, pvName(1), gib, backends.AccessMount)
	if ps := pools(s); len(ps) != 1 {
		t.Errorf("a new pool beside Trident's matching one: %v", ps)
	}
	for _, id := range []string{tridentPV, pvName(1)} {
		must(t, b.DeleteVolume(ctxT(t), lookup(t, b, id)))
	}
	if len(s.Qtrees()) != 0 || len(pools(s)) != 0 {
		t.Errorf("left: %v %v", s.Qtrees(), pools(s))
	}
}

// TestNASEconomyKeepsTridentsLegacyPolicy: a qtree still on the backend
// policy of an older Trident keeps it; the node is added to it.
func TestNASEconomyKeepsTridentsLegacyPolicy(t *testing.T) {
	b, s := nasEconomy(t, ontapsim.Config{}, nil)
	tridentQtreePoolFixture(t, s)
	legacy := "trident-" + tridentUUID
	_, err := s.CreateExportPolicy(legacy, ontapsim.ExportRule{Clients: []string{"10.0.0.1"}})
	must(t, err)
	q := s.Qtrees()[0]
	_, _, err = s.Do(http.MethodPatch, "/api/storage/qtrees/"+simVolume(t, s, tridentQtreePool).UUID+"/1", map[string]any{"export_policy": map[string]any{"name": legacy}})
	must(t, err)
	v := lookup(t, b, tridentPV)
	if _, err := b.Publish(ctxT(t), v, &backends.PublishRequest{Node: backends.Node{Name: "n2", IPs: []string{"10.0.0.2"}}}); err != nil {
		t.Fatal(err)
	}
	if q = s.Qtrees()[0]; q.ExportPolicy != legacy || len(policy(s, legacy).Rules) != 2 {
		t.Errorf("qtree on %q with rules %+v", q.ExportPolicy, policy(s, legacy).Rules)
	}
}

// tridentGET makes one of the GETs Trident's REST client makes.
func tridentGET(t *testing.T, s *ontapsim.Simulator, path string, q url.Values) []map[string]any {
	t.Helper()
	_, body, err := s.Do(http.MethodGet, path+"?"+q.Encode(), nil)
	must(t, err)
	raw, _ := body["records"].([]any)
	out := make([]map[string]any, 0, len(raw))
	for _, r := range raw {
		out = append(out, r.(map[string]any))
	}
	return out
}

// TestTridentFindsNASEconomyVolumes: after a switch back, Trident's own
// look-ups find what ontap-csi made: QtreeExists (name, volumes matching
// its pool prefix), QuotaGetEntry, the pool listing by attributes its
// placement uses, and the mount path it publishes.
func TestTridentFindsNASEconomyVolumes(t *testing.T) {
	b, s := nasEconomy(t, ontapsim.Config{}, nil)
	v := create(t, b, tridentPV, 3*gib, backends.AccessMount)
	svm := s.Info().SVMUUID
	qs := tridentGET(t, s, "/api/storage/qtrees", url.Values{"svm.uuid": {svm}, "name": {tridentInternal}, "fields": {"volume"}})
	if len(qs) != 1 || !strings.HasPrefix(qs[0]["volume"].(map[string]any)["name"].(string), "trident_qtree_pool_trident_") {
		t.Fatalf("Trident's QtreeExists finds %v", qs)
	}
	pool := qs[0]["volume"].(map[string]any)["name"].(string)
	rules := tridentGET(t, s, "/api/storage/quota/rules", url.Values{"type": {"tree"}, "svm.uuid": {svm},
		"qtree.name": {tridentInternal}, "volume.name": {pool}, "fields": {"uuid,space.hard_limit"}})
	if len(rules) != 1 || rules[0]["space"].(map[string]any)["hard_limit"] != float64(3*gib) {
		t.Errorf("Trident's QuotaGetEntry finds %v", rules)
	}
	// findFlexvolForQtree: VolumeListByAttrs with Trident's defaults
	// (snapshot policy none, reserve 0, snapshot directory off).
	vols := tridentGET(t, s, "/api/storage/volumes", url.Values{"svm.uuid": {svm}, "name": {"trident_qtree_pool_trident_*"},
		"snapshot_policy.name": {"none"}, "space.snapshot.reserve_percent": {"0"}, "snapshot_directory_access_enabled": {"false"},
		"aggregates.name": {"aggr1"}})
	if len(vols) != 1 {
		t.Errorf("Trident's pool search finds %v", vols)
	}
	pc, err := b.Publish(ctxT(t), v, &backends.PublishRequest{Node: backends.Node{Name: "n1", IPs: []string{"10.0.0.3"}}})
	must(t, err)
	if want := "/" + pool + "/" + tridentInternal; pc["nfsPath"] != want {
		t.Errorf("nfsPath %s, Trident's ConstructOntapNASQTreeVolumePath gives %s", pc["nfsPath"], want)
	}
}

// tridentLUNPoolFixture makes what Trident's createFlexvolForLUN, Create,
// CreateSnapshot and Publish leave: an unmounted thin FlexVol, a LUN
// named after the PV with Trident's attributes, its snapshot LUN (a LUN
// clone) and a map to the node's igroup "<node>-<Trident UUID>".
func tridentLUNPoolFixture(t *testing.T, s *ontapsim.Simulator) {
	reserve := 0
	_, err := s.CreateVolume(ontapsim.VolumeSpec{Name: tridentLUNPool, Size: 3 << 30, Thin: true, SnapshotPolicy: "none", SnapshotReserve: &reserve})
	must(t, err)
	lun := "/vol/" + tridentLUNPool + "/" + tridentInternal
	_, err = s.CreateLUN(ontapsim.LUNSpec{Path: lun, Size: 1 << 30, Attributes: map[string]string{"com.netapp.ndvp.fstype": "ext4", "context": "csi"}})
	must(t, err)
	_, _, err = s.Do(http.MethodPost, "/api/storage/luns", map[string]any{"svm": map[string]any{"name": s.Info().SVM},
		"name": lun + "_snapshot_snapshot_11111111_2222_3333_4444_555555555555", "clone": map[string]any{"source": map[string]any{"name": lun}}})
	must(t, err)
	_, err = s.CreateIGroup("worker-1-"+tridentUUID, "iscsi", "linux", "iqn.1994-05.com.redhat:w1")
	must(t, err)
	_, err = s.MapLUN(lun, "worker-1-"+tridentUUID)
	must(t, err)
}

func TestSANEconomyServesTridentsVolumes(t *testing.T) {
	s, err := ontapsim.New(ontapsim.Config{})
	must(t, err)
	t.Cleanup(func() { s.Close() })
	_, err = s.Start("127.0.0.1:0", true)
	must(t, err)
	tridentLUNPoolFixture(t, s)
	b := simBackendOpts(t, s, config.DriverONTAPSANEconomy, nil, ontap.Options{InstallationID: tridentUUID})
	v := lookup(t, b, tridentPV)
	if v.SizeBytes != 1<<30 || v.FSType != "ext4" || v.Incomplete {
		t.Fatalf("Trident's volume %+v", v)
	}
	pc, err := b.Publish(ctxT(t), v, &backends.PublishRequest{Node: backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1"}})
	if err != nil || pc["iscsiIgroup"] != "worker-1-"+tridentUUID || len(s.IGroups()) != 1 {
		t.Fatalf("publish %v %v (igroups %v)", pc, err, s.IGroups())
	}
	snaps, err := b.Snapshots(ctxT(t), backends.SnapshotFilter{Volume: v})
	if err != nil || len(snaps) != 1 || snaps[0].Name != tridentSnapshot {
		t.Fatalf("Trident's snapshot LUN reads as %v %v", snaps, err)
	}
	clone, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: pvName(7), SizeBytes: gib, AccessType: backends.AccessMount, Source: &backends.Source{Snapshot: snaps[0]}})
	if err != nil || clone.SourceSnapshotID != tridentPV+"/"+tridentSnapshot {
		t.Fatalf("clone of Trident's snapshot %+v %v", clone, err)
	}
	if _, err := b.ExpandVolume(ctxT(t), v, 2<<30); err != nil {
		t.Fatal(err)
	}
	must(t, b.Unpublish(ctxT(t), lookup(t, b, tridentPV), "worker-1", nil))
	for _, id := range []string{tridentPV, pvName(7)} {
		must(t, b.DeleteVolume(ctxT(t), lookup(t, b, id)))
	}
	if len(s.LUNs()) != 0 || len(pools(s)) != 0 || len(s.IGroups()) != 0 {
		t.Errorf("left: %v %v %v", s.LUNs(), pools(s), s.IGroups())
	}
}

// TestTridentFindsSANEconomyVolumes: Trident's LUNExists
// ("/vol/<pool prefix>*/<name>"), its snapshot LUN pattern
// ("/vol/*/*<name>_snapshot_*") and its attributes find what we made.
func TestTridentFindsSANEconomyVolumes(t *testing.T) {
	b, s := sanEconomy(t, ontapsim.Config{}, nil)
	v := create(t, b, tridentPV, gib, backends.AccessMount)
	_, err := b.CreateSnapshot(ctxT(t), v, tridentSnapshot)
	must(t, err)
	svm := s.Info().SVMUUID
	luns := tridentGET(t, s, "/api/storage/luns", url.Values{"svm.uuid": {svm}, "name": {"/vol/trident_lun_pool_trident_*/" + tridentInternal},
		"fields": {"attributes,space.size"}})
	if len(luns) != 1 {
		t.Fatalf("Trident's LUNExists finds %v", luns)
	}
	attrs := map[string]string{}
	for _, a := range luns[0]["attributes"].([]any) {
		attrs[a.(map[string]any)["name"].(string)] = a.(map[string]any)["value"].(string)
	}
	if attrs["com.netapp.ndvp.fstype"] != "ext4" || attrs["context"] != "csi" {
		t.Errorf("Trident's attributes %v", attrs)
	}
	snaps := tridentGET(t, s, "/api/storage/luns", url.Values{"svm.uuid": {svm}, "name": {"/vol/*/*pvc_954876af_3a32_4ca4_b507_d5b5424e337e_snapshot_*"}})
	if len(snaps) != 1 || !strings.HasSuffix(snaps[0]["name"].(string), "_snapshot_snapshot_11111111_2222_3333_4444_555555555555") {
		t.Errorf("Trident's GetSnapPathPatternForVolume finds %v", snaps)
	}
}
