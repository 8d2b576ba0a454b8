package ontapsim

import (
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

func TestLUNCreateValidation(t *testing.T) {
	a := newTestSim(t, Config{})
	a.createVolume(map[string]any{"name": "vol", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
	a.createLUN("/vol/vol/taken", 1*mib)
	lun := func(over map[string]any) map[string]any {
		b := map[string]any{"name": "/vol/vol/lun0", "os_type": "linux", "svm": map[string]any{"name": "svm0"}, "space": map[string]any{"size": 1 << 30}}
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
		{"missing os_type", lun(map[string]any{"os_type": nil}), 400, codeLUNMissingProp},
		{"missing size", lun(map[string]any{"space": nil}), 400, codeLUNMissingProp},
		{"bad os_type", lun(map[string]any{"os_type": "beos"}), 400, codeInvalidValue},
		{"negative size", lun(map[string]any{"space": map[string]any{"size": -1}}), 400, codeLUNSizeNegative},
		{"too small", lun(map[string]any{"space": map[string]any{"size": 512}}), 400, codeLUNSizeTooSmall},
		{"too large", lun(map[string]any{"space": map[string]any{"size": "129TB"}}), 400, codeLUNSizeTooLarge},
		{"bad chars", lun(map[string]any{"name": "/vol/vol/lun 0"}), 400, codeLUNNameChars},
		{"bad path", lun(map[string]any{"name": "vol/lun0"}), 400, codeLUNNameInvalid},
		{"qtree path", lun(map[string]any{"name": "/vol/vol/q1/lun0"}), 400, codeLUNNameInvalid},
		{"no volume", lun(map[string]any{"name": "/vol/none/lun0"}), 404, codeLUNVolNotFound},
		{"svm root", lun(map[string]any{"name": "/vol/svm0_root/lun0"}), 400, codeLUNInSVMRoot},
		{"exists", lun(map[string]any{"name": "/vol/vol/taken"}), 409, codeLUNExists},
		{"no svm", lun(map[string]any{"svm": nil}), 400, codeSVMMissing},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.t = t
			a.wantErr(tt.status, tt.code, "POST", "/api/storage/luns", tt.body)
		})
	}
}

func TestLUNLifecycle(t *testing.T) {
	a := newTestSim(t, Config{})
	a.createVolume(map[string]any{"name": "vol", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
	// Sizes are rounded up to 4 KiB; the backing file is sparse and sized.
	r := a.must(201, "POST", "/api/storage/luns?return_records=true", map[string]any{
		"name": "/vol/vol/lun0", "os_type": "linux", "svm": map[string]any{"name": "svm0"},
		"space": map[string]any{"size": 10*mib + 1, "guarantee": map[string]any{"requested": false}, "scsi_thin_provisioning_support_enabled": true},
	})
	rec := r.records()[0]
	uuid := rec["uuid"].(string)
	if got := dig(rec, "space.size"); got != float64(10*mib+4096) {
		t.Fatalf("size %v", got)
	}
	serial := rec["serial_number"].(string)
	if len(serial) != 12 || rec["serial_number_hex"] != hex.EncodeToString([]byte(serial)) {
		t.Fatalf("serial %q hex %v", serial, rec["serial_number_hex"])
	}
	li := a.sim.LUNs()[0]
	if fi, err := os.Stat(li.File); err != nil || fi.Size() != 10*mib+4096 {
		t.Fatalf("backing file: %v %v", fi, err)
	}
	p := "/api/storage/luns/" + uuid

	a.wantErr(400, codeLUNSameSize, "PATCH", p, map[string]any{"space": map[string]any{"size": 10*mib + 4096}})
	a.wantErr(400, codeLUNShrink, "PATCH", p, map[string]any{"space": map[string]any{"size": 5 * mib}})
	a.must(200, "PATCH", p, map[string]any{"space": map[string]any{"size": 20 * mib}})
	if fi, _ := os.Stat(li.File); fi.Size() != 20*mib {
		t.Fatalf("grown file size %d", fi.Size())
	}
	a.must(200, "PATCH", p, map[string]any{"comment": "hello"})
	a.wantErr(400, codeCannotSetField, "PATCH", p, map[string]any{"serial_number": "x"})

	// Attributes (Trident keeps the fs type there).
	attrs := p + "/attributes"
	a.must(201, "POST", attrs, map[string]any{"name": "com.netapp.ndvp.fstype", "value": "ext4"})
	a.wantErr(409, codeLUNAttrExists, "POST", attrs, map[string]any{"name": "com.netapp.ndvp.fstype", "value": "xfs"})
	a.wantErr(400, codeLUNAttrTooLong, "POST", attrs, map[string]any{"name": "big", "value": strings.Repeat("x", 4092)})
	a.wantErr(400, codeLUNAttrName, "POST", attrs, map[string]any{"name": "", "value": "x"})
	a.must(200, "PATCH", attrs+"/com.netapp.ndvp.fstype", map[string]any{"value": "xfs"})
	g := a.must(200, "GET", "/api/storage/luns?name=/vol/vol/lun0&fields=attributes.name,attributes.value,comment,space.size", nil)
	got := g.records()[0]
	if pat := a.must(200, "GET", "/api/storage/luns?name=/vol/v*/lun0&fields=serial_number", nil); len(pat.records()) != 1 || pat.records()[0]["serial_number"] != serial {
		t.Fatalf("LUN path pattern: %s", pat.raw)
	}
	if dig(got, "comment") != "hello" || fmt.Sprint(got["attributes"]) != "[map[name:com.netapp.ndvp.fstype value:xfs]]" {
		t.Fatalf("LUN: %s", g.raw)
	}
	a.must(200, "DELETE", attrs+"/com.netapp.ndvp.fstype", nil)
	a.wantErr(404, codeNotFound, "GET", attrs+"/com.netapp.ndvp.fstype", nil)

	// Mapped LUN: delete refused unless allow_delete_while_mapped.
	a.createIgroup("ig1", "iqn.1994-05.com.redhat:node1")
	a.mapLUN("/vol/vol/lun0", "ig1")
	if g := a.must(200, "GET", p+"?fields=status.mapped,lun_maps", nil).body; dig(g, "status.mapped") != true {
		t.Fatalf("mapped: %v", g)
	}
	a.wantErr(409, codeLUNMapped, "DELETE", p, nil)
	a.must(200, "DELETE", p+"?allow_delete_while_mapped=true", nil)
	if len(a.sim.LUNMaps()) != 0 {
		t.Fatal("maps left after deleting the LUN")
	}
	if _, err := os.Stat(li.File); !os.IsNotExist(err) {
		t.Fatalf("backing file left: %v", err)
	}
	a.wantErr(404, codeLUNNotFound, "GET", p, nil)
}

func TestReservedLUNNeedsSpace(t *testing.T) {
	a := newTestSim(t, Config{})
	a.createVolume(map[string]any{"name": "thick", "size": 100 * mib})
	body := map[string]any{"name": "/vol/thick/lun0", "os_type": "linux", "svm": map[string]any{"name": "svm0"},
		"space": map[string]any{"size": 200 * mib, "guarantee": map[string]any{"requested": true}}}
	r := a.wantErr(500, codeLUNNoSpace, "POST", "/api/storage/luns", body)
	if !strings.Contains(r.errMessage(), "not enough space") {
		t.Fatal(r.raw)
	}
	// Thin LUNs larger than the volume are allowed.
	body["space"] = map[string]any{"size": 200 * mib, "guarantee": map[string]any{"requested": false}}
	a.must(201, "POST", "/api/storage/luns", body)
}

func TestIgroupsAndInitiators(t *testing.T) {
	a := newTestSim(t, Config{})
	ig := func(name, init string) map[string]any {
		b := map[string]any{"name": name, "protocol": "iscsi", "os_type": "linux", "svm": map[string]any{"name": "svm0"}}
		if init != "" {
			b["initiators"] = []any{map[string]any{"name": init}}
		}
		return b
	}
	a.must(201, "POST", "/api/protocols/san/igroups", ig("node1-3f1c", ""))
	tests := []struct {
		name   string
		body   map[string]any
		status int
		code   int
	}{
		{"duplicate", ig("node1-3f1c", ""), 409, codeIgroupExists},
		{"name too long", ig(strings.Repeat("n", 97), ""), 400, codeIgroupNameInvalid},
		{"name with space", ig("a b", ""), 400, codeIgroupNameInvalid},
		{"bad initiator", ig("g2", "iqn.bogus"), 400, codeInitiatorInvalid},
		{"no os_type", map[string]any{"name": "g3", "svm": map[string]any{"name": "svm0"}}, 400, codeMissingRequired},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.t = t
			a.wantErr(tt.status, tt.code, "POST", "/api/protocols/san/igroups", tt.body)
		})
	}
	a.t = t
	uuid := a.sim.IGroups()[0].UUID
	inits := "/api/protocols/san/igroups/" + uuid + "/initiators"
	iqn := "iqn.1994-05.com.redhat:8a2b5c"
	a.must(201, "POST", inits, map[string]any{"name": iqn})
	a.wantErr(409, codeInitiatorExists, "POST", inits, map[string]any{"name": iqn})
	a.must(201, "POST", inits, map[string]any{"records": []any{map[string]any{"name": "iqn.2020-01.io.test:a"}, map[string]any{"name": "eui.0123456789abcdef"}}})
	g := a.must(200, "GET", "/api/protocols/san/igroups?name=node1-3f1c&fields=initiators.name", nil)
	if n := len(g.records()[0]["initiators"].([]any)); n != 3 {
		t.Fatalf("initiators: %s", g.raw)
	}
	// Filter on an array sub-field.
	if g := a.must(200, "GET", "/api/protocols/san/igroups?initiators.name="+iqn, nil); len(g.records()) != 1 {
		t.Fatalf("filter by initiator: %s", g.raw)
	}
	// The IQN is a path segment, colon included (escaped or not).
	a.wantErr(404, codeInitiatorNotMember, "DELETE", inits+"/iqn.1994-05.com.redhat:other", nil)
	a.must(200, "DELETE", inits+"/iqn.2020-01.io.test%3Aa", nil)

	// Mapped igroup: no initiator removal or delete without the flag.
	a.createVolume(map[string]any{"name": "v", "guarantee": map[string]any{"type": "none"}})
	a.createLUN("/vol/v/lun0", mib)
	a.mapLUN("/vol/v/lun0", "node1-3f1c")
	a.wantErr(409, codeIgroupMapped, "DELETE", inits+"/"+iqn, nil)
	a.wantErr(409, codeIgroupMapped, "DELETE", "/api/protocols/san/igroups/"+uuid, nil)
	a.must(200, "DELETE", "/api/protocols/san/igroups/"+uuid+"?allow_delete_while_mapped=true", nil)
	if len(a.sim.IGroups()) != 0 || len(a.sim.LUNMaps()) != 0 {
		t.Fatal("igroup or maps left")
	}
	a.wantErr(404, codeIgroupNotFound, "GET", "/api/protocols/san/igroups/"+uuid, nil)
}

// postLUNMap maps lun to igroup ig, at id unless it is nil.
func (a *testAPI) postLUNMap(lun, ig string, id any) resp {
	b := map[string]any{"lun": map[string]any{"name": lun}, "igroup": map[string]any{"name": ig}, "svm": map[string]any{"name": "svm0"}}
	if id != nil {
		b["logical_unit_number"] = id
	}
	return a.do("POST", "/api/protocols/san/lun-maps?return_records=true", b)
}

func TestLUNMapIDs(t *testing.T) {
	a := newTestSim(t, Config{})
	a.createVolume(map[string]any{"name": "v", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
	for i := 0; i < 4; i++ {
		a.createLUN(fmt.Sprintf("/vol/v/lun%d", i), mib)
	}
	nodeA := "iqn.2020-01.io.test:a"
	a.createIgroup("ga", nodeA)
	// Lowest free ID per igroup.
	for i := 0; i < 3; i++ {
		if id := a.mapLUN(fmt.Sprintf("/vol/v/lun%d", i), "ga"); id != i {
			t.Fatalf("map %d got id %d", i, id)
		}
	}
	lun1 := a.sim.LUNs()[1]
	ga := a.sim.IGroups()[0]
	a.must(200, "DELETE", "/api/protocols/san/lun-maps/"+lun1.UUID+"/"+ga.UUID, nil)
	a.wantErr(404, codeMapNotFound, "DELETE", "/api/protocols/san/lun-maps/"+lun1.UUID+"/"+ga.UUID, nil)
	if id := a.mapLUN("/vol/v/lun3", "ga"); id != 1 {
		t.Fatalf("reused id %d, want 1", id)
	}
	post := a.postLUNMap
	if r := post("/vol/v/lun0", "ga", nil); r.status != 409 || r.errCode() != itoa64(codeMapDuplicate) {
		t.Fatalf("duplicate map: %s", r.raw)
	}
	if r := post("/vol/v/lun1", "ga", 2); r.status != 409 || r.errCode() != itoa64(codeMapLUNIDInUse) {
		t.Fatalf("explicit id in use: %s", r.raw)
	}
	if r := post("/vol/v/lun1", "ga", 4096); r.status != 400 {
		t.Fatalf("id out of range: %s", r.raw)
	}
	if r := post("/vol/v/nope", "ga", nil); r.status != 404 || r.errCode() != itoa64(codeMapLUNNotFound) {
		t.Fatalf("missing LUN: %s", r.raw)
	}
	if r := post("/vol/v/lun1", "nope", nil); r.status != 404 || r.errCode() != itoa64(codeIgroupNotFound) {
		t.Fatalf("missing igroup: %s", r.raw)
	}
	a.wantErr(400, codeMapNoLUN, "POST", "/api/protocols/san/lun-maps", map[string]any{"igroup": map[string]any{"name": "ga"}})
	a.wantErr(400, codeMapNoIgroup, "POST", "/api/protocols/san/lun-maps", map[string]any{"lun": map[string]any{"name": "/vol/v/lun1"}})
	if r := post("/vol/v/lun1", "ga", 7); r.status != 201 || r.records()[0]["logical_unit_number"] != float64(7) {
		t.Fatalf("explicit id: %s", r.raw)
	}
	lunMapIDsAcrossIgroups(t, a, nodeA)
	lunMapLookups(t, a, nodeA)
}

// lunMapIDsAcrossIgroups: IDs are unique per initiator across igroups.
func lunMapIDsAcrossIgroups(t *testing.T, a *testAPI, nodeA string) {
	post := a.postLUNMap
	// gb shares nodeA.
	a.createIgroup("gb", nodeA)
	a.createVolume(map[string]any{"name": "w", "size": "1GB", "guarantee": map[string]any{"type": "none"}})
	a.createLUN("/vol/w/lun0", mib)
	if id := a.mapLUN("/vol/w/lun0", "gb"); id != 3 {
		t.Fatalf("id across igroups %d, want 3 (%s sees 0, 1, 2 and 7 through ga)", id, nodeA)
	}
	// The same LUN through two igroups of one initiator is refused.
	if r := post("/vol/v/lun0", "gb", nil); r.errCode() != itoa64(codeInitiatorSameLUN) {
		t.Fatalf("same LUN twice: %s", r.raw)
	}
	// Adding an initiator that would see one ID twice is refused.
	a.createIgroup("gc")
	a.createLUN("/vol/w/lun1", mib)
	a.mapLUN("/vol/w/lun1", "gc") // id 0 in gc; nodeA already sees id 0 through ga
	gc := a.sim.IGroups()[2]
	if gc.Name != "gc" {
		t.Fatalf("igroups: %+v", a.sim.IGroups())
	}
	a.wantErr(409, codeInitiatorSameLUNID, "POST", "/api/protocols/san/igroups/"+gc.UUID+"/initiators", map[string]any{"name": nodeA})
}

// lunMapLookups: Trident's lookups filter by names and ask for the
// hyphenated field.
func lunMapLookups(t *testing.T, a *testAPI, nodeA string) {
	r := a.must(200, "GET", "/api/protocols/san/lun-maps?lun.name=/vol/v/lun0&igroup.name=ga&fields=svm,lun,igroup,logical-unit-number", nil)
	if recs := r.records(); len(recs) != 1 || recs[0]["logical_unit_number"] != float64(0) || dig(recs[0], "svm.name") != "svm0" {
		t.Fatalf("lun-map lookup: %s", r.raw)
	}
	// A lun-map's igroup.initiators is a list of names in ONTAP's lun_map
	// schema (an igroup's own initiators are objects), so ONTAP refuses a
	// field below it.
	r = a.must(200, "GET", "/api/protocols/san/lun-maps?igroup.name=ga&fields=igroup.initiators", nil)
	if recs := r.records(); len(recs) == 0 || fmt.Sprint(dig(recs[0], "igroup.initiators")) != "["+nodeA+"]" {
		t.Fatalf("lun-map igroup.initiators: %s", r.raw)
	}
	a.wantErr(400, codeInvalidValue, "GET", "/api/protocols/san/lun-maps?fields=igroup.initiators.name", nil)
}

func TestReportingNodes(t *testing.T) {
	a := newTestSim(t, Config{Nodes: 4})
	a.createVolume(map[string]any{"name": "v", "guarantee": map[string]any{"type": "none"}})
	a.createLUN("/vol/v/lun0", mib)
	a.createIgroup("g", "iqn.2020-01.io.test:a")
	a.mapLUN("/vol/v/lun0", "g")
	m := a.sim.LUNMaps()[0]
	if strings.Join(m.ReportingNodes, ",") != "sim-cluster-01,sim-cluster-02" {
		t.Fatalf("default reporting nodes %v", m.ReportingNodes)
	}
	l, g := a.sim.LUNs()[0], a.sim.IGroups()[0]
	base := "/api/protocols/san/lun-maps/" + l.UUID + "/" + g.UUID + "/reporting-nodes"
	if r := a.must(200, "GET", base, nil); len(r.records()) != 2 {
		t.Fatal(r.raw)
	}
	a.must(201, "POST", base, map[string]any{"name": "sim-cluster-03"})
	a.wantErr(409, codeDuplicate, "POST", base, map[string]any{"name": "sim-cluster-03"})
	a.wantErr(404, codeNotFound, "POST", base, map[string]any{"name": "sim-cluster-09"})
	var owner, third string
	for _, r := range a.must(200, "GET", base, nil).records() {
		switch r["name"] {
		case "sim-cluster-01":
			owner = r["uuid"].(string)
		case "sim-cluster-03":
			third = r["uuid"].(string)
		}
	}
	a.wantErr(400, codeInvalidField, "DELETE", base+"/"+owner, nil)
	a.must(200, "DELETE", base+"/"+third, nil)
	// additional_reporting_node on create.
	a.createLUN("/vol/v/lun1", mib)
	a.must(201, "POST", "/api/protocols/san/lun-maps?additional_reporting_node.name=sim-cluster-04", map[string]any{
		"lun": map[string]any{"name": "/vol/v/lun1"}, "igroup": map[string]any{"name": "g"}})
	for _, mp := range a.sim.LUNMaps() {
		if mp.LUNPath == "/vol/v/lun1" && len(mp.ReportingNodes) != 3 {
			t.Fatalf("reporting nodes with additional: %v", mp.ReportingNodes)
		}
	}
}

func TestISCSIServiceAndCHAP(t *testing.T) {
	a := newTestSim(t, Config{})
	svm := a.svmUUID()
	r := a.must(200, "GET", "/api/protocols/san/iscsi/services?svm.uuid="+svm+"&fields=target.name,enabled&return_records=true", nil)
	iqn := dig(r.records()[0], "target.name").(string)
	if !strings.HasPrefix(iqn, "iqn.1992-08.com.netapp:sn.") || !strings.HasSuffix(iqn, ":vs.2") || dig(r.records()[0], "enabled") != true {
		t.Fatalf("iscsi service: %s", r.raw)
	}
	a.must(200, "GET", "/api/protocols/san/iscsi/services/"+svm+"?fields=target.name", nil)
	a.wantErr(404, codeISCSINoService, "GET", "/api/protocols/san/iscsi/services/nope", nil)

	cr := a.must(200, "GET", "/api/protocols/san/iscsi/credentials?svm.uuid="+svm+"&initiator=default&fields=svm.name,chap.inbound.user,chap.outbound.user,initiator,authentication_type", nil)
	if recs := cr.records(); len(recs) != 1 || recs[0]["authentication_type"] != "none" {
		t.Fatalf("default credential: %s", cr.raw)
	}
	p := "/api/protocols/san/iscsi/credentials/" + svm + "/default"
	tests := []struct {
		name string
		body map[string]any
		code int
	}{
		{"chap without inbound", map[string]any{"authentication_type": "chap"}, codeChapInboundRequired},
		{"equal passwords", map[string]any{"authentication_type": "chap", "chap": map[string]any{
			"inbound": map[string]any{"user": "u", "password": "secretsecret"}, "outbound": map[string]any{"user": "t", "password": "secretsecret"}}}, codeChapPasswordsEqual},
		{"outbound without password", map[string]any{"authentication_type": "chap", "chap": map[string]any{
			"inbound": map[string]any{"user": "u", "password": "secretsecret"}, "outbound": map[string]any{"user": "t"}}}, codeChapOutboundPass},
		{"odd hex", map[string]any{"authentication_type": "chap", "chap": map[string]any{
			"inbound": map[string]any{"user": "u", "password": "0xabc"}}}, codeChapHexOdd},
		{"chap props with none", map[string]any{"authentication_type": "none", "chap": map[string]any{
			"inbound": map[string]any{"user": "u", "password": "p"}}}, codeChapWithNone},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a.t = t
			a.wantErr(400, tt.code, "PATCH", p, tt.body)
		})
	}
	a.t = t
	a.must(200, "PATCH", p, map[string]any{"authentication_type": "chap", "chap": map[string]any{
		"inbound": map[string]any{"user": "u", "password": "secretsecret"}, "outbound": map[string]any{"user": "t", "password": "targetsecret"}}})
	g := a.must(200, "GET", p, nil)
	if dig(g.body, "chap.inbound.user") != "u" || dig(g.body, "chap.outbound.user") != "t" || strings.Contains(g.raw, "secret") {
		t.Fatalf("credential (passwords must be write-only): %s", g.raw)
	}
	a.wantErr(400, 5374155, "DELETE", p, nil)
	a.must(201, "POST", "/api/protocols/san/iscsi/credentials", map[string]any{"svm": map[string]any{"uuid": svm},
		"initiator": "iqn.2020-01.io.test:x", "authentication_type": "deny"})
	a.wantErr(409, codeChapExists, "POST", "/api/protocols/san/iscsi/credentials", map[string]any{"svm": map[string]any{"uuid": svm},
		"initiator": "iqn.2020-01.io.test:x", "authentication_type": "deny"})
	a.must(200, "DELETE", "/api/protocols/san/iscsi/credentials/"+svm+"/iqn.2020-01.io.test:x", nil)
}

func TestAsyncLUNOperations(t *testing.T) {
	// ONTAP 9.16.1+ documents LUN POST as asynchronous; clients must cope.
	a := newTestSim(t, Config{ONTAPVersion: "9.16.1"})
	if c := a.must(200, "GET", "/api/cluster?fields=san_optimized,disaggregated&ignore_unknown_fields=true", nil).body; c["san_optimized"] != false {
		t.Fatalf("9.16.1 cluster fields: %v", c)
	}
	a.createVolume(map[string]any{"name": "v", "guarantee": map[string]any{"type": "none"}})
	body := map[string]any{"name": "/vol/v/lun0", "os_type": "linux", "svm": map[string]any{"name": "svm0"}, "space": map[string]any{"size": mib}}
	r := a.must(202, "POST", "/api/storage/luns", body)
	if r.header.Get("Location") != "/api/storage/luns/?name=%2Fvol%2Fv%2Flun0" {
		t.Fatalf("Location %q", r.header.Get("Location"))
	}
	if j := waitJob(t, a, r); j["state"] != "success" {
		t.Fatalf("LUN create job %v", j)
	}
	a.wantErr(409, codeLUNExists, "POST", "/api/storage/luns?return_timeout=10", body)
	uuid := a.sim.LUNs()[0].UUID
	waitJob(t, a, a.must(202, "PATCH", "/api/storage/luns/"+uuid, map[string]any{"space": map[string]any{"size": 2 * mib}}))
	a.wantErr(400, codeLUNShrink, "PATCH", "/api/storage/luns/"+uuid+"?return_timeout=10", map[string]any{"space": map[string]any{"size": mib}})
	a.must(200, "DELETE", "/api/storage/luns/"+uuid+"?return_timeout=10", nil)
	if len(a.sim.LUNs()) != 0 {
		t.Fatal("LUN left")
	}
}
