package ontapsim

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/sys/unix"
)

// poolVolume creates a mounted volume the way Trident makes a qtree pool.
func (a *testAPI) poolVolume(name string) string {
	a.t.Helper()
	return a.createVolume(map[string]any{
		"name": name, "size": "1g", "guarantee": map[string]any{"type": "none"},
		"nas": map[string]any{"path": "/" + name, "unix_permissions": 711},
	})
}

func (a *testAPI) qtree(volume, name string, extra map[string]any) resp {
	a.t.Helper()
	body := map[string]any{"name": name, "volume": map[string]any{"name": volume}, "svm": map[string]any{"name": "svm0"}}
	for k, v := range extra {
		body[k] = v
	}
	return a.do("POST", "/api/storage/qtrees?return_timeout=30", body)
}

func (a *testAPI) treeRule(volume, qtree string, limit int64) resp {
	a.t.Helper()
	return a.do("POST", "/api/storage/quota/rules?return_timeout=30", map[string]any{
		"svm": map[string]any{"name": "svm0"}, "volume": map[string]any{"name": volume}, "type": "tree",
		"qtree": map[string]any{"name": qtree}, "space": map[string]any{"hard_limit": limit},
	})
}

func (a *testAPI) quotaOn(volUUID string, on bool) {
	a.t.Helper()
	a.must(http.StatusOK, "PATCH", "/api/storage/volumes/"+volUUID+"?return_timeout=30", map[string]any{"quota": map[string]any{"enabled": on}})
}

func TestQtreeCreateListDelete(t *testing.T) {
	a := newTestSim(t, Config{})
	vol := a.poolVolume("trident_qtree_pool_trident_ABCDEFGHIJ")
	if r := a.qtree("trident_qtree_pool_trident_ABCDEFGHIJ", "trident_pvc_1", map[string]any{"unix_permissions": 777}); r.status != http.StatusCreated {
		t.Fatalf("create: %d %s", r.status, r.raw)
	}
	r := a.must(200, "GET", "/api/storage/qtrees?volume.name=trident_qtree_pool_*&fields=name,id,path,export_policy.name,unix_permissions", nil)
	recs := r.records()
	if len(recs) != 2 || recs[0]["name"] != "" && recs[1]["name"] != "" {
		t.Fatalf("want the default qtree and one more, got %v", recs)
	}
	r = a.must(200, "GET", "/api/storage/qtrees?name=trident_pvc_1&fields=volume,path,unix_permissions", nil)
	q := r.records()[0]
	if dig(q, "volume.uuid") != vol || q["path"] != "/trident_qtree_pool_trident_ABCDEFGHIJ/trident_pvc_1" || q["unix_permissions"] != float64(777) {
		t.Errorf("qtree record %v", q)
	}
	fi, err := os.Stat(filepath.Join(a.sim.volumeDir(vol), "trident_pvc_1"))
	if err != nil || fi.Mode().Perm() != 0o777 {
		t.Fatalf("qtree directory: %v %v", fi, err)
	}
	// A second qtree of that name fails in the job (a guess: the generic
	// "Failed to create qtree").
	if r := a.qtree("trident_qtree_pool_trident_ABCDEFGHIJ", "trident_pvc_1", nil); r.errCode() != "5242886" {
		t.Errorf("duplicate: %d %s", r.status, r.raw)
	}
	for _, bad := range []string{"", "a/b", string(make([]byte, 65))} {
		if r := a.qtree("trident_qtree_pool_trident_ABCDEFGHIJ", bad, nil); r.status != http.StatusBadRequest {
			t.Errorf("name %q: %d %s", bad, r.status, r.raw)
		}
	}
	if r := a.qtree("trident_qtree_pool_trident_ABCDEFGHIJ", "x", map[string]any{"export_policy": map[string]any{"name": "nope"}}); r.errCode() != "1703954" {
		t.Errorf("unknown policy: %s", r.raw)
	}
	a.must(http.StatusOK, "DELETE", "/api/storage/qtrees/"+vol+"/1?return_timeout=30", nil)
	if _, err := os.Stat(filepath.Join(a.sim.volumeDir(vol), "trident_pvc_1")); !os.IsNotExist(err) {
		t.Errorf("qtree directory left: %v", err)
	}
	a.wantErr(http.StatusBadRequest, 5242894, "DELETE", "/api/storage/qtrees/"+vol+"/0", nil)
}

func TestQtreePolicyRenameAndRules(t *testing.T) {
	a := newTestSim(t, Config{})
	vol := a.poolVolume("pool")
	a.must(http.StatusCreated, "POST", "/api/protocols/nfs/export-policies", map[string]any{"name": "qp", "svm": map[string]any{"name": "svm0"}})
	if r := a.qtree("pool", "q1", map[string]any{"export_policy": map[string]any{"name": "qp"}}); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	if r := a.treeRule("pool", "q1", 10<<20); r.status != http.StatusCreated {
		t.Fatal(r.raw)
	}
	pol := a.must(200, "GET", "/api/protocols/nfs/export-policies?name=qp", nil).records()[0]["id"]
	a.wantErr(http.StatusConflict, 1703953, "DELETE", "/api/protocols/nfs/export-policies/"+jsonNum(pol), nil)

	a.must(http.StatusOK, "PATCH", "/api/storage/qtrees/"+vol+"/1?return_timeout=30", map[string]any{"name": "q2"})
	rules := a.must(200, "GET", "/api/storage/quota/rules?volume.name=pool&fields=qtree.name,space.hard_limit", nil).records()
	if len(rules) != 1 || dig(rules[0], "qtree.name") != "q2" {
		t.Fatalf("rule after rename: %v", rules)
	}
	a.must(http.StatusOK, "DELETE", "/api/storage/qtrees/"+vol+"/1?return_timeout=30", nil)
	if rules := a.must(200, "GET", "/api/storage/quota/rules?volume.name=pool", nil).records(); len(rules) != 0 {
		t.Errorf("rules left after the qtree's delete: %v", rules)
	}
	a.must(http.StatusOK, "DELETE", "/api/protocols/nfs/export-policies/"+jsonNum(pol), nil)
}

func jsonNum(v any) string {
	f, _ := v.(float64)
	return itoa64(int64(f))
}

// TestQuotaActivation checks the activation rules: a default rule and a
// reinitialization first (Trident's pool set-up), then rules of new qtrees
// apply at once by resize; without a default rule they need a
// reinitialization (5308571), which applies every rule.
func TestQuotaActivation(t *testing.T) {
	a := newTestSim(t, Config{})
	vol := a.poolVolume("pool")
	a.must(http.StatusCreated, "POST", "/api/storage/quota/rules?return_timeout=30", map[string]any{
		"svm": map[string]any{"name": "svm0"}, "volume": map[string]any{"name": "pool"}, "type": "tree", "qtree": map[string]any{"name": ""},
	})
	a.quotaOn(vol, true)
	if st := dig(a.must(200, "GET", "/api/storage/volumes/"+vol+"?fields=quota", nil).body, "quota.state"); st != "on" {
		t.Fatalf("quota state %v", st)
	}
	a.qtree("pool", "q1", nil)
	if r := a.treeRule("pool", "q1", 1000); r.status != http.StatusCreated {
		t.Fatalf("rule with a derived quota: %s", r.raw)
	}
	if got := a.sim.Qtrees()[0].HardLimit; got != 1024 {
		t.Errorf("limit %d, want 1000 rounded up to 1024", got)
	}
	if r := a.treeRule("pool", "q1", 1<<20); r.errCode() != "1" {
		t.Errorf("duplicate rule: %s", r.raw)
	}
	if r := a.treeRule("pool", "nope", 1<<20); r.status != http.StatusNotFound {
		t.Errorf("rule for a missing qtree: %s", r.raw)
	}

	vol2 := a.poolVolume("bare")
	a.quotaOn(vol2, true)
	a.qtree("bare", "q", nil)
	if r := a.treeRule("bare", "q", 1<<20); r.errCode() != "5308571" {
		t.Fatalf("rule without a derived quota: %s", r.raw)
	}
	if rules := a.sim.QuotaRules(); !hasRule(rules, "bare", "q", false) {
		t.Fatalf("the rule is kept, not in force: %v", rules)
	}
	a.quotaOn(vol2, false)
	a.quotaOn(vol2, true)
	if !hasRule(a.sim.QuotaRules(), "bare", "q", true) {
		t.Fatal("reinitialization did not apply the rule")
	}
	rep := a.must(200, "GET", "/api/storage/quota/reports?volume.name=bare&fields=qtree.name,space", nil).records()
	if len(rep) != 1 || dig(rep[0], "space.hard_limit") != float64(1<<20) {
		t.Errorf("report %v", rep)
	}
}

func hasRule(rules []QuotaRuleInfo, vol, qtree string, active bool) bool {
	for _, r := range rules {
		if r.Volume == vol && r.Qtree == qtree && r.Active == active {
			return true
		}
	}
	return false
}

func TestQuotaInitializingIsNotEnforced(t *testing.T) {
	a := newTestSim(t, Config{Latency: LatencyModel{QuotaInitialize: Range{Min: 3e9, Max: 3e9}}})
	vol := a.poolVolume("pool")
	a.qtree("pool", "q", nil)
	a.treeRule("pool", "", -1)
	a.treeRule("pool", "q", 1<<20)
	a.quotaOn(vol, true)
	if st := a.sim.QuotaState("pool"); st != "initializing" {
		t.Fatalf("state %q right after quota on", st)
	}
	if got := a.sim.Qtrees()[0].HardLimit; got != -1 {
		t.Errorf("limit in force while initializing: %d", got)
	}
	if r := a.treeRule("pool", "", 5); r.errCode() != "1" {
		t.Errorf("duplicate default rule: %s", r.raw)
	}
}

// TestQtreeNFSExport: the qtree's export policy decides, and the volume's
// must let the client in too.
func TestQtreeNFSExport(t *testing.T) {
	a := newTestSim(t, Config{})
	a.poolVolume("pool")
	for _, p := range []struct{ name, client string }{{"vol_only", "10.0.0.1"}, {"qtree_only", "10.0.0.2"}} {
		a.must(http.StatusCreated, "POST", "/api/protocols/nfs/export-policies", map[string]any{
			"name": p.name, "svm": map[string]any{"name": "svm0"},
			"rules": []any{map[string]any{"clients": []any{map[string]any{"match": p.client}}, "ro_rule": []any{"any"}, "rw_rule": []any{"any"}}},
		})
	}
	vol := a.volumeUUID("pool")
	a.must(http.StatusOK, "PATCH", "/api/storage/volumes/"+vol+"?return_timeout=30", map[string]any{"nas": map[string]any{"export_policy": map[string]any{"name": "vol_only"}}})
	a.qtree("pool", "q", map[string]any{"export_policy": map[string]any{"name": "qtree_only"}})
	lif := a.sim.Info().NFSLIFs[0]
	if _, err := a.sim.ResolveNFSExport(lif, "10.0.0.1", "/pool/q"); err == nil {
		t.Error("a client the qtree's policy refuses got in")
	}
	if _, err := a.sim.ResolveNFSExport(lif, "10.0.0.2", "/pool/q"); err == nil {
		t.Error("a client the volume's policy refuses got in")
	}
	a.must(http.StatusOK, "PATCH", "/api/storage/volumes/"+vol+"?return_timeout=30", map[string]any{"nas": map[string]any{"export_policy": map[string]any{"name": "default"}}})
	exp, err := a.sim.ResolveNFSExport(lif, "10.0.0.2", "/pool/q")
	if err != nil || exp.Access != "rw" || filepath.Base(exp.Directory) != "q" {
		t.Fatalf("export %+v, %v", exp, err)
	}
}

func TestLUNsPerVolumeLimit(t *testing.T) {
	a := newTestSim(t, Config{MaxLUNsPerVolume: 2})
	a.createVolume(map[string]any{"name": "bucket", "size": "1g"})
	a.createLUN("/vol/bucket/a", 1<<20)
	a.createLUN("/vol/bucket/b", 1<<20)
	a.wantErr(http.StatusBadRequest, 9158, "POST", "/api/storage/luns", map[string]any{
		"name": "/vol/bucket/c", "os_type": "linux", "svm": map[string]any{"name": "svm0"}, "space": map[string]any{"size": 1 << 20},
	})
}

// TestQtreeQuotaMounts: with quota mounts the data plane enforces the hard
// limit and shows it as the size; the limit follows rule changes; the data
// survives a restart.
func TestQtreeQuotaMounts(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: qtrees are tmpfs mounts")
	}
	dir := t.TempDir()
	a := newTestSim(t, Config{DataDir: dir, QtreeQuotaMounts: true})
	vol := a.poolVolume("pool")
	a.treeRule("pool", "", -1)
	a.quotaOn(vol, true)
	a.qtree("pool", "q", nil)
	a.treeRule("pool", "q", 1<<20)
	qdir := a.sim.Qtrees()[0].Directory
	assertFSSize(t, qdir, 1<<20)
	if err := os.WriteFile(filepath.Join(qdir, "big"), make([]byte, 2<<20), 0o644); !errors.Is(err, unix.ENOSPC) {
		t.Fatalf("writing past the quota: %v", err)
	}
	rule := a.sim.QuotaRules()[1].UUID
	a.must(http.StatusOK, "PATCH", "/api/storage/quota/rules/"+rule+"?return_timeout=30", map[string]any{"space": map[string]any{"hard_limit": 4 << 20}})
	assertFSSize(t, qdir, 4<<20)
	if err := os.WriteFile(filepath.Join(qdir, "big"), make([]byte, 2<<20), 0o644); err != nil {
		t.Fatalf("writing within the grown quota: %v", err)
	}
	if err := a.sim.Close(); err != nil {
		t.Fatal(err)
	}
	b := newTestSim(t, Config{DataDir: dir, QtreeQuotaMounts: true})
	qdir = b.sim.Qtrees()[0].Directory
	assertFSSize(t, qdir, 4<<20)
	if fi, err := os.Stat(filepath.Join(qdir, "big")); err != nil || fi.Size() != 2<<20 {
		t.Fatalf("data after restart: %v %v", fi, err)
	}
	b.must(http.StatusOK, "DELETE", "/api/storage/volumes/"+vol+"?force=true&return_timeout=30", nil)
	var st unix.Statfs_t
	if err := unix.Statfs(qdir, &st); err == nil {
		t.Errorf("qtree file system left after its volume's delete")
	}
}

func assertFSSize(t *testing.T, dir string, want int64) {
	t.Helper()
	var st unix.Statfs_t
	if err := unix.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if got := int64(st.Blocks) * st.Bsize; got != want {
		t.Fatalf("%s: file system of %d bytes, want %d", dir, got, want)
	}
}
