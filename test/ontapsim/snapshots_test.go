package ontapsim

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(data)
}

// The phases share volume "parent" and run in order: each one depends on
// the snapshots and clones the previous ones left.
func TestSnapshotsAndClones(t *testing.T) {
	a := newTestSim(t, Config{})
	parent := a.createVolume(map[string]any{"name": "parent", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
	snapUUID := checkSnapshotCreate(t, a, parent)
	cloneUUID := checkFlexCloneFromSnapshot(t, a, parent)
	checkCloneDependenciesAndSplit(t, a, parent, snapUUID, cloneUUID)
	checkCloneWithoutSnapshot(t, a, parent)
}

// checkSnapshotCreate takes snapshot snap1 of the parent while hello.txt
// reads "v1", then writes "v2", and checks the snapshot API's answers. It
// returns snap1's UUID.
func checkSnapshotCreate(t *testing.T, a *testAPI, parent string) string {
	pv, _ := a.sim.Volume("parent")
	writeFile(t, pv.Directory, "hello.txt", "v1")
	snaps := "/api/storage/volumes/" + parent + "/snapshots"

	// Snapshot create is a job (202); Location points at the query form.
	r := a.must(202, "POST", snaps, map[string]any{"name": "snap1", "svm": map[string]any{"uuid": a.svmUUID()}})
	if loc := r.header.Get("Location"); loc != snaps+"/?name=snap1" {
		t.Fatalf("Location %q", loc)
	}
	if j := waitJob(t, a, r); j["state"] != "success" {
		t.Fatalf("snapshot job: %v", j)
	}
	writeFile(t, pv.Directory, "hello.txt", "v2")

	list := a.must(200, "GET", snaps+"?name=snap1&fields=name,create_time", nil)
	if recs := list.records(); len(recs) != 1 || recs[0]["create_time"] == nil {
		t.Fatalf("snapshot list: %s", list.raw)
	}
	snapUUID := list.records()[0]["uuid"].(string)

	a.wantErr(409, codeSnapDuplicate, "POST", snaps+"?return_timeout=10", map[string]any{"name": "snap1"})
	a.wantErr(400, codeSnapNameInvalid, "POST", snaps, map[string]any{"name": "bad name"})
	a.wantErr(404, codeNotFound, "GET", snaps+"/nope", nil)
	return snapUUID
}

// checkFlexCloneFromSnapshot creates clone1 from snap1 and checks that it
// sees the snapshot's data, not today's; it returns clone1's UUID.
func checkFlexCloneFromSnapshot(t *testing.T, a *testAPI, parent string) string {
	a.must(201, "POST", "/api/storage/volumes?return_timeout=10&return_records=true", map[string]any{
		"name": "clone1", "svm": map[string]any{"uuid": a.svmUUID()},
		"clone": map[string]any{"parent_volume": map[string]any{"name": "parent"}, "parent_snapshot": map[string]any{"name": "snap1"}, "is_flexclone": true},
	})
	cv, ok := a.sim.Volume("clone1")
	if !ok {
		t.Fatal("clone missing")
	}
	if got := readFile(t, filepath.Join(cv.Directory, "hello.txt")); got != "v1" {
		t.Fatalf("clone content %q, want v1", got)
	}
	g := a.must(200, "GET", "/api/storage/volumes/"+cv.UUID+"?fields=clone", nil).body
	if dig(g, "clone.is_flexclone") != true || dig(g, "clone.parent_volume.name") != "parent" || dig(g, "clone.parent_snapshot.name") != "snap1" {
		t.Fatalf("clone fields: %v", g)
	}
	if pg := a.must(200, "GET", "/api/storage/volumes/"+parent+"?fields=clone.has_flexclone", nil).body; dig(pg, "clone.has_flexclone") != true {
		t.Fatalf("parent has_flexclone: %v", pg)
	}
	a.wantErr(400, codeCloneBadValue, "POST", "/api/storage/volumes", map[string]any{
		"name": "clone2", "svm": map[string]any{"name": "svm0"}, "size": "2GB",
		"clone": map[string]any{"parent_volume": map[string]any{"name": "parent"}},
	})
	a.wantErr(404, codeParentVolNotFound, "POST", "/api/storage/volumes?return_timeout=10", map[string]any{
		"name": "clone2", "svm": map[string]any{"name": "svm0"}, "clone": map[string]any{"parent_volume": map[string]any{"name": "nope"}},
	})
	return cv.UUID
}

// checkCloneDependenciesAndSplit checks that the clone keeps its snapshot
// busy and its parent undeletable until a split makes it independent.
func checkCloneDependenciesAndSplit(t *testing.T, a *testAPI, parent, snapUUID, cloneUUID string) {
	snaps := "/api/storage/volumes/" + parent + "/snapshots"
	r := a.wantErr(409, codeSnapBusy, "DELETE", snaps+"/"+snapUUID+"?return_timeout=10", nil)
	if !strings.Contains(r.errMessage(), "has not expired or is locked") {
		t.Fatal(r.raw)
	}
	a.wantErr(409, codeVolHasClones, "DELETE", "/api/storage/volumes/"+parent+"?return_timeout=10&force=true", nil)

	// Split: the clone becomes independent, and the dependencies go away.
	a.must(200, "PATCH", "/api/storage/volumes/"+cloneUUID+"?return_timeout=10", map[string]any{"clone": map[string]any{"split_initiated": true}})
	if g := a.must(200, "GET", "/api/storage/volumes/"+cloneUUID+"?fields=clone", nil).body; dig(g, "clone.is_flexclone") != false {
		t.Fatalf("after split: %v", g)
	}
	a.wantErr(400, codeInvalidValue, "PATCH", "/api/storage/volumes/"+cloneUUID, map[string]any{"clone": map[string]any{"split_initiated": true}})
	a.must(200, "DELETE", snaps+"/"+snapUUID+"?return_timeout=10", nil)
	if _, err := os.Stat(a.sim.snapshotDir(snapUUID)); !os.IsNotExist(err) {
		t.Fatalf("snapshot data left: %v", err)
	}
}

// checkCloneWithoutSnapshot checks that a clone without a parent snapshot
// takes one of today's data, and that deleting the clone frees it.
func checkCloneWithoutSnapshot(t *testing.T, a *testAPI, parent string) {
	a.must(201, "POST", "/api/storage/volumes?return_timeout=10", map[string]any{
		"name": "clone3", "svm": map[string]any{"name": "svm0"}, "clone": map[string]any{"parent_volume": map[string]any{"name": "parent"}},
	})
	if ss := a.sim.Snapshots("parent"); len(ss) != 1 || !strings.HasPrefix(ss[0].Name, "clone_clone3.") || len(ss[0].Clones) != 1 {
		t.Fatalf("auto snapshot: %+v", ss)
	}
	c3, _ := a.sim.Volume("clone3")
	if got := readFile(t, filepath.Join(c3.Directory, "hello.txt")); got != "v2" {
		t.Fatalf("clone3 content %q", got)
	}
	// Deleting the clone frees the snapshot, then the parent can go.
	a.must(200, "DELETE", "/api/storage/volumes/"+c3.UUID+"?return_timeout=10&force=true", nil)
	a.must(200, "DELETE", "/api/storage/volumes/"+parent+"?return_timeout=10&force=true", nil)
}

func TestSnapshotRestoreAndLUNClones(t *testing.T) {
	a := newTestSim(t, Config{})
	vol := a.createVolume(map[string]any{"name": "san", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
	lunUUID := a.createLUN("/vol/san/lun0", 64*mib)
	lun := a.sim.LUNs()[0]
	block := bytes.Repeat([]byte("A"), 4096)
	if err := writeAt(lun.File, block, 8*mib); err != nil {
		t.Fatal(err)
	}
	a.must(201, "POST", "/api/storage/volumes/"+vol+"/snapshots?return_timeout=10", map[string]any{"name": "s1"})
	if err := writeAt(lun.File, bytes.Repeat([]byte("B"), 4096), 8*mib); err != nil {
		t.Fatal(err)
	}

	// A FlexClone's LUNs are new: new UUID and serial, unmapped, same data.
	a.must(201, "POST", "/api/storage/volumes?return_timeout=10", map[string]any{
		"name": "san_clone", "svm": map[string]any{"name": "svm0"},
		"clone": map[string]any{"parent_volume": map[string]any{"name": "san"}, "parent_snapshot": map[string]any{"name": "s1"}},
	})
	var cl LUNInfo
	for _, l := range a.sim.LUNs() {
		if l.Path == "/vol/san_clone/lun0" {
			cl = l
		}
	}
	if cl.UUID == "" || cl.UUID == lunUUID || cl.Serial == lun.Serial || cl.Mapped || cl.Size != 64*mib {
		t.Fatalf("clone LUN %+v (source %+v)", cl, lun)
	}
	if got := readAt(t, cl.File, 8*mib, 1); got != "A" {
		t.Fatalf("clone LUN data %q, want A", got)
	}

	// LUN clone inside the volume, from the live LUN and from the snapshot.
	a.must(201, "POST", "/api/storage/luns", map[string]any{"name": "/vol/san/lun1", "svm": map[string]any{"name": "svm0"},
		"clone": map[string]any{"source": map[string]any{"name": "/vol/san/lun0"}}})
	a.must(201, "POST", "/api/storage/luns", map[string]any{"name": "/vol/san/lun2", "svm": map[string]any{"name": "svm0"},
		"clone": map[string]any{"source": map[string]any{"name": "/vol/san/.snapshot/s1/lun0"}}})
	a.wantErr(400, codeLUNCloneProp, "POST", "/api/storage/luns", map[string]any{"name": "/vol/san/lun3", "os_type": "linux",
		"svm": map[string]any{"name": "svm0"}, "clone": map[string]any{"source": map[string]any{"name": "/vol/san/lun0"}}})
	a.wantErr(400, codeLUNCloneOtherVol, "POST", "/api/storage/luns", map[string]any{"name": "/vol/san_clone/lun9",
		"svm": map[string]any{"name": "svm0"}, "clone": map[string]any{"source": map[string]any{"name": "/vol/san/lun0"}}})
	byPath := map[string]LUNInfo{}
	for _, l := range a.sim.LUNs() {
		byPath[l.Path] = l
	}
	if readAt(t, byPath["/vol/san/lun1"].File, 8*mib, 1) != "B" || readAt(t, byPath["/vol/san/lun2"].File, 8*mib, 1) != "A" {
		t.Fatal("LUN clone data mismatch")
	}

	// Restore: data back to the snapshot, LUNs created since are removed,
	// the original LUN keeps its identity (same inode for loop devices).
	before, _ := os.Stat(lun.File)
	a.must(200, "PATCH", "/api/storage/volumes/"+vol+"?return_timeout=10&restore_to.snapshot.name=s1", nil)
	if got := readAt(t, lun.File, 8*mib, 1); got != "A" {
		t.Fatalf("restored LUN data %q", got)
	}
	after, _ := os.Stat(lun.File)
	if !os.SameFile(before, after) {
		t.Fatal("restore replaced the LUN file instead of rewriting it")
	}
	for _, l := range a.sim.LUNs() {
		if l.Volume == "san" && l.Path != "/vol/san/lun0" {
			t.Fatalf("LUN %s survived the restore", l.Path)
		}
	}
	a.wantErr(404, codeSnapNotFound, "PATCH", "/api/storage/volumes/"+vol+"?return_timeout=10&restore_to.snapshot.name=nope", nil)
}

func writeAt(path string, data []byte, off int64) error {
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = f.WriteAt(data, off)
	return err
}

func readAt(t *testing.T, path string, off int64, n int) string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, n)
	if _, err := f.ReadAt(buf, off); err != nil {
		t.Fatal(err)
	}
	return string(buf)
}

func TestBulkSnapshotEndpoints(t *testing.T) {
	a := newTestSim(t, Config{})
	thin := map[string]any{"type": "none"}
	a.createVolume(map[string]any{"name": "trident_pvc_1", "guarantee": thin})
	a.createVolume(map[string]any{"name": "trident_pvc_2", "guarantee": thin})
	a.createVolume(map[string]any{"name": "other", "guarantee": thin})
	for _, v := range []string{"trident_pvc_1", "trident_pvc_2", "other"} {
		a.must(201, "POST", "/api/storage/volumes/*/snapshots?return_timeout=10", map[string]any{"name": "snapshot-a", "volume": map[string]any{"name": v}})
	}
	a.wantErr(400, codeMissingRequired, "POST", "/api/storage/volumes/*/snapshots", map[string]any{"name": "x"})
	r := a.must(200, "GET", "/api/storage/volumes/*/snapshots?svm.uuid="+a.svmUUID()+"&volume.name=trident_*&name=snapshot-a&fields=uuid,name,create_time,volume.name,volume.uuid", nil)
	recs := r.records()
	if len(recs) != 2 || dig(recs[0], "volume.uuid") == nil {
		t.Fatalf("bulk list: %s", r.raw)
	}
	a.must(200, "DELETE", "/api/storage/volumes/*/snapshots/"+recs[0]["uuid"].(string)+"?return_timeout=10", nil)
	a.wantErr(404, codeNotFound, "DELETE", "/api/storage/volumes/*/snapshots/"+recs[0]["uuid"].(string), nil)
	if n := len(a.must(200, "GET", "/api/storage/volumes/*/snapshots", nil).records()); n != 2 {
		t.Fatalf("%d snapshots left", n)
	}
}
