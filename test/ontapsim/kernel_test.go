package ontapsim

import (
	"fmt"
	"reflect"
	"strconv"
	"testing"
)

// The kernel data plane's apply runs against a real kernel in test/vm;
// here: what it derives from the model.

func desired(t *testing.T, s *Simulator) kernelState {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.desiredKernel()
}

func TestKernelDesiredSAN(t *testing.T) {
	a := newTestSim(t, Config{})
	s := a.sim
	info := s.Info()
	const ini, other = "iqn.2005-03.org.open-iscsi:node-1", "iqn.2005-03.org.open-iscsi:node-2"
	if _, err := s.CreateVolume(VolumeSpec{Name: "v1", Size: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	lun, err := s.CreateLUN(LUNSpec{Path: "/vol/v1/lun0", Size: 64 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIGroup("g1", "", "", ini); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIGroup("g2", "", "", other); err != nil {
		t.Fatal(err)
	}
	id, err := s.MapLUN(lun.Path, "g1")
	if err != nil {
		t.Fatal(err)
	}

	st := desired(t, s)
	want := lioBackstore{File: lun.File, Size: 64 << 20, Serial: lun.Serial}
	if got := st.backstores[lun.UUID]; got != want || len(st.backstores) != 1 {
		t.Fatalf("backstores %+v, want %s: %+v", st.backstores, lun.UUID, want)
	}
	tgt := st.targets[info.TargetIQN]
	if tgt == nil || len(tgt.TPGs) != len(info.ISCSILIFs) {
		t.Fatalf("target %s: %+v, want a TPG per iSCSI LIF %v", info.TargetIQN, tgt, info.ISCSILIFs)
	}
	for i, lif := range info.ISCSILIFs {
		tpg := tgt.TPGs[i+1]
		if tpg == nil || tpg.Portal != lif+":3260" || !tpg.LUNs[lun.UUID] {
			t.Fatalf("TPG %d: %+v, want portal %s:3260 exporting the LUN", i+1, tpg, lif)
		}
		if acl := tpg.ACLs[ini]; acl == nil || acl.CHAP != nil || !reflect.DeepEqual(acl.LUNs, map[int]string{id: lun.UUID}) {
			t.Fatalf("TPG %d ACL of %s: %+v, want LUN %d without CHAP", i+1, ini, acl, id)
		}
		// In an igroup without maps: it logs in and sees nothing.
		if acl := tpg.ACLs[other]; acl == nil || len(acl.LUNs) != 0 {
			t.Fatalf("TPG %d ACL of %s: %+v, want one without LUNs", i+1, other, acl)
		}
	}

	// CHAP for the initiator; "deny" for the other.
	a.must(201, "POST", "/api/protocols/san/iscsi/credentials", map[string]any{"svm": map[string]any{"name": info.SVM}, "initiator": ini,
		"authentication_type": "chap", "chap": map[string]any{"inbound": map[string]any{"user": "u1", "password": "secretsecret1"},
			"outbound": map[string]any{"user": "t1", "password": "secretsecret2"}}})
	a.must(201, "POST", "/api/protocols/san/iscsi/credentials", map[string]any{"svm": map[string]any{"name": info.SVM}, "initiator": other,
		"authentication_type": "deny"})
	st = desired(t, s)
	acl := st.targets[info.TargetIQN].TPGs[1].ACLs[ini]
	if c := acl.CHAP; c == nil || c.InboundUser != "u1" || c.InboundPass != "secretsecret1" || c.OutboundUser != "t1" || c.OutboundPass != "secretsecret2" {
		t.Fatalf("CHAP of %s: %+v", ini, acl.CHAP)
	}
	if st.targets[info.TargetIQN].TPGs[1].ACLs[other] != nil {
		t.Fatal("a denied initiator has an ACL")
	}

	// A LIF down: its TPG goes, the other keeps its tag.
	if err := s.SetLIFUp(info.ISCSILIFs[0], false); err != nil {
		t.Fatal(err)
	}
	st = desired(t, s)
	if tpgs := st.targets[info.TargetIQN].TPGs; tpgs[1] != nil || tpgs[2] == nil {
		t.Fatalf("TPGs with the first LIF down: %+v", tpgs)
	}

	// Offline: nothing is exported any more.
	a.must(200, "PATCH", "/api/storage/luns/"+lun.UUID, map[string]any{"enabled": false})
	st = desired(t, s)
	if len(st.backstores) != 0 || len(st.targets[info.TargetIQN].TPGs[2].ACLs[ini].LUNs) != 0 {
		t.Fatalf("an offline LUN is still exported: %+v", st.backstores)
	}
}

func TestKernelDesiredNAS(t *testing.T) {
	a := newTestSim(t, Config{})
	s := a.sim
	if _, err := s.CreateExportPolicy("p1",
		ExportRule{Index: 1, Clients: []string{"127.0.0.20"}, RORule: []string{"sys"}, RWRule: []string{"never"}, Superuser: []string{"none"}},
		ExportRule{Index: 2, Clients: []string{"0.0.0.0/0", "127.0.0.20"}},
		ExportRule{Index: 3, Clients: []string{"10.0.0.0/255.0.0.0,host.example.com"}, Protocols: []string{"cifs"}},
	); err != nil {
		t.Fatal(err)
	}
	v, err := s.CreateVolume(VolumeSpec{Name: "v1", Size: 1 << 30, ExportPolicy: "p1", JunctionPath: "/v1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateVolume(VolumeSpec{Name: "v2", Size: 1 << 30}); err != nil { // not mounted
		t.Fatal(err)
	}
	st := desired(t, s)
	if !reflect.DeepEqual(st.binds, map[string]string{"/v1": v.Directory}) {
		t.Fatalf("binds %v", st.binds)
	}
	fsid := ",anonuid=65534,insecure,no_subtree_check,sec=sys,fsid=" + v.UUID
	want := map[string]string{
		"127.0.0.20:/v1": "ro,root_squash" + fsid, // rule 1 comes first
		"*:/v1":          "rw,no_root_squash" + fsid,
	}
	if !reflect.DeepEqual(st.exports, want) {
		t.Fatalf("exports\n got %v\nwant %v", st.exports, want)
	}
}

func TestExportClients(t *testing.T) {
	for _, tc := range []struct {
		match string
		want  []string
	}{
		{"192.0.2.1", []string{"192.0.2.1"}},
		{"192.0.2.0/24", []string{"192.0.2.0/24"}},
		{"10.1.2.3/255.255.0.0", []string{"10.1.0.0/16"}},
		{"0.0.0.0/0", []string{"*"}},
		{"::/0", []string{"*"}},
		{"192.0.2.1,192.0.2.2", []string{"192.0.2.1", "192.0.2.2"}},
		{"host.example.com", nil},
		{"@netgroup", nil},
	} {
		if got := exportClients(tc.match); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("exportClients(%q) = %q, want %q", tc.match, got, tc.want)
		}
	}
}

func TestParseFileioInfo(t *testing.T) {
	info := "Status: ACTIVATED  Max Queue Depth: 0  SectorSize: 512  HwMaxSectors: 16384\n" +
		"        TCM FILEIO ID: 0        File: /var/lib/sim/luns/x.img  Size: 134217728  Mode: O_DSYNC Async: 0\n"
	if got := parseFileioInfo(info); got != (lioBackstore{File: "/var/lib/sim/luns/x.img", Size: 134217728}) {
		t.Fatalf("parseFileioInfo: %+v", got)
	}
}

// TestKernelDesiredQtrees: as ontap-nas-economy uses them, each qtree is
// bound and exported at "<junction>/<qtree>" by the policy in force on it,
// with an fsid of its own; a volume whose qtrees have policies of their own
// is not exported itself (nfsd would let its clients below a qtree that
// refuses them). Rules changed and qtrees renamed or deleted follow.
func TestKernelDesiredQtrees(t *testing.T) {
	a := newTestSim(t, Config{})
	s := a.sim
	const node = "127.0.0.20"
	pool, err := s.CreateExportPolicy("pool", ExportRule{Index: 1, Clients: []string{node}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateExportPolicy("qa", ExportRule{Index: 1, Clients: []string{node}, RWRule: []string{"never"}, Superuser: []string{"none"}}); err != nil {
		t.Fatal(err)
	}
	empty, err := s.CreateExportPolicy("empty")
	if err != nil {
		t.Fatal(err)
	}
	v, err := s.CreateVolume(VolumeSpec{Name: "pool1", Size: 1 << 30, ExportPolicy: pool.Name, JunctionPath: "/pool1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []struct{ name, policy string }{{"qa", "qa"}, {"qb", "empty"}, {"qc", ""}} {
		if err := s.CreateQtree("pool1", q.name, q.policy, 0); err != nil {
			t.Fatal(err)
		}
	}
	ids, dirs := map[string]int{}, map[string]string{}
	for _, q := range s.Qtrees() {
		ids[q.Name], dirs[q.Name] = q.ID, q.Directory
	}
	opts := func(access string, id int) string {
		return access + ",anonuid=65534,insecure,no_subtree_check,sec=sys,fsid=" + qtreeFSID(v.UUID, id)
	}
	st := desired(t, s)
	wantBinds := map[string]string{"/pool1": v.Directory}
	for name, dir := range dirs {
		wantBinds["/pool1/"+name] = dir
	}
	if !reflect.DeepEqual(st.binds, wantBinds) {
		t.Fatalf("binds\n got %v\nwant %v", st.binds, wantBinds)
	}
	want := map[string]string{
		node + ":/pool1/qa": opts("ro,root_squash", ids["qa"]),
		node + ":/pool1/qc": opts("rw,no_root_squash", ids["qc"]), // the volume's policy
	}
	if !reflect.DeepEqual(st.exports, want) {
		t.Fatalf("exports\n got %v\nwant %v", st.exports, want)
	}
	if qtreeFSID(v.UUID, ids["qa"]) == qtreeFSID(v.UUID, ids["qc"]) || qtreeFSID(v.UUID, 1) == v.UUID {
		t.Fatal("qtree fsids are not distinct")
	}

	// A rule for the node in qb's policy exports qb to it.
	a.must(201, "POST", "/api/protocols/nfs/export-policies/"+itoa64(empty.ID)+"/rules", map[string]any{
		"clients": []any{map[string]any{"match": node}}, "ro_rule": []any{"sys"}, "rw_rule": []any{"sys"}, "superuser": []any{"sys"}})
	want[node+":/pool1/qb"] = opts("rw,no_root_squash", ids["qb"])
	if st = desired(t, s); !reflect.DeepEqual(st.exports, want) {
		t.Fatalf("exports after a rule for qb\n got %v\nwant %v", st.exports, want)
	}

	// Deleted qtrees go; with only qc (the volume's policy) left, the
	// volume is exported too.
	for _, name := range []string{"qa", "qb"} {
		a.do("DELETE", "/api/storage/qtrees/"+v.UUID+"/"+strconv.Itoa(ids[name])+"?return_timeout=30", nil)
	}
	if qs := s.Qtrees(); len(qs) != 1 {
		t.Fatalf("qtrees left: %+v", qs)
	}
	st = desired(t, s)
	want = map[string]string{
		node + ":/pool1/qc": opts("rw,no_root_squash", ids["qc"]),
		node + ":/pool1":    "rw,no_root_squash,anonuid=65534,insecure,no_subtree_check,sec=sys,fsid=" + v.UUID,
	}
	if !reflect.DeepEqual(st.exports, want) || len(st.binds) != 2 {
		t.Fatalf("exports after deleting qa and qb\n got %v\nwant %v (binds %v)", st.exports, want, st.binds)
	}
}

// TestKernelDesiredLUNsOfOnePool: LUNs sharing a FlexVol, as
// ontap-san-economy's pools hold them, and a LUN clone there are LIO LUNs
// each, as ontap-san's, at the LUN IDs of their maps.
func TestKernelDesiredLUNsOfOnePool(t *testing.T) {
	a := newTestSim(t, Config{})
	s := a.sim
	const ini = "iqn.2005-03.org.open-iscsi:node-1"
	if _, err := s.CreateVolume(VolumeSpec{Name: "pool", Size: 1 << 30}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.CreateIGroup("g1", "", "", ini); err != nil {
		t.Fatal(err)
	}
	var luns []LUNInfo
	for _, name := range []string{"a", "b"} {
		l, err := s.CreateLUN(LUNSpec{Path: "/vol/pool/" + name, Size: 64 << 20})
		if err != nil {
			t.Fatal(err)
		}
		luns = append(luns, l)
	}
	a.must(201, "POST", "/api/storage/luns?return_timeout=30", map[string]any{"svm": map[string]any{"name": s.Info().SVM},
		"name": "/vol/pool/a_clone", "clone": map[string]any{"source": map[string]any{"name": "/vol/pool/a"}}})
	for _, l := range s.LUNs() {
		if l.Path == "/vol/pool/a_clone" {
			luns = append(luns, l)
		}
	}
	if len(luns) != 3 {
		t.Fatalf("LUNs %+v", s.LUNs())
	}
	want := map[int]string{}
	for _, l := range luns {
		id, err := s.MapLUN(l.Path, "g1")
		if err != nil {
			t.Fatal(err)
		}
		want[id] = l.UUID
	}
	st := desired(t, s)
	if len(st.backstores) != 3 {
		t.Fatalf("backstores %+v, want one per LUN", st.backstores)
	}
	for _, l := range luns {
		if b := st.backstores[l.UUID]; b.File != l.File || b.Serial != l.Serial {
			t.Fatalf("backstore of %s: %+v", l.Path, b)
		}
	}
	for tag, tpg := range st.targets[s.Info().TargetIQN].TPGs {
		if !reflect.DeepEqual(tpg.ACLs[ini].LUNs, want) || len(tpg.LUNs) != 3 {
			t.Fatalf("TPG %d: ACL LUNs %v, want %v", tag, tpg.ACLs[ini].LUNs, want)
		}
	}
}

func TestLIOWWIDDigits(t *testing.T) {
	for _, c := range []struct{ serial, want string }{
		{"8fKbmExG68hu", "8fbe68"},
		{"8FkBMexg68HU", "8fbe68"}, // case folded: the same WWID
		{"8ab0", "8ab"},            // trailing zeros are the padding
		{"8xyz", "8"},
		{"8abcdefabcdefabcdefabcdef0123", "8abcdefabcdefabcdefabcdef"}, // 25 digits at most
	} {
		if got := lioWWIDDigits(c.serial); got != c.want {
			t.Errorf("lioWWIDDigits(%q) = %q, want %q", c.serial, got, c.want)
		}
	}
}

// With the kernel data plane no two LUNs get serials LIO would give the
// same WWID (one multipath map for both on the node).
func TestNewSerialHasAWWIDOfItsOwnOnTheKernel(t *testing.T) {
	s := newTestSim(t, Config{}).sim
	s.mu.Lock()
	defer s.mu.Unlock()
	s.kernel = &kernelPlane{} // newSerial only asks whether there is one
	defer func() { s.kernel = nil }()
	seen := map[string]string{}
	for i := range 3000 {
		serial := s.newSerial()
		if other, ok := seen[lioWWIDDigits(serial)]; ok {
			t.Fatalf("serials %s and %s have the same LIO WWID", other, serial)
		}
		seen[lioWWIDDigits(serial)] = serial
		s.m.LUNs[fmt.Sprint("lun-", i)] = &lunState{Serial: serial}
	}
}
