package ontap_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"io"
	"maps"
	"net/url"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

const gib = int64(1) << 30

// simBackend runs a simulator and a driver configured for it. extra
// overrides keys of the backend config.
func simBackend(t *testing.T, driver string, simCfg ontapsim.Config, extra map[string]any) (backends.Backend, *ontapsim.Simulator) {
	t.Helper()
	s, err := ontapsim.New(simCfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if _, err := s.Start("127.0.0.1:0", true); err != nil {
		t.Fatal(err)
	}
	return simBackendOn(t, s, driver, extra)
}

// simBackendOn is a driver on a running simulator: a second one is a second
// controller of the same SVM.
func simBackendOn(t *testing.T, s *ontapsim.Simulator, driver string, extra map[string]any) (backends.Backend, *ontapsim.Simulator) {
	t.Helper()
	return simBackendOpts(t, s, driver, extra, ontap.Options{}), s
}

// simBackendOpts is simBackendOn with driver options.
func simBackendOpts(t *testing.T, s *ontapsim.Simulator, driver string, extra map[string]any, opts ontap.Options) backends.Backend {
	t.Helper()
	u, _ := url.Parse(s.URL())
	cfg := map[string]any{
		"version": 1, "storageDriverName": driver, "backendName": "b1", "managementLIF": u.Host,
		"svm": s.Info().SVM, "username": "admin", "password": "password",
		"trustedCACertificate": base64.StdEncoding.EncodeToString(s.CACertificatePEM()),
	}
	for k, v := range extra {
		cfg[k] = v
	}
	data, _ := json.Marshal(cfg)
	bc, err := config.Parse("test", data, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	opts.Client = func(c *rest.ClientConfig) {
		c.RetryBaseDelay, c.RetryMaxDelay, c.JobPollInitial, c.JobPollMax = time.Millisecond, 10*time.Millisecond, time.Millisecond, 10*time.Millisecond
	}
	b, err := ontap.NewBackend(bc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if c, ok := b.(io.Closer); ok {
		t.Cleanup(func() { c.Close() })
	}
	return b
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func create(t *testing.T, b backends.Backend, name string, size int64, access backends.AccessType) *backends.Volume {
	t.Helper()
	pools, err := b.Pools(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	req := &backends.CreateRequest{Name: name, Pool: pools[0].Name, SizeBytes: size, AccessType: access}
	if access == backends.AccessBlock {
		req.FSType = backends.FSTypeRaw
	}
	v, err := b.CreateVolume(ctxT(t), req)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	return lookup(t, b, v.ID)
}

func lookup(t *testing.T, b backends.Backend, id string) *backends.Volume {
	t.Helper()
	v, err := b.Volume(ctxT(t), id)
	if err != nil {
		t.Fatalf("lookup %s: %v", id, err)
	}
	return v
}

func policy(s *ontapsim.Simulator, name string) *ontapsim.ExportPolicyInfo {
	for _, p := range s.ExportPolicies() {
		if p.Name == name {
			return &p
		}
	}
	return nil
}

func simVolume(t *testing.T, s *ontapsim.Simulator, name string) ontapsim.VolumeInfo {
	t.Helper()
	v, ok := s.Volume(name)
	if !ok {
		t.Fatalf("no ONTAP volume %s", name)
	}
	return v
}

func TestNASCreateLayout(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, map[string]any{
		"autoExportPolicy": true, "labels": map[string]string{"team": "db"},
		"defaults": map[string]any{"snapshotPolicy": "default", "snapshotReserve": "20", "unixPermissions": "0750"},
	})
	vol := create(t, b, "pvc-3a5e0d3c-1111-2222-3333-444455556666", 4*gib, backends.AccessMount)
	v := simVolume(t, s, "trident_pvc_3a5e0d3c_1111_2222_3333_444455556666")
	if v.JunctionPath != "/"+v.Name || v.ExportPolicy != "trident_empty" || v.ReservePercent != 20 || v.UnixPermissions != 750 || v.Guarantee != "none" {
		t.Errorf("volume %+v", v)
	}
	// 4 GiB usable beside a 20 % snapshot reserve.
	if want := int64(5 * gib); v.Size != want {
		t.Errorf("size %d, want %d", v.Size, want)
	}
	if vol.SizeBytes != 4*gib || vol.Context["internalName"] != v.Name || vol.Context["protocol"] != "file" {
		t.Errorf("volume as the controller sees it: %+v", vol)
	}
	// Trident reads the comment as map[string]map[string]string and finds
	// its labels in it.
	var c map[string]map[string]string
	if err := json.Unmarshal([]byte(v.Comment), &c); err != nil || c["provisioning"]["team"] != "db" || c["ontap-csi"]["name"] != vol.ID {
		t.Errorf("comment %s: %v", v.Comment, err)
	}
}

// Every publish reconciles the node's export rule, so a rule that drifted
// or vanished on ONTAP is repaired (Trident #965, #1181).
func TestNASPublishReconcilesExportRules(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, map[string]any{
		"autoExportPolicy": true, "autoExportCIDRs": []string{"10.0.0.0/8"},
	})
	ctx := ctxT(t)
	vol := create(t, b, "pvc-a", gib, backends.AccessMount)
	name := "trident_pvc_a"
	node1 := backends.Node{Name: "n1", IPs: []string{"10.1.1.1", "192.168.0.1", "10.1.1.2"}}
	node2 := backends.Node{Name: "n2", IPs: []string{"10.2.2.2"}}
	publish := func(n backends.Node) map[string]string {
		t.Helper()
		pc, err := b.Publish(ctx, lookup(t, b, vol.ID), &backends.PublishRequest{Node: n, AccessType: backends.AccessMount})
		if err != nil {
			t.Fatalf("publish to %s: %v", n.Name, err)
		}
		return pc
	}
	rules := func() []string { return ruleSummary(s, name) }
	pc := publish(node1)
	// Exactly Trident's keys (no mountOptions: the backend sets none).
	if want := map[string]string{"protocol": "file", "nfsPath": "/" + name, "nfsServerIp": s.Info().NFSLIFs[0]}; !maps.Equal(pc, want) {
		t.Errorf("publish context %v, want %v", pc, want)
	}
	if got := rules(); !slices.Equal(got, []string{"10.1.1.1,10.1.1.2:any"}) {
		t.Fatalf("rules after publish %v", got)
	}
	if got := simVolume(t, s, name).ExportPolicy; got != name {
		t.Fatalf("volume uses policy %s", got)
	}

	// Drift: an admin narrows the rule to read-only; the next publish
	// repairs it.
	editFirstRule(t, s, name, "PATCH", map[string]any{"rw_rule": []string{"never"}})
	publish(node1)
	if got := rules(); !slices.Equal(got, []string{"10.1.1.1,10.1.1.2:any"}) {
		t.Errorf("rules after repairing drift %v", got)
	}
	if n := repairs(t, "b1"); n != 1 {
		t.Errorf("export_rules_repaired_total = %v, want 1", n)
	}
	// The rule vanishes; the next publish puts it back.
	editFirstRule(t, s, name, "DELETE", nil)
	publish(node1)
	publish(node2)
	if got := rules(); !slices.Equal(got, []string{"10.1.1.1,10.1.1.2:any", "10.2.2.2:any"}) {
		t.Errorf("rules with two nodes %v", got)
	}

	if err := b.Unpublish(ctx, lookup(t, b, vol.ID), node1.Name, &node1); err != nil {
		t.Fatal(err)
	}
	if got := rules(); !slices.Equal(got, []string{"10.2.2.2:any"}) {
		t.Errorf("rules after unpublishing n1 %v", got)
	}
	if err := b.Unpublish(ctx, lookup(t, b, vol.ID), node2.Name, &node2); err != nil {
		t.Fatal(err)
	}
	if policy(s, name) != nil || simVolume(t, s, name).ExportPolicy != "trident_empty" {
		t.Errorf("after the last unpublish: policy %v, volume on %s", policy(s, name), simVolume(t, s, name).ExportPolicy)
	}

	// A node without an admitted address cannot be given access.
	_, err := b.Publish(ctx, lookup(t, b, vol.ID), &backends.PublishRequest{Node: backends.Node{Name: "n3", IPs: []string{"192.168.1.1"}}})
	if !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("publish to a node outside autoExportCIDRs: %v", err)
	}
	if err := b.DeleteVolume(ctx, lookup(t, b, vol.ID)); err != nil {
		t.Fatal(err)
	}
}

// ruleSummary lists the rules of export policy name as "clients:rw_rule",
// sorted; nil when the policy does not exist.
func ruleSummary(s *ontapsim.Simulator, name string) []string {
	p := policy(s, name)
	if p == nil {
		return nil
	}
	var out []string
	for _, r := range p.Rules {
		out = append(out, strings.Join(r.Clients, ",")+":"+strings.Join(r.RWRule, ","))
	}
	slices.Sort(out)
	return out
}

// editFirstRule changes the first rule of export policy name behind the
// driver's back, as an admin would.
func editFirstRule(t *testing.T, s *ontapsim.Simulator, name, method string, body any) {
	t.Helper()
	p := policy(s, name)
	if _, _, err := s.Do(method, "/api/protocols/nfs/export-policies/"+itoa(p.ID)+"/rules/"+itoa(p.Rules[0].Index), body); err != nil {
		t.Fatal(err)
	}
}

func TestNASStaticExportPolicy(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, map[string]any{"nfsMountOptions": "nfsvers=4.1"})
	vol := create(t, b, "pvc-s", gib, backends.AccessMount)
	s.ResetStats()
	pc, err := b.Publish(ctxT(t), vol, &backends.PublishRequest{Node: backends.Node{Name: "n1", IPs: []string{"10.0.0.1"}}})
	if err != nil {
		t.Fatal(err)
	}
	if st := s.Stats(); st.Requests != 0 {
		t.Errorf("publish with a static policy sent %d requests (%v)", st.Requests, st.Keys())
	}
	if pc["mountOptions"] != "nfsvers=4.1" || simVolume(t, s, "trident_pvc_s").ExportPolicy != "default" {
		t.Errorf("context %v", pc)
	}
	// Mount options of the capability replace the backend's.
	pc, _ = b.Publish(ctxT(t), vol, &backends.PublishRequest{Node: backends.Node{Name: "n1"}, MountOptions: []string{"nfsvers=3", "hard"}})
	if pc["mountOptions"] != "nfsvers=3,hard" {
		t.Errorf("mount options %q", pc["mountOptions"])
	}
}

func TestSANCreateLayout(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, map[string]any{"defaults": map[string]any{"fileSystemType": "xfs", "unixPermissions": "0750"}})
	vol := create(t, b, "pvc-l", 10*gib, backends.AccessMount)
	v := simVolume(t, s, "trident_pvc_l")
	if v.UnixPermissions != 750 { // as Trident's ontap-san sets it
		t.Errorf("FlexVol unix permissions %d", v.UnixPermissions)
	}
	luns := s.LUNs()
	if len(luns) != 1 || luns[0].Path != "/vol/trident_pvc_l/lun0" || luns[0].Size != 10*gib || luns[0].OSType != "linux" {
		t.Fatalf("LUNs %+v", luns)
	}
	if luns[0].Attributes["com.netapp.ndvp.fstype"] != "xfs" || luns[0].Attributes["context"] != "csi" {
		t.Errorf("LUN attributes %v", luns[0].Attributes)
	}
	if v.JunctionPath != "" || float64(v.Size) < 1.1*float64(10*gib) {
		t.Errorf("FlexVol %+v", v)
	}
	if vol.FSType != "xfs" || vol.SizeBytes != 10*gib || vol.Context["protocol"] != "block" {
		t.Errorf("volume %+v", vol)
	}

	got, err := b.ExpandVolume(ctxT(t), vol, 20*gib)
	if err != nil || got.SizeBytes != 20*gib {
		t.Fatalf("expand: %v %+v", err, got)
	}
	if l := s.LUNs()[0]; l.Size != 20*gib {
		t.Errorf("LUN size after expand %d", l.Size)
	}
	if v := simVolume(t, s, "trident_pvc_l"); float64(v.Size) < 1.1*float64(20*gib) {
		t.Errorf("FlexVol size after expand %d", v.Size)
	}
	if lookup(t, b, vol.ID).SizeBytes != 20*gib {
		t.Errorf("the new size is not recorded")
	}
}

// Per-node igroups: created on the first publish, holding the node's IQN,
// the LUN mapped only while published, the igroup gone with its last LUN.
func TestSANPublishIgroupLifecycle(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{Nodes: 4}, nil)
	ctx := ctxT(t)
	v1 := create(t, b, "pvc-1", gib, backends.AccessMount)
	v2 := create(t, b, "pvc-2", gib, backends.AccessBlock)
	node := backends.Node{Name: "worker-1", IQN: "iqn.1994-05.com.redhat:w1"}
	pc1, err := b.Publish(ctx, v1, &backends.PublishRequest{Node: node, AccessType: backends.AccessMount, MountOptions: []string{"discard"}})
	if err != nil {
		t.Fatal(err)
	}
	pc2, err := b.Publish(ctx, v2, &backends.PublishRequest{Node: node, AccessType: backends.AccessBlock})
	if err != nil {
		t.Fatal(err)
	}
	igs := s.IGroups()
	if len(igs) != 1 || !strings.HasPrefix(igs[0].Name, "worker-1-") || len(igs[0].Name) != len("worker-1-")+36 ||
		!slices.Equal(igs[0].Initiators, []string{node.IQN}) || igs[0].OSType != "linux" || igs[0].Protocol != "iscsi" {
		t.Fatalf("igroups %+v", igs)
	}
	info := s.Info()
	lun := s.LUNs()[0]
	want := map[string]string{
		"protocol": "block", "iscsiTargetIqn": info.TargetIQN, "iscsiIgroup": igs[0].Name, "iscsiInterface": "default",
		"iscsiLunSerial": lun.Serial, "filesystemType": "ext4", "useCHAP": "false", "sharedTarget": "true",
		"mountOptions": "discard", "iscsiTargetPortalCount": "2",
		// The LUN lives on node 1, reported by it and its HA partner:
		// only their LIFs are portals.
		"p1": info.ISCSILIFs[0], "p2": info.ISCSILIFs[1],
		"iscsiLunNumber": strconv.Itoa(lunID(t, s, lun.Path, igs[0].Name)),
	}
	// Exactly Trident's keys: a node plugin of either reads them.
	if !maps.Equal(pc1, want) {
		t.Errorf("publish context\n got  %v\n want %v", pc1, want)
	}
	if pc1["iscsiLunNumber"] == pc2["iscsiLunNumber"] || pc2["filesystemType"] != "raw" {
		t.Errorf("second LUN: %v", pc2)
	}
	// Publishing again changes nothing.
	if again, err := b.Publish(ctx, v1, &backends.PublishRequest{Node: node, AccessType: backends.AccessMount}); err != nil ||
		again["iscsiLunNumber"] != pc1["iscsiLunNumber"] {
		t.Errorf("republish: %v %v", err, again)
	}
	if n := len(s.LUNMaps()); n != 2 {
		t.Errorf("%d LUN maps, want 2", n)
	}

	if err := b.Unpublish(ctx, v1, node.Name, &node); err != nil {
		t.Fatal(err)
	}
	if n := len(s.IGroups()); n != 1 {
		t.Errorf("igroup deleted while a LUN is still mapped")
	}
	// A node that is gone is unpublished by its name alone.
	if err := b.Unpublish(ctx, v2, node.Name, nil); err != nil {
		t.Fatal(err)
	}
	if len(s.IGroups()) != 0 || len(s.LUNMaps()) != 0 {
		t.Errorf("left over: igroups %+v, maps %+v", s.IGroups(), s.LUNMaps())
	}
	if err := b.Unpublish(ctx, v2, node.Name, nil); err != nil {
		t.Errorf("unpublish again: %v", err)
	}
	if _, err := b.Publish(ctx, v1, &backends.PublishRequest{Node: backends.Node{Name: "no-iqn"}}); !errors.Is(err, backends.ErrInvalid) {
		t.Errorf("publish to a node without IQN: %v", err)
	}
}

// A publish spends no request it can do without: a new igroup is created
// with the IQN in it, a new map's answer names its reporting nodes, and the
// maps of a LUN that the lookup found unmapped are not read. An
// igroup that exists without the IQN still gets it, and an existing map's
// reporting nodes are still read.
func TestSANPublishRequests(t *testing.T) {
	const (
		igroups   = "POST /api/protocols/san/igroups"
		addInit   = "POST /api/protocols/san/igroups/{igroup.uuid}/initiators"
		mapLUN    = "POST /api/protocols/san/lun-maps"
		reporting = "GET /api/protocols/san/lun-maps/{lun.uuid}/{igroup.uuid}/reporting-nodes"
		listMaps  = "GET /api/protocols/san/lun-maps"
	)
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{Nodes: 4}, nil)
	ctx := ctxT(t)
	v1 := create(t, b, "pvc-1", gib, backends.AccessMount)
	v2 := create(t, b, "pvc-2", gib, backends.AccessMount)
	const iqn1, iqn2 = "iqn.1994-05.com.redhat:w1", "iqn.1994-05.com.redhat:w1-reinstalled"
	portals := map[string]string{} // volume → p1,p2,p3 as first published
	for _, step := range []struct {
		name     string
		vol      *backends.Volume
		iqn      string
		requests map[string]int64
		iqns     []string // the igroup's afterwards
	}{
		{"first publish", v1, iqn1, map[string]int64{igroups: 1, addInit: 0, mapLUN: 1, reporting: 0, listMaps: 0}, []string{iqn1}},
		{"igroup without the IQN", v2, iqn2, map[string]int64{igroups: 0, addInit: 1, mapLUN: 1, reporting: 0, listMaps: 0}, []string{iqn1, iqn2}},
		{"map exists", v1, iqn1, map[string]int64{igroups: 0, addInit: 0, mapLUN: 0, reporting: 1, listMaps: 1}, []string{iqn1, iqn2}},
	} {
		vol := lookup(t, b, step.vol.ID) // as the controller does
		before := s.Stats()
		pc, err := b.Publish(ctx, vol, &backends.PublishRequest{
			Node: backends.Node{Name: "worker-1", IQN: step.iqn}, AccessType: backends.AccessMount,
		})
		if err != nil {
			t.Fatalf("%s: %v", step.name, err)
		}
		after := s.Stats()
		for ep, want := range step.requests {
			if got := after.Endpoints[ep].Requests - before.Endpoints[ep].Requests; got != want {
				t.Errorf("%s: %d × %s, want %d", step.name, got, ep, want)
			}
		}
		if igs := s.IGroups(); len(igs) != 1 || !slices.Equal(igs[0].Initiators, step.iqns) {
			t.Errorf("%s: igroups %+v, want one holding %v", step.name, igs, step.iqns)
		}
		// The portals are the same whichever way the reporting nodes
		// were learnt.
		got := strings.Join([]string{pc["p1"], pc["p2"], pc["p3"]}, ",")
		if pc["p1"] == "" {
			t.Errorf("%s: no portals in %v", step.name, pc)
		}
		if want, ok := portals[step.vol.ID]; ok && got != want {
			t.Errorf("%s: portals %s, the first publish's %s", step.name, got, want)
		}
		portals[step.vol.ID] = got
	}
}

func TestSANCHAP(t *testing.T) {
	b, _ := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, map[string]any{
		"useCHAP": true, "chapUsername": "in", "chapInitiatorSecret": "secret-in-123",
		"chapTargetUsername": "out", "chapTargetInitiatorSecret": "secret-out-456",
	})
	vol := create(t, b, "pvc-c", gib, backends.AccessMount)
	pc, err := b.Publish(ctxT(t), vol, &backends.PublishRequest{Node: backends.Node{Name: "n", IQN: "iqn.2000-01.x:n"}})
	if err != nil {
		t.Fatal(err)
	}
	if pc["useCHAP"] != "true" || pc["iscsiUsername"] != "in" || pc["iscsiInitiatorSecret"] != "secret-in-123" ||
		pc["iscsiTargetUsername"] != "out" || pc["iscsiTargetSecret"] != "secret-out-456" {
		t.Errorf("CHAP keys %v", pc)
	}
	// Trident 20.10's keys, no more: p1..pN, the LUN and target, CHAP.
	keys := slices.Sorted(maps.Keys(pc))
	want := []string{"filesystemType", "iscsiIgroup", "iscsiInitiatorSecret", "iscsiInterface", "iscsiLunNumber", "iscsiLunSerial",
		"iscsiTargetIqn", "iscsiTargetPortalCount", "iscsiTargetSecret", "iscsiTargetUsername", "iscsiUsername", "p1", "p2",
		"protocol", "sharedTarget", "useCHAP"}
	if !slices.Equal(keys, want) {
		t.Errorf("publish context keys\n got  %v\n want %v", keys, want)
	}
}

// An interrupted create (the LUN failed after the FlexVol was made) is
// reported incomplete and completed by the next create.
func TestSANCreateResumes(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{}, nil)
	ctx := ctxT(t)
	s.SetFaults([]ontapsim.FaultRule{{Method: "POST", Path: "/storage/luns", Rate: 1, Kind: ontapsim.FaultJob, Code: 5374124, Limit: 1}})
	req := &backends.CreateRequest{Name: "pvc-r", Pool: "aggr1", SizeBytes: gib, AccessType: backends.AccessMount}
	if _, err := b.CreateVolume(ctx, req); err == nil {
		t.Fatal("create succeeded despite the LUN fault")
	}
	v := lookup(t, b, "pvc-r")
	if !v.Incomplete {
		t.Fatal("half-made volume not reported incomplete")
	}
	if _, err := b.CreateVolume(ctx, req); err != nil {
		t.Fatalf("completing create: %v", err)
	}
	if v := lookup(t, b, "pvc-r"); v.Incomplete || len(s.LUNs()) != 1 {
		t.Errorf("after completion: incomplete %v, LUNs %d", v.Incomplete, len(s.LUNs()))
	}
}

func TestSnapshotsAndClones(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{}, map[string]any{"autoExportPolicy": driver == config.DriverONTAPNAS})
			ctx := ctxT(t)
			src := create(t, b, "pvc-src", gib, backends.AccessMount)
			snap, err := b.CreateSnapshot(ctx, src, "snapshot-1")
			if err != nil {
				t.Fatal(err)
			}
			if again, err := b.CreateSnapshot(ctx, src, "snapshot-1"); err != nil || again.Name != snap.Name {
				t.Fatalf("second create: %v", err)
			}
			found, err := b.Snapshots(ctx, backends.SnapshotFilter{Name: "snapshot-1"})
			if err != nil || len(found) != 1 || found[0].VolumeID != "pvc-src" || !found[0].Ready || found[0].CreatedAt.IsZero() {
				t.Fatalf("search by name: %v %+v", err, found)
			}
			clone, err := b.CreateVolume(ctx, &backends.CreateRequest{Name: "pvc-clone", SizeBytes: 2 * gib, AccessType: backends.AccessMount,
				Source: &backends.Source{Snapshot: found[0]}})
			if err != nil {
				t.Fatal(err)
			}
			cv := simVolume(t, s, "trident_pvc_clone")
			if cv.CloneParent != "trident_pvc_src" || clone.SourceSnapshotID != "pvc-src/snapshot-1" {
				t.Errorf("clone %+v", cv)
			}
			if driver == config.DriverONTAPNAS && (cv.JunctionPath != "/trident_pvc_clone" || cv.ExportPolicy != "trident_empty") {
				t.Errorf("clone kept its parent's junction or policy: %+v", cv)
			}
			if got := lookup(t, b, "pvc-clone"); got.SizeBytes != 2*gib || got.SourceSnapshotID != "pvc-src/snapshot-1" {
				t.Errorf("clone as looked up: %+v", got)
			}
			if err := b.DeleteVolume(ctx, lookup(t, b, "pvc-src")); !errors.Is(err, backends.ErrInUse) {
				t.Errorf("deleting a volume with a clone: %v, want ErrInUse", err)
			}
			// The snapshot backs the clone: deleting it starts the split,
			// and succeeds once the split is done.
			if err := b.DeleteSnapshot(ctx, found[0]); !errors.Is(err, backends.ErrInUse) {
				t.Fatalf("deleting a snapshot with a clone: %v, want ErrInUse", err)
			}
			if err := b.DeleteSnapshot(ctx, found[0]); err != nil {
				t.Fatalf("deleting after the split: %v", err)
			}
			if cv := simVolume(t, s, "trident_pvc_clone"); cv.CloneParent != "" {
				t.Errorf("clone not split: %+v", cv)
			}

			// A clone of a volume goes through a snapshot named after the
			// clone, removed with the clone.
			if _, err := b.CreateVolume(ctx, &backends.CreateRequest{Name: "pvc-c2", SizeBytes: gib, AccessType: backends.AccessMount,
				Source: &backends.Source{Volume: lookup(t, b, "pvc-src")}}); err != nil {
				t.Fatal(err)
			}
			if snaps := simVolume(t, s, "trident_pvc_src").Snapshots; !slices.Contains(snaps, "trident_pvc_c2") {
				t.Errorf("source snapshots %v", snaps)
			}
			for _, id := range []string{"pvc-c2", "pvc-clone", "pvc-src"} {
				if err := b.DeleteVolume(ctx, lookup(t, b, id)); err != nil {
					t.Fatalf("delete %s: %v", id, err)
				}
			}
			for _, v := range s.Volumes() {
				if !v.IsSVMRoot {
					t.Errorf("left over: %s", v.Name)
				}
			}
		})
	}
}

// Two CSI names that map to one ONTAP name ("pvc-a" and "pvc.a") are two
// volumes: the second cannot take the first's FlexVol.
func TestNameCollision(t *testing.T) {
	b, _ := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, nil)
	create(t, b, "pvc-a", gib, backends.AccessMount)
	if _, err := b.Volume(ctxT(t), "pvc.a"); !errors.Is(err, backends.ErrNotFound) {
		t.Errorf("lookup of the other name: %v, want ErrNotFound", err)
	}
	_, err := b.CreateVolume(ctxT(t), &backends.CreateRequest{Name: "pvc.a", Pool: "aggr1", SizeBytes: gib, AccessType: backends.AccessMount})
	if !errors.Is(err, backends.ErrAlreadyExists) {
		t.Errorf("create of the other name: %v, want ErrAlreadyExists", err)
	}
}

func TestLongAndUnusualNames(t *testing.T) {
	b, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, nil)
	for _, name := range []string{
		strings.Repeat("a-", 100) + "z", // 201 characters: too long for ONTAP with the prefix
		"ünïcode name with spaces",
		"7starts-with-a-digit",
	} {
		v := create(t, b, name, gib, backends.AccessMount)
		if v.ID != name {
			t.Errorf("ID %q, want %q", v.ID, name)
		}
		snap, err := b.CreateSnapshot(ctxT(t), v, "snap/with,odd chars "+name)
		if err != nil {
			t.Errorf("snapshot of %q: %v", name, err)
			continue
		}
		if got := b.SnapshotName("snap/with,odd chars " + name); got != snap.Name {
			t.Errorf("snapshot name not deterministic: %q vs %q", got, snap.Name)
		}
	}
	vols, err := b.ListVolumes(ctxT(t))
	if err != nil || len(vols) != 3 {
		t.Errorf("list: %v, %d volumes (%v)", err, len(vols), s.Volumes())
	}
}

func TestCapacityAndPools(t *testing.T) {
	b, _ := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{AggregateSize: 100 * gib}, map[string]any{
		"limitVolumeSize": "50Gi",
		"storage": []any{
			map[string]any{"labels": map[string]string{"tier": "gold"}, "defaults": map[string]any{"spaceReserve": "volume"}},
			map[string]any{"labels": map[string]string{"tier": "silver"}},
		},
	})
	pools, err := b.Pools(ctxT(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(pools) != 2 || pools[0].Name != "b1_pool_0" || pools[0].Labels["tier"] != "gold" ||
		!slices.Equal(pools[0].ProvisioningTypes, []string{"thick"}) || !slices.Equal(pools[1].ProvisioningTypes, []string{"thin"}) {
		t.Fatalf("pools %+v", pools)
	}
	c, err := b.Capacity(ctxT(t), "b1_pool_0", backends.VolumeOptions{})
	if err != nil || c.Available <= 0 || c.Available > 100*gib || c.MaxVolumeSize != 50*gib {
		t.Errorf("capacity %+v, %v", c, err)
	}
	if lim := b.Limits(); lim.MinVolumeSize != 20<<20 || lim.MaxVolumeSize != 50*gib || lim.DefaultVolumeSize != gib {
		t.Errorf("limits %+v", lim)
	}
}

func TestUnreachableONTAP(t *testing.T) {
	data, _ := json.Marshal(map[string]any{
		"version": 1, "storageDriverName": "ontap-nas", "managementLIF": "127.0.0.1:1", "svm": "svm0",
		"username": "u", "password": "p",
	})
	cfg, err := config.Parse("test", data, t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	// Starting never needs ONTAP.
	b, err := ontap.NewBackend(cfg, ontap.Options{Client: func(c *rest.ClientConfig) {
		c.MaxAttempts, c.RetryBaseDelay = 1, time.Millisecond
	}})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Volume(ctxT(t), "pvc-x"); !errors.Is(err, backends.ErrUnavailable) {
		t.Errorf("lookup without ONTAP: %v, want ErrUnavailable", err)
	}
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// repairs reads ontap_csi_export_rules_repaired_total for a backend.
func repairs(t *testing.T, backend string) float64 {
	t.Helper()
	mfs, err := prometheus.DefaultGatherer.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "ontap_csi_export_rules_repaired_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "backend" && l.GetValue() == backend {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}

// A volume whose requisite topology narrowed its pool's keeps the narrowed
// set: a retried CreateVolume and ListVolumes answer from the comment what
// the first create answered, even from a new controller.
func TestNarrowedTopologyIsRemembered(t *testing.T) {
	zoneA := map[string]string{"topology.kubernetes.io/zone": "a"}
	zoneB := map[string]string{"topology.kubernetes.io/zone": "b"}
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, _ := simBackend(t, driver, ontapsim.Config{}, map[string]any{
				"supportedTopologies": []map[string]string{zoneA, zoneB},
			})
			access := backends.AccessMount
			want := map[string][]map[string]string{}
			pools, err := b.Pools(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, tc := range []struct {
				name string
				req  []map[string]string
				want []map[string]string
			}{
				{"pvc-narrowed", []map[string]string{zoneA}, []map[string]string{zoneA}},
				{"pvc-whole", []map[string]string{zoneA, zoneB}, []map[string]string{zoneA, zoneB}},
				{"pvc-unconstrained", nil, []map[string]string{zoneA, zoneB}},
			} {
				req := &backends.CreateRequest{Name: tc.name, Pool: pools[0].Name, SizeBytes: gib, AccessType: access, Topologies: tc.req}
				v, err := b.CreateVolume(ctxT(t), req)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(v.Topologies, tc.want) {
					t.Errorf("%s: create answered %v, want %v", tc.name, v.Topologies, tc.want)
				}
				// The driver keeps nothing: a lookup reads ONTAP.
				if got := lookup(t, b, tc.name).Topologies; !reflect.DeepEqual(got, tc.want) {
					t.Errorf("%s: lookup answered %v, want %v", tc.name, got, tc.want)
				}
				if _, err := b.CreateVolume(ctxT(t), req); err != nil { // the retried create adopts the volume
					t.Fatal(err)
				}
				want[tc.name] = tc.want
			}
			vols, err := b.ListVolumes(ctxT(t))
			if err != nil {
				t.Fatal(err)
			}
			for _, v := range vols {
				if !reflect.DeepEqual(v.Topologies, want[v.ID]) {
					t.Errorf("%s: ListVolumes answered %v, want %v", v.ID, v.Topologies, want[v.ID])
				}
			}
			if len(vols) != len(want) {
				t.Errorf("ListVolumes: %d volumes, want %d", len(vols), len(want))
			}
		})
	}
}

// lunID is the LUN ID the simulator gave the map of lun to igroup.
func lunID(t *testing.T, s *ontapsim.Simulator, lun, igroup string) int {
	t.Helper()
	for _, m := range s.LUNMaps() {
		if m.LUNPath == lun && m.IGroup == igroup {
			return m.LUNID
		}
	}
	t.Fatalf("LUN %s is not mapped to %s: %+v", lun, igroup, s.LUNMaps())
	return -1
}

// splitOnClone (a StorageClass parameter or a backend default) starts the
// clone's split at create time: the clone stops depending on its parent and
// the parent's snapshot can go at once. A retried create must not split
// twice (ONTAP refuses a second split of a volume that is no clone).
func TestSplitOnClone(t *testing.T) {
	split := true
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{}, nil)
			ctx := ctxT(t)
			src := create(t, b, "pvc-src", gib, backends.AccessMount)
			snap, err := b.CreateSnapshot(ctx, src, "snapshot-1")
			if err != nil {
				t.Fatal(err)
			}
			req := &backends.CreateRequest{Name: "pvc-clone", SizeBytes: gib, AccessType: backends.AccessMount,
				Source: &backends.Source{Snapshot: snap}, Options: backends.VolumeOptions{SplitOnClone: &split}}
			if _, err := b.CreateVolume(ctx, req); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(10 * time.Second)
			for simVolume(t, s, "trident_pvc_clone").CloneParent != "" {
				if time.Now().After(deadline) {
					t.Fatalf("clone still depends on its parent: %+v", simVolume(t, s, "trident_pvc_clone"))
				}
				time.Sleep(20 * time.Millisecond)
			}
			if _, err := b.CreateVolume(ctx, req); err != nil {
				t.Fatalf("retried create of a split clone: %v", err)
			}
			if err := b.DeleteSnapshot(ctx, snap); err != nil {
				t.Errorf("the parent's snapshot is still held: %v", err)
			}
		})
	}
}

// limitAggregateUsage refuses, as Trident does, a create or an expansion
// that would take the aggregate above the limit: a thick volume counts its
// whole size, a thin one only the space the aggregate already holds. The
// controller reads ErrExhausted as "try the next pool".
func TestLimitAggregateUsage(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{AggregateSize: 100 * gib}, map[string]any{
				"limitAggregateUsage": "50%", "defaults": map[string]any{"snapshotReserve": "0"},
			})
			ctx := ctxT(t)
			pools, err := b.Pools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			mk := func(name string, size int64, reserve string) error {
				return createIn(ctx, b, pools[0].Name, name, size, reserve)
			}
			if err := mk("pvc-thick-1", 30*gib, "volume"); err != nil {
				t.Fatalf("thick volume within the limit: %v", err)
			}
			if err := mk("pvc-thick-2", 30*gib, "volume"); !errors.Is(err, backends.ErrExhausted) || !strings.Contains(err.Error(), "limitAggregateUsage of 50%") {
				t.Fatalf("thick volume over the limit: %v, want ErrExhausted naming the limit", err)
			}
			if _, ok := s.Volume("trident_pvc_thick_2"); ok {
				t.Fatal("the refused create left an ONTAP volume")
			}
			if err := mk("pvc-thick-1", 30*gib, "volume"); err != nil {
				t.Fatalf("a retried create of a volume that exists is not refused: %v", err)
			}
			if err := mk("pvc-thin", 30*gib, "none"); err != nil {
				t.Fatalf("thin volume: only the used space counts: %v", err)
			}
			before := simVolume(t, s, "trident_pvc_thick_1")
			if _, err := b.ExpandVolume(ctx, lookup(t, b, "pvc-thick-1"), 60*gib); !errors.Is(err, backends.ErrExhausted) {
				t.Errorf("thick expansion over the limit: %v, want ErrExhausted", err)
			}
			if after := simVolume(t, s, "trident_pvc_thick_1"); after.Size != before.Size || after.Comment != before.Comment {
				t.Errorf("the refused expansion changed the volume: size %d → %d, comment %q → %q", before.Size, after.Size, before.Comment, after.Comment)
			}
			if _, err := b.ExpandVolume(ctx, lookup(t, b, "pvc-thick-1"), 35*gib); err != nil {
				t.Errorf("thick expansion within the limit: %v", err)
			}
			if _, err := b.ExpandVolume(ctx, lookup(t, b, "pvc-thin"), 90*gib); err != nil {
				t.Errorf("thin expansion: %v", err)
			}
		})
	}
}

// createIn creates a filesystem volume in pool with the given spaceReserve.
func createIn(ctx context.Context, b backends.Backend, pool, name string, size int64, reserve string) error {
	_, err := b.CreateVolume(ctx, &backends.CreateRequest{Name: name, Pool: pool, SizeBytes: size,
		AccessType: backends.AccessMount, Options: backends.VolumeOptions{SpaceReserve: reserve}})
	return err
}

// A thick volume, or a growth, that its aggregate cannot hold is
// ErrExhausted, which the controller reads as "try the next pool". ONTAP
// fails it with no code of its own (its job fails with a generic code and
// a text), so the driver asks the aggregate; a thin volume of the same
// size is no such failure.
func TestFullAggregateIsExhausted(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			b, s := simBackend(t, driver, ontapsim.Config{AggregateSize: 20 * gib}, map[string]any{
				"defaults": map[string]any{"snapshotReserve": "0"},
			})
			ctx := ctxT(t)
			pools, err := b.Pools(ctx)
			if err != nil {
				t.Fatal(err)
			}
			pool := pools[0].Name
			if err := createIn(ctx, b, pool, "pvc-big", 30*gib, "volume"); !errors.Is(err, backends.ErrExhausted) {
				t.Fatalf("thick volume larger than the aggregate: %v, want ErrExhausted", err)
			}
			if _, ok := s.Volume("trident_pvc_big"); ok {
				t.Fatal("the failed create left an ONTAP volume")
			}
			if err := createIn(ctx, b, pool, "pvc-thick", 5*gib, "volume"); err != nil {
				t.Fatalf("thick volume that fits: %v", err)
			}
			before := simVolume(t, s, "trident_pvc_thick")
			if _, err := b.ExpandVolume(ctx, lookup(t, b, "pvc-thick"), 40*gib); !errors.Is(err, backends.ErrExhausted) {
				t.Errorf("thick expansion beyond the aggregate: %v, want ErrExhausted", err)
			}
			if after := simVolume(t, s, "trident_pvc_thick"); after.Size != before.Size {
				t.Errorf("the failed expansion changed the size: %d → %d", before.Size, after.Size)
			}
			if err := createIn(ctx, b, pool, "pvc-thin", 30*gib, "none"); err != nil {
				t.Fatalf("thin volume larger than the aggregate: %v", err)
			}
		})
	}
}

// ONTAP's size limits (sizes.go) are the driver's: a size ONTAP cannot hold
// is OutOfRange before anything is made, and a FlexVol over 100 TiB gets
// large size enabled where ONTAP has it (9.12.1+).
func TestSizeLimits(t *testing.T) {
	nas, s := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, nil)
	before := len(s.Volumes())
	for _, size := range []int64{1 << 60, 301 << 40} {
		_, err := nas.CreateVolume(ctxT(t), &backends.CreateRequest{Name: "pvc-huge", Pool: "aggr1", SizeBytes: size, AccessType: backends.AccessMount})
		if !errors.Is(err, backends.ErrOutOfRange) || !strings.Contains(err.Error(), "300 TiB") {
			t.Fatalf("%d bytes: %v, want out of range", size, err)
		}
	}
	if len(s.Volumes()) != before || len(s.ExportPolicies()) != 1 {
		t.Fatal("a refused create changed ONTAP")
	}
	big := create(t, nas, "pvc-big", 150<<40, backends.AccessMount)
	if v := simVolume(t, s, "trident_pvc_big"); !v.LargeSize || v.Size < 150<<40 {
		t.Fatalf("150 TiB volume: %+v", v)
	}
	small := create(t, nas, "pvc-small", 1<<30, backends.AccessMount)
	if _, err := nas.ExpandVolume(ctxT(t), small, 200<<40); err != nil {
		t.Fatal(err)
	}
	if v := simVolume(t, s, "trident_pvc_small"); !v.LargeSize || v.Size < 200<<40 {
		t.Fatalf("volume grown to 200 TiB: %+v", v)
	}
	if _, err := nas.ExpandVolume(ctxT(t), big, 400<<40); !errors.Is(err, backends.ErrOutOfRange) {
		t.Fatalf("grow to 400 TiB: %v", err)
	}

	// Before 9.12.1 there are no large volumes: 100 TiB and 16 TiB LUNs.
	old, oldSim := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{ONTAPVersion: "9.11.1"}, nil)
	_, err := old.CreateVolume(ctxT(t), &backends.CreateRequest{Name: "pvc-big", Pool: "aggr1", SizeBytes: 150 << 40, AccessType: backends.AccessMount})
	if !errors.Is(err, backends.ErrOutOfRange) || !strings.Contains(err.Error(), "9.11.1") {
		t.Fatalf("150 TiB on ONTAP 9.11.1: %v", err)
	}
	if len(oldSim.Volumes()) != 1 {
		t.Fatal("a refused create changed ONTAP")
	}
	san, _ := simBackend(t, config.DriverONTAPSAN, ontapsim.Config{ONTAPVersion: "9.11.1"}, nil)
	for _, size := range []int64{17 << 40, 129 << 40} {
		_, err := san.CreateVolume(ctxT(t), &backends.CreateRequest{Name: "pvc-lun", Pool: "aggr1", SizeBytes: size, AccessType: backends.AccessBlock, FSType: backends.FSTypeRaw})
		if !errors.Is(err, backends.ErrOutOfRange) {
			t.Fatalf("LUN of %d bytes on ONTAP 9.11.1: %v", size, err)
		}
	}
}
