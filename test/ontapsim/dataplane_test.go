package ontapsim

import (
	"encoding/json"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// simCall calls an unauthenticated /sim endpoint (a string body is sent as is).
func (a *testAPI) simCall(method, path string, body any) (int, map[string]any) {
	a.t.Helper()
	rd := strings.NewReader("")
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	default:
		data, _ := json.Marshal(b)
		rd = strings.NewReader(string(data))
	}
	req, _ := http.NewRequest(method, a.base+path, rd)
	res, err := a.hc.Do(req)
	if err != nil {
		a.t.Fatal(err)
	}
	defer res.Body.Close()
	var out map[string]any
	if err := json.NewDecoder(res.Body).Decode(&out); err != nil {
		a.t.Fatalf("%s %s: %v", method, path, err)
	}
	return res.StatusCode, out
}

func TestNFSExportDataPlane(t *testing.T) {
	a := newTestSim(t, Config{})
	a.sim.CreateExportPolicy("pol",
		ExportRule{Clients: []string{"10.0.0.0/24"}},
		ExportRule{Clients: []string{"10.0.1.5,10.0.1.6"}, RWRule: []string{"never"}},
	)
	a.createVolume(map[string]any{"name": "nfsvol", "guarantee": map[string]any{"type": "none"},
		"nas": map[string]any{"path": "/nfsvol", "export_policy": map[string]any{"name": "pol"}}})
	v, _ := a.sim.Volume("nfsvol")
	if err := os.Mkdir(filepath.Join(v.Directory, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	lif := a.sim.Info().NFSLIFs[0]
	export := func(server, client, p string) (int, map[string]any) {
		q := url.Values{"server": {server}, "client": {client}, "path": {p}}
		return a.simCall("GET", "/sim/nfs/export?"+q.Encode(), nil)
	}
	tests := []struct {
		name, server, client, path string
		status                     int
		access, dir                string
	}{
		{"rw client", lif, "10.0.0.7", "/nfsvol", 200, "rw", v.Directory},
		{"case-insensitive junction", lif, "10.0.0.7", "/NFSVOL", 200, "rw", v.Directory},
		{"ro client from a comma list", lif, "10.0.1.6", "/nfsvol", 200, "ro", v.Directory},
		{"subdirectory", lif, "10.0.0.7", "/nfsvol/sub", 200, "rw", filepath.Join(v.Directory, "sub")},
		{"denied client", lif, "192.0.2.1", "/nfsvol", 403, "", ""},
		{"not an NFS LIF", a.sim.Info().ISCSILIFs[0], "10.0.0.7", "/nfsvol", 404, "", ""},
		{"nothing mounted", lif, "10.0.0.7", "/other", 404, "", ""},
		{"missing subdirectory", lif, "10.0.0.7", "/nfsvol/nope", 404, "", ""},
		{"escape attempt", lif, "10.0.0.7", "/nfsvol/../../etc", 404, "", ""},
		{"bad client", lif, "not-an-ip", "/nfsvol", 400, "", ""},
		{"svm root", lif, "10.0.0.7", "/", 200, "rw", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.t = t
			st, body := export(tt.server, tt.client, tt.path)
			if st != tt.status {
				t.Fatalf("status %d, want %d: %v", st, tt.status, body)
			}
			if st != 200 {
				if body["error"] == nil {
					t.Fatalf("no error text: %v", body)
				}
				return
			}
			if body["access"] != tt.access || (tt.dir != "" && body["directory"] != tt.dir) {
				t.Fatalf("got %v", body)
			}
		})
	}
	a.t = t

	// ONTAP checks every volume crossed: without a rule in the root volume's
	// "default" policy the client cannot traverse "/".
	a.must(200, "DELETE", "/api/protocols/nfs/export-policies/"+itoa64(defaultPolicyID)+"/rules/1", nil)
	if st, body := export(lif, "10.0.0.7", "/nfsvol"); st != 403 || !strings.Contains(body["error"].(string), "default") {
		t.Fatalf("root traversal: %d %v", st, body)
	}

	// Offline (or unmounted) volumes are unreachable.
	a.sim.CreateExportPolicy("all", ExportRule{Clients: []string{"0.0.0.0/0"}})
	root, _ := a.sim.Volume("svm0_root")
	a.must(200, "PATCH", "/api/storage/volumes/"+root.UUID+"?return_timeout=10", map[string]any{"nas": map[string]any{"export_policy": map[string]any{"name": "all"}}})
	if st, _ := export(lif, "10.0.0.7", "/nfsvol"); st != 200 {
		t.Fatalf("after fixing root policy: %d", st)
	}
	a.must(200, "PATCH", "/api/storage/volumes/"+v.UUID+"?return_timeout=10", map[string]any{"state": "offline"})
	if st, _ := export(lif, "10.0.0.7", "/nfsvol"); st != 404 {
		t.Fatalf("offline volume: %d", st)
	}
	// A downed LIF stops serving.
	if err := a.sim.SetLIFUp(lif, false); err != nil {
		t.Fatal(err)
	}
	if st, _ := export(lif, "10.0.0.7", "/"); st != 404 {
		t.Fatalf("down LIF: %d", st)
	}
}

// iscsiPlane is a four-node simulator whose volume "v" (on node 1) holds two
// LUNs mapped to one initiator's igroup.
type iscsiPlane struct {
	a         *testAPI
	info      Info
	initiator string
}

func newISCSIPlane(t *testing.T) *iscsiPlane {
	a := newTestSim(t, Config{Nodes: 4})
	info := a.sim.Info()
	if len(info.ISCSILIFs) != 4 {
		t.Fatalf("iSCSI LIFs %v", info.ISCSILIFs)
	}
	a.createVolume(map[string]any{"name": "v", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
	a.createLUN("/vol/v/lun0", 32*mib)
	a.createLUN("/vol/v/lun1", 16*mib)
	initiator := "iqn.1994-05.com.redhat:node1"
	a.createIgroup("node1-ig", initiator)
	a.mapLUN("/vol/v/lun0", "node1-ig")
	a.mapLUN("/vol/v/lun1", "node1-ig")
	return &iscsiPlane{a: a, info: info, initiator: initiator}
}

// login logs the fixture's initiator in to the cluster's target via portal.
func (p *iscsiPlane) login(portal string, chap map[string]any) (int, map[string]any) {
	body := map[string]any{"initiator": p.initiator, "portal": portal, "target": p.info.TargetIQN}
	if chap != nil {
		body["chap"] = chap
	}
	return p.a.simCall("POST", "/sim/iscsi/login", body)
}

// The phases share one simulator and run in order: the rescan resizes LUN 0
// and the CHAP phase changes the SVM's credentials.
func TestISCSIDataPlane(t *testing.T) {
	p := newISCSIPlane(t)
	lun := checkISCSIReportingNodes(t, p)
	checkISCSILoginErrors(t, p)
	checkISCSIRescan(t, p, lun)
	checkISCSICHAP(t, p)
}

// checkISCSIReportingNodes checks which portals report the LUNs (selective
// LUN map) and what a login reports about LUN 0, which it returns.
func checkISCSIReportingNodes(t *testing.T, p *iscsiPlane) LUNInfo {
	a, info := p.a, p.info
	// The volume is on node 1 (aggr1): node 1 and its partner report it.
	st, body := p.login(info.ISCSILIFs[0]+":3260", nil)
	if st != 200 {
		t.Fatalf("login: %d %v", st, body)
	}
	luns := body["luns"].([]any)
	if len(luns) != 2 {
		t.Fatalf("luns %v", luns)
	}
	l0 := luns[0].(map[string]any)
	lun := a.sim.LUNs()[0]
	if l0["lun"] != float64(0) || l0["serial"] != lun.Serial || l0["file"] != lun.File || l0["sizeBytes"] != float64(32*mib) ||
		l0["volume"] != "v" || l0["path"] != "/vol/v/lun0" || l0["wwid"] != "3600a0980"+l0["serialHex"].(string) {
		t.Fatalf("lun 0: %v", l0)
	}
	if st, body := p.login(info.ISCSILIFs[1], nil); st != 200 || len(body["luns"].([]any)) != 2 {
		t.Fatalf("partner portal: %d %v", st, body)
	}
	// Node 3 is not a reporting node (SLM) until added.
	if st, body := p.login(info.ISCSILIFs[2], nil); st != 200 || len(body["luns"].([]any)) != 0 {
		t.Fatalf("non-reporting portal: %d %v", st, body)
	}
	g := a.sim.IGroups()[0]
	a.must(201, "POST", "/api/protocols/san/lun-maps/"+lun.UUID+"/"+g.UUID+"/reporting-nodes", map[string]any{"name": "sim-cluster-03"})
	if st, body := p.login(info.ISCSILIFs[2], nil); st != 200 || len(body["luns"].([]any)) != 1 {
		t.Fatalf("after adding node 3: %d %v", st, body)
	}
	return lun
}

// checkISCSILoginErrors checks logins to a wrong target or portal, and by an
// initiator that no igroup holds.
func checkISCSILoginErrors(t *testing.T, p *iscsiPlane) {
	info := p.info
	if st, _ := p.a.simCall("POST", "/sim/iscsi/login", map[string]any{"initiator": p.initiator, "portal": info.ISCSILIFs[0], "target": "iqn.2000-01.com.example:x"}); st != 404 {
		t.Fatalf("unknown target: %d", st)
	}
	if st, _ := p.login(info.NFSLIFs[0], nil); st != 404 {
		t.Fatalf("NFS LIF as portal: %d", st)
	}
	if st, _ := p.login(info.ISCSILIFs[0]+":3261", nil); st != 404 {
		t.Fatalf("wrong port: %d", st)
	}
	if st, body := p.a.simCall("POST", "/sim/iscsi/login", map[string]any{"initiator": "iqn.2020-01.io.test:stranger", "portal": info.ISCSILIFs[0], "target": info.TargetIQN}); st != 200 || len(body["luns"].([]any)) != 0 {
		t.Fatalf("unmapped initiator: %d %v", st, body)
	}
}

// checkISCSIRescan checks that a rescan sees lun resized.
func checkISCSIRescan(t *testing.T, p *iscsiPlane, lun LUNInfo) {
	p.a.must(200, "PATCH", "/api/storage/luns/"+lun.UUID, map[string]any{"space": map[string]any{"size": 64 * mib}})
	q := url.Values{"initiator": {p.initiator}, "portal": {p.info.ISCSILIFs[0]}, "target": {p.info.TargetIQN}}
	st, body := p.a.simCall("GET", "/sim/iscsi/luns?"+q.Encode(), nil)
	if st != 200 || body["luns"].([]any)[0].(map[string]any)["sizeBytes"] != float64(64*mib) {
		t.Fatalf("rescan: %d %v", st, body)
	}
}

// checkISCSICHAP checks CHAP on the default credential, then mutual CHAP,
// then a per-initiator credential that overrides the default.
func checkISCSICHAP(t *testing.T, p *iscsiPlane) {
	a, portal := p.a, p.info.ISCSILIFs[0]
	cred := "/api/protocols/san/iscsi/credentials/" + p.info.SVMUUID + "/default"
	a.must(200, "PATCH", cred, map[string]any{"authentication_type": "chap", "chap": map[string]any{"inbound": map[string]any{"user": "iu", "password": "initiatorsecret"}}})
	inbound := map[string]any{"username": "iu", "secret": "initiatorsecret"}
	mutual := map[string]any{"username": "iu", "secret": "initiatorsecret", "targetUsername": "tu", "targetSecret": "targetsecret"}
	chapTests := []struct {
		name   string
		chap   map[string]any
		status int
	}{
		{"missing", nil, 401},
		{"wrong secret", map[string]any{"username": "iu", "secret": "nope"}, 401},
		{"wrong user", map[string]any{"username": "x", "secret": "initiatorsecret"}, 401},
		{"mutual not configured", mutual, 401},
		{"right", inbound, 200},
	}
	for _, tt := range chapTests {
		t.Run("chap "+tt.name, func(t *testing.T) {
			a.t = t
			if st, body := p.login(portal, tt.chap); st != tt.status {
				t.Fatalf("status %d, want %d: %v", st, tt.status, body)
			}
		})
	}
	a.t = t
	a.must(200, "PATCH", cred, map[string]any{"chap": map[string]any{"outbound": map[string]any{"user": "tu", "password": "targetsecret"}}})
	if st, _ := p.login(portal, inbound); st != 401 {
		t.Fatalf("mutual CHAP without target creds: %d", st)
	}
	if st, _ := p.login(portal, mutual); st != 200 {
		t.Fatalf("mutual CHAP: %d", st)
	}
	// A per-initiator credential wins over the default.
	a.must(201, "POST", "/api/protocols/san/iscsi/credentials", map[string]any{"svm": map[string]any{"name": "svm0"}, "initiator": p.initiator, "authentication_type": "deny"})
	if st, _ := p.login(portal, mutual); st != 401 {
		t.Fatalf("denied initiator: %d", st)
	}
}

func TestSimAuxEndpoints(t *testing.T) {
	a := newTestSim(t, Config{})
	a.must(200, "GET", "/api/cluster", nil)
	st, body := a.simCall("GET", "/sim/stats", nil)
	eps := body["endpoints"].(map[string]any)
	if st != 200 || eps["GET /api/cluster"].(map[string]any)["requests"] != float64(1) {
		t.Fatalf("stats: %v", body)
	}
	if st, _ := a.simCall("POST", "/sim/stats/reset", nil); st != 200 || a.sim.Stats().Requests != 0 {
		t.Fatal("reset")
	}
	st, body = a.simCall("PUT", "/sim/faults", "GET /cluster=1:503@1")
	if st != 200 || body["spec"] != "GET /cluster=1:503@1" {
		t.Fatalf("set faults: %d %v", st, body)
	}
	a.wantErr(503, codeResourceLimit, "GET", "/api/cluster", nil)
	a.must(200, "GET", "/api/cluster", nil)
	if st, _ := a.simCall("PUT", "/sim/faults", "GET /cluster=2:503"); st != 400 {
		t.Fatal("bad fault spec accepted")
	}
	if st, body := a.simCall("GET", "/sim/info", nil); st != 200 || body["svm"] != "svm0" || body["targetIQN"] == "" {
		t.Fatalf("info: %v", body)
	}
	if st, _ := a.simCall("GET", "/sim/nope", nil); st != 404 {
		t.Fatal("unknown /sim endpoint")
	}
}
