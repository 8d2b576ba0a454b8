package ontapsim

import (
	"reflect"
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
