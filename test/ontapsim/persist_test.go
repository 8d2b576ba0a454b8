package ontapsim

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
)

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

func TestRestartPersistence(t *testing.T) {
	dir := t.TempDir()
	s1, err := New(Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	v, l := populateForRestart(t, s1)
	// The state is saved after each change, not only on Close.
	state, err := os.ReadFile(filepath.Join(dir, stateFile))
	if err != nil || !bytes.Contains(state, []byte("node1-abc")) {
		t.Fatalf("state.json after mutations: %v", err)
	}
	before := restartViewOf(s1)
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	s2, err := New(Config{DataDir: dir, SVM: "ignored-when-state-exists"})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	after := restartViewOf(s2)
	if !reflect.DeepEqual(before, after) {
		t.Fatalf("state changed across restart:\nbefore %+v\nafter  %+v", before, after)
	}
	if got := readFile(t, filepath.Join(v.Directory, "keep.txt")); got != "persisted" {
		t.Fatalf("volume content %q", got)
	}
	if got := readAt(t, l.File, 4096, 9); got != "blockdata" {
		t.Fatalf("LUN content %q", got)
	}
	checkWorksAfterRestart(t, s2, dir)
}

// populateForRestart gives s one object of each persisted kind: an export
// policy, an NFS volume with a file and a snapshot, and a LUN with data,
// mapped to an igroup. It returns the volume and the LUN.
func populateForRestart(t *testing.T, s *Simulator) (VolumeInfo, LUNInfo) {
	t.Helper()
	if _, err := s.CreateExportPolicy("pol", ExportRule{Clients: []string{"10.0.0.0/8"}}); err != nil {
		t.Fatal(err)
	}
	v, err := s.CreateVolume(VolumeSpec{Name: "trident_pvc_1", Thin: true, JunctionPath: "/trident_pvc_1", ExportPolicy: "pol", Comment: `{"provisioning":{}}`})
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, v.Directory, "keep.txt", "persisted")
	if _, err := s.CreateSnapshot("trident_pvc_1", "snapshot-1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateVolume(VolumeSpec{Name: "trident_pvc_2", Size: 1 << 30, Thin: true}); err != nil {
		t.Fatal(err)
	}
	l, err := s.CreateLUN(LUNSpec{Path: "/vol/trident_pvc_2/lun0", Size: 16 * mib, Attributes: map[string]string{"com.netapp.ndvp.fstype": "xfs"}})
	if err != nil {
		t.Fatal(err)
	}
	if err := writeAt(l.File, []byte("blockdata"), 4096); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIGroup("node1-abc", "", "", "iqn.2020-01.io.test:n1"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.MapLUN(l.Path, "node1-abc"); err != nil {
		t.Fatal(err)
	}
	return v, l
}

// restartView is everything a restart must keep, as the simulator reports it.
type restartView struct {
	Info     Info
	Volumes  []VolumeInfo
	LUNs     []LUNInfo
	IGroups  []IGroupInfo
	Maps     []LUNMapInfo
	Policies []ExportPolicyInfo
	Snaps    []SnapshotInfo
	CA       []byte
}

func restartViewOf(s *Simulator) restartView {
	vw := restartView{Info: s.Info(), Volumes: s.Volumes(), LUNs: s.LUNs(), IGroups: s.IGroups(), Maps: s.LUNMaps(),
		Policies: s.ExportPolicies(), Snaps: s.Snapshots("trident_pvc_1"), CA: s.CACertificatePEM()}
	// The saved time has no monotonic reading and may be in another zone.
	for i := range vw.Snaps {
		vw.Snaps[i].CreateTime = vw.Snaps[i].CreateTime.UTC().Round(0)
	}
	return vw
}

// checkWorksAfterRestart checks that the restarted simulator keeps working
// (ids continue, no collisions) and that saving left no temporary file in
// dir.
func checkWorksAfterRestart(t *testing.T, s *Simulator, dir string) {
	t.Helper()
	if _, err := s.CreateExportPolicy("pol2"); err != nil {
		t.Fatal(err)
	}
	pols := s.ExportPolicies()
	if pols[len(pols)-1].ID != pols[len(pols)-2].ID+1 {
		t.Fatalf("policy ids after restart: %+v", pols)
	}
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		if strings.Contains(e.Name(), ".tmp-") {
			t.Fatalf("temporary file left: %s", e.Name())
		}
	}
}

func TestCorruptStateIsAnError(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, stateFile), []byte("{not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Config{DataDir: dir}); err == nil {
		t.Fatal("corrupt state.json accepted")
	}
}

// Concurrent creates of one name: exactly one wins, whichever way ONTAP
// reports duplicates (docs/design/ontap-rest.md §7 open point 3).
func TestConcurrentCreatesOneWinner(t *testing.T) {
	for _, syncDup := range []bool{false, true} {
		t.Run(fmt.Sprintf("SyncDuplicateCheck=%v", syncDup), func(t *testing.T) {
			testConcurrentVolumeCreates(t, syncDup)
		})
	}
	t.Run("igroups", testConcurrentIgroupCreates)
	t.Run("lun ids", testConcurrentLUNMaps)
}

// testConcurrentVolumeCreates races 16 creates of one volume name; the
// latency keeps the creates in flight together.
func testConcurrentVolumeCreates(t *testing.T, syncDup bool) {
	a := newTestSim(t, Config{SyncDuplicateCheck: syncDup, Latency: LatencyModel{VolumeCreate: Range{20e6, 50e6}}})
	const n = 16
	results := make([]resp, n)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			<-start
			results[i] = a.do("POST", "/api/storage/volumes?return_timeout=30", volBody("race"))
		}(i)
	}
	close(start)
	wg.Wait()
	wins := 0
	for _, r := range results {
		switch {
		case r.status == 201:
			wins++
		case r.status == 409 && (r.errCode() == itoa64(codeVolDuplicate) || r.errCode() == itoa64(codeVolBeingCreated)):
		default:
			t.Errorf("unexpected answer %d %s", r.status, r.raw)
		}
	}
	n2 := 0
	for _, v := range a.sim.Volumes() {
		if v.Name == "race" {
			n2++
		}
	}
	if wins != 1 || n2 != 1 {
		t.Fatalf("%d winners, %d volumes", wins, n2)
	}
}

// testConcurrentIgroupCreates races 16 creates of one igroup name.
func testConcurrentIgroupCreates(t *testing.T) {
	a := newTestSim(t, Config{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	codes := map[int]int{}
	for i := 0; i < 16; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := a.do("POST", "/api/protocols/san/igroups", map[string]any{"name": "g", "os_type": "linux", "protocol": "iscsi", "svm": map[string]any{"name": "svm0"}})
			mu.Lock()
			codes[r.status]++
			mu.Unlock()
		}()
	}
	wg.Wait()
	if codes[201] != 1 || codes[409] != 15 {
		t.Fatalf("answers %v", codes)
	}
}

// testConcurrentLUNMaps maps 12 LUNs to one igroup at once: each map must
// get its own LUN id.
func testConcurrentLUNMaps(t *testing.T) {
	a := newTestSim(t, Config{})
	a.createVolume(map[string]any{"name": "v", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
	a.createIgroup("g", "iqn.2020-01.io.test:a")
	const n = 12
	for i := 0; i < n; i++ {
		a.createLUN(fmt.Sprintf("/vol/v/l%d", i), mib)
	}
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			a.do("POST", "/api/protocols/san/lun-maps", map[string]any{"lun": map[string]any{"name": fmt.Sprintf("/vol/v/l%d", i)}, "igroup": map[string]any{"name": "g"}})
		}(i)
	}
	wg.Wait()
	seen := map[int]bool{}
	for _, m := range a.sim.LUNMaps() {
		if seen[m.LUNID] || m.LUNID >= n {
			t.Fatalf("ids %+v", a.sim.LUNMaps())
		}
		seen[m.LUNID] = true
	}
	if len(seen) != n {
		t.Fatalf("%d maps", len(seen))
	}
}

func TestTridentStyleFixture(t *testing.T) {
	a := newTestSim(t, Config{})
	// Trident 26.06 ontap-nas: storagePrefix "trident_", PV pvc-<uid>,
	// junction /<name>, per-volume export policy named like the volume,
	// labels in the comment, unix permissions 777, no snapshot reserve.
	name := "trident_pvc_3a5e0c4f_1d2b_4c1e_9c5a_0f1e2d3c4b5a"
	reserve := 0
	if _, err := a.sim.CreateExportPolicy(name, ExportRule{Clients: []string{"10.244.1.7"}, Protocols: []string{"nfs"}}); err != nil {
		t.Fatal(err)
	}
	v, err := a.sim.CreateVolume(VolumeSpec{Name: name, Size: 1 << 30, Thin: true, ExportPolicy: name, JunctionPath: "/" + name,
		Comment: `{"provisioning":{"team":"storage"}}`, SnapshotPolicy: "none", SnapshotReserve: &reserve, UnixPermissions: 777})
	if err != nil {
		t.Fatal(err)
	}
	// A client sees it exactly as if Trident had made it.
	r := a.must(200, "GET", "/api/storage/volumes?svm.uuid="+a.svmUUID()+"&name="+name+"&style=flexvol&fields=type,size,comment,aggregates,nas,guarantee,snapshot_policy,snapshot_directory_access_enabled,space.snapshot.used,space.snapshot.reserve_percent,nas.export_policy.name,autosize.mode", nil)
	rec := r.records()[0]
	if rec["uuid"] != v.UUID || dig(rec, "nas.path") != "/"+name || dig(rec, "nas.export_policy.name") != name ||
		dig(rec, "nas.unix_permissions") != float64(777) || dig(rec, "guarantee.type") != "none" || dig(rec, "snapshot_policy.name") != "none" ||
		dig(rec, "space.snapshot.reserve_percent") != float64(0) || rec["comment"] != `{"provisioning":{"team":"storage"}}` {
		t.Fatalf("fixture as seen over REST: %s", r.raw)
	}
	st, _ := a.simCall("GET", "/sim/nfs/export?server=127.0.0.10&client=10.244.1.7&path=/"+name, nil)
	if st != 200 {
		t.Fatalf("export for the node: %d", st)
	}
	// Fixtures are not counted as client requests.
	if a.sim.Stats().Count("POST", "/api/storage/volumes") != 0 {
		t.Fatal("fixture counted")
	}
}
