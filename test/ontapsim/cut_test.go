package ontapsim

import (
	"bytes"
	"os"
	"testing"
)

// TestCutOnUnmap: a host holding the LUN's file open (as a loop device
// does) keeps writing after its map is deleted; with cut-on-unmap those
// writes reach only the kept inode, never the LUN a later host attaches.
// Without it they reach the LUN (the plain file data plane).
func TestCutOnUnmap(t *testing.T) {
	tests := []struct {
		name    string
		cut     bool
		unmap   func(a *testAPI, lunUUID, igroupUUID string)
		wantCut bool
	}{
		{"off: the write reaches the LUN", false, deleteMap, false},
		{"on: map deleted", true, deleteMap, true},
		{"on: mapped igroup deleted", true, func(a *testAPI, _, g string) {
			a.must(200, "DELETE", "/api/protocols/san/igroups/"+g+"?allow_delete_while_mapped=true", nil)
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newTestSim(t, Config{})
			a.createVolume(map[string]any{"name": "vol", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
			lun := a.createLUN("/vol/vol/lun0", 4*mib)
			g := a.createIgroup("node-a", "iqn.2026-12.io.test:a")
			a.mapLUN("/vol/vol/lun0", "node-a")
			if st, body := a.simCall("PUT", "/sim/dataplane", map[string]any{"cutOnUnmap": tt.cut}); st != 200 || body["cutOnUnmap"] != tt.cut {
				t.Fatalf("PUT /sim/dataplane: %d %v", st, body)
			}
			file := a.sim.lunFile(lun)
			host, err := os.OpenFile(file, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer host.Close()
			write := func(at int64, s string) {
				if _, err := host.WriteAt([]byte(s), at); err != nil {
					t.Fatal(err)
				}
			}
			write(0, "before the unmap")
			tt.unmap(a, lun, g)
			write(4096, "after the unmap")

			got, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(got, []byte("before the unmap")) {
				t.Errorf("the LUN lost what was written before the unmap: %q", got[:16])
			}
			reached := bytes.HasPrefix(got[4096:], []byte("after the unmap"))
			if reached == tt.wantCut {
				t.Errorf("a write after the unmap reached the LUN: %v, want %v", reached, !tt.wantCut)
			}
			cuts := a.sim.DataPlane().Cuts
			if !tt.wantCut {
				if len(cuts) != 0 {
					t.Errorf("cuts %+v, want none", cuts)
				}
				return
			}
			if len(cuts) != 1 || cuts[0].LUN != "/vol/vol/lun0" || cuts[0].Igroup != "node-a" || len(cuts[0].Initiators) != 1 {
				t.Fatalf("cuts %+v", cuts)
			}
			kept, err := os.ReadFile(cuts[0].File)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(kept[4096:], []byte("after the unmap")) {
				t.Errorf("the kept inode lacks the cut host's write")
			}
			if st, _ := a.simCall("GET", "/sim/dataplane", nil); st != 200 {
				t.Errorf("GET /sim/dataplane: %d", st)
			}
		})
	}
}

func deleteMap(a *testAPI, lun, g string) {
	a.must(200, "DELETE", "/api/protocols/san/lun-maps/"+lun+"/"+g, nil)
}

func TestCutOnUnmapRefusesBadBody(t *testing.T) {
	a := newTestSim(t, Config{})
	if st, _ := a.simCall("PUT", "/sim/dataplane", "not an object"); st != 400 {
		t.Fatalf("PUT with a bad body: %d, want 400", st)
	}
	if a.sim.DataPlane().CutOnUnmap {
		t.Fatal("a refused PUT turned cut-on-unmap on")
	}
}
