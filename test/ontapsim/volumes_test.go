package ontapsim

import (
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestVolumeCreateValidation(t *testing.T) {
	a := newTestSim(t, Config{})
	base := func(over map[string]any) map[string]any {
		b := map[string]any{"name": "vol_ok", "svm": map[string]any{"name": "svm0"}, "aggregates": []any{map[string]any{"name": "aggr1"}}}
		for k, v := range over {
			if v == nil {
				delete(b, k)
			} else {
				b[k] = v
			}
		}
		return b
	}
	tests := []struct {
		name   string
		body   map[string]any
		status int
		code   int
	}{
		{"name too long", base(map[string]any{"name": strings.Repeat("a", 204)}), 400, codeVolNameTooLong},
		{"first char digit", base(map[string]any{"name": "1vol"}), 400, codeVolNameFirstChar},
		{"dash in name", base(map[string]any{"name": "vol-1"}), 400, codeVolNameInvalid},
		{"missing name", base(map[string]any{"name": nil}), 400, codeMissingRequired},
		{"no svm", base(map[string]any{"svm": nil}), 400, codeSVMMissing},
		{"empty svm object", base(map[string]any{"svm": map[string]any{}}), 400, codeSVMMissing},
		{"unknown svm", base(map[string]any{"svm": map[string]any{"name": "nope"}}), 404, codeSVMNotFound},
		{"no aggregates", base(map[string]any{"aggregates": nil}), 400, codeNeedAggregates},
		{"size below 20MiB", base(map[string]any{"size": 20*mib - 8192}), 400, codeVolSizeTooSmall},
		{"size string too small", base(map[string]any{"size": "10MB"}), 400, codeVolSizeTooSmall},
		{"bad size string", base(map[string]any{"size": "ten"}), 400, codeInvalidValue},
		{"reserve above 90", base(map[string]any{"space": map[string]any{"snapshot": map[string]any{"reserve_percent": 91}}}), 400, codeReserveTooLarge},
		{"bad junction", base(map[string]any{"nas": map[string]any{"path": "vol_ok"}}), 400, codeJunctionInvalid},
		{"junction trailing slash", base(map[string]any{"nas": map[string]any{"path": "/vol_ok/"}}), 400, codeJunctionInvalid},
		{"bad guarantee", base(map[string]any{"guarantee": map[string]any{"type": "file"}}), 400, codeInvalidValue},
		{"unknown field", base(map[string]any{"bogus": 1}), 400, codeUnexpectedArgument},
		{"read-only field", base(map[string]any{"uuid": "x"}), 400, codeCannotSetField},
		{"bad permissions", base(map[string]any{"nas": map[string]any{"unix_permissions": 789}}), 400, codeInvalidValue},
		{"flexgroup", base(map[string]any{"aggregates": []any{map[string]any{"name": "aggr1"}, map[string]any{"name": "aggr2"}}}), 400, codeNotSupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.t = t
			a.wantErr(tt.status, tt.code, "POST", "/api/storage/volumes", tt.body)
		})
	}
	a.t = t
	if got := len(a.sim.Volumes()); got != 1 {
		t.Fatalf("after rejected creates: %d volumes, want only the root", got)
	}
}

func TestVolumeCreateDefaultsAndRounding(t *testing.T) {
	a := newTestSim(t, Config{})
	tests := []struct {
		name string
		size any
		want int64
	}{
		{"default size is the minimum", nil, 20 * mib},
		{"exact minimum", 20 * mib, 20 * mib},
		{"rounded up to 4KiB", 20*mib + 1, 20*mib + 4096},
		{"string with suffix", "1GB", 1 << 30},
		{"short suffix", "300G", 300 << 30},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.t = t
			body := map[string]any{"name": "v" + string(rune('a'+i)), "guarantee": map[string]any{"type": "none"}}
			if tt.size != nil {
				body["size"] = tt.size
			}
			uuid := a.createVolume(body)
			r := a.must(200, "GET", "/api/storage/volumes/"+uuid+"?fields=size,guarantee.type,snapshot_policy.name,nas.export_policy.name,state,style,type", nil)
			if got := int64(r.body["size"].(float64)); got != tt.want {
				t.Errorf("size %d, want %d", got, tt.want)
			}
			for path, want := range map[string]any{"guarantee.type": "none", "snapshot_policy.name": "default",
				"nas.export_policy.name": "default", "state": "online", "style": "flexvol", "type": "rw"} {
				if got := dig(r.body, path); got != want {
					t.Errorf("%s = %v, want %v", path, got, want)
				}
			}
		})
	}
}

func TestVolumeDuplicateName(t *testing.T) {
	for _, sync := range []bool{false, true} {
		t.Run(map[bool]string{false: "job failure", true: "sync 409"}[sync], func(t *testing.T) {
			a := newTestSim(t, Config{SyncDuplicateCheck: sync})
			a.createVolume(map[string]any{"name": "dup", "guarantee": map[string]any{"type": "none"}})
			body := map[string]any{"name": "dup", "svm": map[string]any{"name": "svm0"}, "aggregates": []any{map[string]any{"name": "aggr1"}}}
			if sync {
				a.wantErr(409, codeVolDuplicate, "POST", "/api/storage/volumes", body)
				return
			}
			r := a.must(202, "POST", "/api/storage/volumes", body)
			j := waitJob(t, a, r)
			if j["state"] != "failure" || j["code"] != float64(codeVolDuplicate) {
				t.Fatalf("job %v, want failure code %d", j, codeVolDuplicate)
			}
			// With return_timeout the job's error is the answer.
			a.wantErr(409, codeVolDuplicate, "POST", "/api/storage/volumes?return_timeout=10", body)
		})
	}
}

func TestVolumeResizeAndPatch(t *testing.T) {
	a := newTestSim(t, Config{})
	uuid := a.createVolume(map[string]any{"name": "pv", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
	p := "/api/storage/volumes/" + uuid

	a.wantErr(400, codeVolSizeTooSmall, "PATCH", p, map[string]any{"size": 1024})
	a.wantErr(400, codeNoPatchValues, "PATCH", p, map[string]any{})
	a.wantErr(400, codeCannotSetField, "PATCH", p, map[string]any{"aggregates": []any{map[string]any{"name": "aggr2"}}})
	a.wantErr(404, codeNotFound, "PATCH", "/api/storage/volumes/no-such-uuid", map[string]any{"size": "2GB"})

	// Every volume PATCH is a job: 202 without return_timeout.
	r := a.must(202, "PATCH", p, map[string]any{"size": "2GB"})
	if j := waitJob(t, a, r); j["state"] != "success" {
		t.Fatalf("resize job: %v", j)
	}
	a.must(200, "PATCH", p+"?return_timeout=10", map[string]any{"comment": `{"provisioning":{"k":"v"}}`})
	a.must(200, "PATCH", p+"?return_timeout=10", map[string]any{"snapshot_directory_access_enabled": false})
	a.must(200, "PATCH", p+"?return_timeout=10", map[string]any{"nas": map[string]any{"unix_permissions": 700}})
	g := a.must(200, "GET", p+"?fields=size,comment,snapshot_directory_access_enabled,nas.unix_permissions", nil).body
	if g["size"] != float64(2<<30) || g["comment"] != `{"provisioning":{"k":"v"}}` || g["snapshot_directory_access_enabled"] != false || dig(g, "nas.unix_permissions") != float64(700) {
		t.Fatalf("after patches: %v", g)
	}
	v, _ := a.sim.Volume("pv")
	st, err := os.Stat(v.Directory)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Fatalf("volume directory mode %v (%v), want 0700", st.Mode().Perm(), err)
	}
	// Rename keeps the UUID.
	a.must(200, "PATCH", p+"?return_timeout=10", map[string]any{"name": "pv2"})
	if a.volumeUUID("pv2") != uuid {
		t.Fatal("rename changed the UUID")
	}
}

func TestJunctionPaths(t *testing.T) {
	a := newTestSim(t, Config{})
	thin := map[string]any{"type": "none"}
	v1 := a.createVolume(map[string]any{"name": "v1", "guarantee": thin})
	v2 := a.createVolume(map[string]any{"name": "v2", "guarantee": thin})
	mount := func(uuid, p string) resp {
		return a.do("PATCH", "/api/storage/volumes/"+uuid+"?return_timeout=10", map[string]any{"nas": map[string]any{"path": p}})
	}
	if r := mount(v1, "/v1"); r.status != 200 {
		t.Fatalf("mount: %s", r.raw)
	}
	tests := []struct {
		name string
		path string
		code int
	}{
		{"same path (case-insensitive)", "/V1", codeJunctionInvalid},
		{"missing parent", "/nope/v2", codeJunctionInvalid},
		{"root taken", "/", codeJunctionInvalid},
		{"not absolute", "v2", codeJunctionInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := mount(v2, tt.path)
			if r.errCode() != itoa64(int64(tt.code)) {
				t.Fatalf("mount %s: %s", tt.path, r.raw)
			}
		})
	}
	// Nested below a mounted volume, and inside a directory of it.
	if r := mount(v2, "/v1/v2"); r.status != 200 {
		t.Fatalf("nested mount: %s", r.raw)
	}
	if r := mount(v2, ""); r.status != 200 {
		t.Fatalf("unmount: %s", r.raw)
	}
	v, _ := a.sim.Volume("v1")
	if err := os.Mkdir(filepath.Join(v.Directory, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	if r := mount(v2, "/v1/sub/v2"); r.status != 200 {
		t.Fatalf("mount under a directory: %s", r.raw)
	}
	// GET omits nas.path when unmounted; offline drops the junction.
	a.must(200, "PATCH", "/api/storage/volumes/"+v2+"?return_timeout=10", map[string]any{"state": "offline"})
	g := a.must(200, "GET", "/api/storage/volumes/"+v2+"?fields=nas.path,state", nil).body
	if dig(g, "nas.path") != nil || g["state"] != "offline" {
		t.Fatalf("offline volume: %v", g)
	}
	if r := mount(v2, "/v2"); r.errCode() != itoa64(codeVolNotOnline) {
		t.Fatalf("mount offline volume: %s", r.raw)
	}
}

func TestThickThinSpaceAccounting(t *testing.T) {
	a := newTestSim(t, Config{Aggregates: []AggregateConfig{{Name: "aggr1", Node: 0}, {Name: "small", Node: 1, Size: 1 << 30}}})
	body := func(name string, size int64, guarantee string) map[string]any {
		return map[string]any{"name": name, "size": size, "guarantee": map[string]any{"type": guarantee},
			"aggregates": []any{map[string]any{"name": "small"}}, "svm": map[string]any{"name": "svm0"}}
	}
	if got := aggrAvailable(t, a, "small"); got != 1<<30 {
		t.Fatalf("empty aggregate: available %d", got)
	}
	// Thin volumes over-commit freely and take (almost) nothing.
	a.must(201, "POST", "/api/storage/volumes?return_timeout=10", body("thin1", 100<<30, "none"))
	if got := aggrAvailable(t, a, "small"); got < 1<<30-mib {
		t.Fatalf("after thin create: available %d", got)
	}
	// A thick create takes its full size...
	a.must(201, "POST", "/api/storage/volumes?return_timeout=10", body("thick1", 512*mib, "volume"))
	if got := aggrAvailable(t, a, "small"); got > 512*mib || got < 512*mib-mib {
		t.Fatalf("after thick 512MiB: available %d", got)
	}
	// ...and one that does not fit fails in its job, leaving nothing.
	r := a.wantErr(500, codeJobFailed, "POST", "/api/storage/volumes?return_timeout=10", body("thick2", 600*mib, "volume"))
	if !strings.Contains(r.errMessage(), "not enough space in aggregate") {
		t.Fatalf("message: %s", r.errMessage())
	}
	if _, ok := a.sim.Volume("thick2"); ok {
		t.Fatal("failed thick create left a volume")
	}
	// Data written into a thin volume is charged to the aggregate.
	v, _ := a.sim.Volume("thin1")
	if err := os.WriteFile(filepath.Join(v.Directory, "data"), make([]byte, 8*mib), 0o644); err != nil {
		t.Fatal(err)
	}
	if got := aggrAvailable(t, a, "small"); got > 512*mib-7*mib {
		t.Fatalf("after writing 8MiB into the thin volume: available %d", got)
	}
}

func TestThickSpaceAccountingGrow(t *testing.T) {
	a := newTestSim(t, Config{Aggregates: []AggregateConfig{{Name: "aggr1", Node: 0, Size: 4 << 30}}})
	before := aggrAvailable(t, a, "aggr1")
	uuid := a.createVolume(map[string]any{"name": "thick", "size": 1 << 30})
	if got := aggrAvailable(t, a, "aggr1"); got != before-(1<<30) {
		t.Fatalf("thick 1GiB volume: available %d -> %d", before, got)
	}
	// Growing past the aggregate fails and changes nothing.
	r := a.wantErr(500, codeJobFailed, "PATCH", "/api/storage/volumes/"+uuid+"?return_timeout=10", map[string]any{"size": 10 << 30})
	if !strings.Contains(r.errMessage(), "not enough space") {
		t.Fatal(r.raw)
	}
	if v, _ := a.sim.Volume("thick"); v.Size != 1<<30 {
		t.Fatalf("size after failed grow: %d", v.Size)
	}
	// Switching to thin gives the space back.
	a.must(200, "PATCH", "/api/storage/volumes/"+uuid+"?return_timeout=10", map[string]any{"guarantee": map[string]any{"type": "none"}})
	if got := aggrAvailable(t, a, "aggr1"); got < before-(1<<20) {
		t.Fatalf("after thin: available %d, want about %d", got, before)
	}
}

func aggrAvailable(t *testing.T, a *testAPI, name string) int64 {
	t.Helper()
	r := a.must(200, "GET", "/api/storage/aggregates?name="+name+"&fields=space.block_storage.available", nil)
	recs := r.records()
	if len(recs) != 1 {
		t.Fatalf("aggregate %s: %v", name, r.raw)
	}
	return int64(dig(recs[0], "space.block_storage.available").(float64))
}

func TestVolumeDelete(t *testing.T) {
	a := newTestSim(t, Config{})
	thin := map[string]any{"type": "none"}
	uuid := a.createVolume(map[string]any{"name": "gone", "guarantee": thin, "nas": map[string]any{"path": "/gone"}})
	dir, _ := a.sim.Volume("gone")

	// Lenient by default: mounted volume with a mapped LUN goes away with them.
	a.createLUN("/vol/gone/lun0", 1<<20)
	a.createIgroup("ig", "iqn.2020-01.io.test:node1")
	a.mapLUN("/vol/gone/lun0", "ig")
	r := a.must(202, "DELETE", "/api/storage/volumes/"+uuid+"?force=true", nil)
	if j := waitJob(t, a, r); j["state"] != "success" {
		t.Fatalf("delete job: %v", j)
	}
	if len(a.sim.LUNs()) != 0 || len(a.sim.LUNMaps()) != 0 {
		t.Fatalf("LUNs or maps left: %v %v", a.sim.LUNs(), a.sim.LUNMaps())
	}
	if _, err := os.Stat(dir.Directory); !os.IsNotExist(err) {
		t.Fatalf("backing dir still there: %v", err)
	}
	a.wantErr(404, codeNotFound, "DELETE", "/api/storage/volumes/"+uuid, nil)
	a.wantErr(404, codeNotFound, "GET", "/api/storage/volumes/"+uuid, nil)

	// Without force the volume goes to the recovery queue and frees its name.
	uuid = a.createVolume(map[string]any{"name": "rq", "guarantee": thin})
	a.must(200, "DELETE", "/api/storage/volumes/"+uuid+"?return_timeout=10", nil)
	if _, ok := a.sim.Volume("rq"); ok {
		t.Fatal("volume still visible")
	}
	if q := a.sim.RecoveryQueue(); len(q) != 1 || !strings.HasPrefix(q[0].Name, "rq_") {
		t.Fatalf("recovery queue: %+v", q)
	}
	a.createVolume(map[string]any{"name": "rq", "guarantee": thin})

	// Root volume cannot go.
	root, _ := a.sim.Volume("svm0_root")
	a.wantErr(409, codeVolIsSVMRoot, "DELETE", "/api/storage/volumes/"+root.UUID+"?return_timeout=10", nil)
	a.wantErr(400, codeBodyNotAllowed, "DELETE", "/api/storage/volumes/"+root.UUID, `{"x":1}`)
}

func TestStrictVolumeDelete(t *testing.T) {
	a := newTestSim(t, Config{StrictVolumeDelete: true})
	uuid := a.createVolume(map[string]any{"name": "m", "guarantee": map[string]any{"type": "none"}, "nas": map[string]any{"path": "/m"}})
	a.wantErr(409, codeInUse, "DELETE", "/api/storage/volumes/"+uuid+"?return_timeout=10", nil)
	a.must(200, "PATCH", "/api/storage/volumes/"+uuid+"?return_timeout=10", map[string]any{"nas": map[string]any{"path": ""}})
	a.must(200, "DELETE", "/api/storage/volumes/"+uuid+"?return_timeout=10&force=true", nil)
}

// waitJob polls the job of a 202 answer until it is terminal.
func waitJob(t *testing.T, a *testAPI, r resp) map[string]any {
	t.Helper()
	if r.status != http.StatusAccepted {
		t.Fatalf("want 202 with a job, got %d: %s", r.status, r.raw)
	}
	href := dig(r.body, "job._links.self.href").(string)
	for {
		j := a.must(200, "GET", href, nil).body
		switch j["state"] {
		case "success", "failure":
			return j
		case "queued", "running":
		default:
			t.Fatalf("job state %v", j["state"])
		}
		a.sim.sleep(5e6)
	}
}

// ONTAP's size limits (docs/design/ontap-rest.md §4.2): a FlexVol holds at
// most 100 TiB, and 300 TiB with space.large_size_enabled, which ONTAP
// knows from 9.12.1; a LUN at most 16 TiB unless its volume has large size
// enabled (files of a volume), and 128 TiB in any case.
func TestVolumeAndLUNSizeLimits(t *testing.T) {
	a := newTestSim(t, Config{})
	thin := func(name string, size any, large ...bool) map[string]any {
		b := map[string]any{"name": name, "svm": map[string]any{"name": "svm0"}, "aggregates": []any{map[string]any{"name": "aggr1"}},
			"size": size, "guarantee": map[string]any{"type": "none"}}
		if len(large) > 0 {
			b["space"] = map[string]any{"large_size_enabled": large[0]}
		}
		return b
	}
	a.wantErr(400, codeVolSizeTooSmall, "POST", "/api/storage/volumes", thin("big", 100*tib+4096))
	a.wantErr(400, codeVolSizeTooSmall, "POST", "/api/storage/volumes", thin("eib", "1PB"))
	a.wantErr(400, codeVolSizeTooSmall, "POST", "/api/storage/volumes", thin("big", 300*tib+4096, true))
	if r := a.do("POST", "/api/storage/volumes", thin("eib", 1<<60)); r.status != 400 || !strings.Contains(r.errMessage(), "too large") {
		t.Fatalf("1 EiB volume: %d %s", r.status, r.raw)
	}
	a.createVolume(thin("at_limit", 100*tib))
	big := a.createVolume(thin("large", 200*tib, true))
	if r := a.must(200, "GET", "/api/storage/volumes/"+big+"?fields=space.large_size_enabled,size", nil); dig(r.body, "space.large_size_enabled") != true {
		t.Fatalf("large volume reads back %s", r.raw)
	}
	small := a.createVolume(thin("small", 50*tib))
	// A resize is checked in its job: return_timeout brings the failure back.
	a.wantErr(400, codeVolSizeTooSmall, "PATCH", "/api/storage/volumes/"+small+"?return_timeout=30", map[string]any{"size": 150 * tib})
	a.must(200, "PATCH", "/api/storage/volumes/"+small+"?return_timeout=30", map[string]any{"size": 150 * tib, "space": map[string]any{"large_size_enabled": true}})
	a.createVolume(thin("luns", 20*tib))
	a.wantErr(400, codeLUNSizeTooLarge, "POST", "/api/storage/luns", map[string]any{
		"name": "/vol/luns/lun0", "os_type": "linux", "svm": map[string]any{"name": "svm0"}, "space": map[string]any{"size": 16*tib + 4096}})

	old := newTestSim(t, Config{ONTAPVersion: "9.11.1"})
	old.wantErr(400, codeUnexpectedArgument, "POST", "/api/storage/volumes", thin("large", 200*tib, true))
}
