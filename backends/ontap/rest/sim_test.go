package rest

import (
	"context"
	"errors"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// startSim serves a fresh simulator over plain HTTP and returns it with a
// client of its SVM whose retry waits are short.
func startSim(t testing.TB, cfg ontapsim.Config, edit func(*ClientConfig)) (*ontapsim.Simulator, *Client) {
	t.Helper()
	if cfg.SVM == "" {
		cfg.SVM, cfg.Username, cfg.Password = "svm0", "admin", "secret"
	}
	s, err := ontapsim.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rawURL, err := s.Start("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	u, _ := url.Parse(rawURL)
	cc := ClientConfig{ManagementLIF: u.Host, Scheme: u.Scheme, SVM: cfg.SVM, Username: cfg.Username, Password: cfg.Password,
		RetryBaseDelay: time.Millisecond, RetryMaxDelay: 10 * time.Millisecond, JobPollInitial: 5 * time.Millisecond, JobPollMax: 50 * time.Millisecond}
	if edit != nil {
		edit(&cc)
	}
	c, err := NewClient(cc)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	return s, c
}

// must(f())(t) returns f's value, failing t on f's error.
func must[T any](v T, err error) func(testing.TB) T {
	return func(t testing.TB) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

func check(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func TestSimClusterDiscovery(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	info := s.Info()

	cl := must(c.cluster(ctx))(t)
	if cl.Version.String() != info.ONTAPVersion || cl.Name != info.Cluster {
		t.Errorf("cluster %+v, sim %+v", cl, info)
	}
	svm := must(c.SVM(ctx))(t)
	if svm.UUID != info.SVMUUID || svm.State != "running" || len(svm.Aggregates) == 0 {
		t.Errorf("svm %+v", svm)
	}
	aggr := must(c.Aggregate(ctx, info.Aggregates[0]))(t)
	if aggr.Name != info.Aggregates[0] || aggr.Size <= 0 || aggr.Available <= 0 || aggr.Node == "" {
		t.Errorf("aggregate %+v", aggr)
	}
	if _, err := c.Aggregate(ctx, "no_such_aggr"); !IsNotFound(err) {
		t.Errorf("missing aggregate: %v", err)
	}
	nodes := must(c.nodes(ctx))(t)
	var names []string
	for _, n := range nodes {
		names = append(names, n.Name)
	}
	if !slices.Equal(names, info.Nodes) {
		t.Errorf("nodes %v, sim %v", names, info.Nodes)
	}
	for service, want := range map[string][]string{ServiceDataNFS: info.NFSLIFs, ServiceDataISCSI: info.ISCSILIFs} {
		lifs := must(c.DataLIFs(ctx, service))(t)
		var addrs []string
		for _, l := range lifs {
			if l.State != "up" || l.HomeNode == "" || !slices.Contains(l.Services, service) {
				t.Errorf("LIF %+v", l)
			}
			addrs = append(addrs, l.Address)
		}
		slices.Sort(addrs)
		want = slices.Sorted(slices.Values(want))
		if !slices.Equal(addrs, want) {
			t.Errorf("%s LIFs %v, sim %v", service, addrs, want)
		}
	}
	iscsi := must(c.ISCSIService(ctx))(t)
	if !iscsi.Enabled || iscsi.TargetName != info.TargetIQN {
		t.Errorf("iscsi %+v, sim IQN %s", iscsi, info.TargetIQN)
	}
	chap := must(c.chap(ctx))(t)
	if chap.AuthenticationType != "none" {
		t.Errorf("chap %+v", chap)
	}
	check(t, c.SetCHAP(ctx, CHAPCredentials{InboundUser: "in", InboundPassword: "in-secret-1234", OutboundUser: "out", OutboundPassword: "out-secret-5678"}))
	chap = must(c.chap(ctx))(t)
	if chap.AuthenticationType != "chap" || chap.InboundUser != "in" || chap.OutboundUser != "out" {
		t.Errorf("chap %+v", chap)
	}
	err := c.SetCHAP(ctx, CHAPCredentials{InboundUser: "in", InboundPassword: "same-secret", OutboundUser: "out", OutboundPassword: "same-secret"})
	if ClassOf(err) != ClassInvalid || strings.Contains(err.Error(), "same-secret") {
		t.Errorf("equal CHAP secrets: %v", err)
	}
}

func TestSimAuthAndTLS(t *testing.T) {
	s, err := ontapsim.New(ontapsim.Config{SVM: "svm0", Username: "admin", Password: "secret"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rawURL, err := s.Start("127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(rawURL, "https://")
	ctx := context.Background()
	newClient := func(edit func(*ClientConfig)) *Client {
		cfg := ClientConfig{ManagementLIF: host, SVM: "svm0", Username: "admin", Password: "secret",
			TrustedCACertificate: s.CACertificatePEM(), RetryBaseDelay: time.Millisecond}
		edit(&cfg)
		c, err := NewClient(cfg)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}

	// Verified against the simulator's CA.
	if _, err := newClient(func(*ClientConfig) {}).cluster(ctx); err != nil {
		t.Fatalf("verified TLS: %v", err)
	}
	// Without the CA the self-signed certificate is refused, at once.
	_, err = newClient(func(c *ClientConfig) { c.TrustedCACertificate = nil }).cluster(ctx)
	if ClassOf(err) != ClassAuth || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("unverified TLS: %v", err)
	}
	// ... unless verification is explicitly skipped.
	if _, err := newClient(func(c *ClientConfig) { c.TrustedCACertificate = nil; c.InsecureSkipTLSVerify = true }).cluster(ctx); err != nil {
		t.Fatalf("insecure TLS: %v", err)
	}
	// Wrong password: 401, no retries, no password in the error.
	_, err = newClient(func(c *ClientConfig) { c.Password = "wrong-password-x" }).cluster(ctx)
	if ClassOf(err) != ClassAuth || strings.Contains(err.Error(), "wrong-password-x") {
		t.Fatalf("bad password: %v", err)
	}
	// Client certificate authentication: no password at all.
	certPEM, keyPEM, err := s.IssueClientCertificate("admin")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := newClient(func(c *ClientConfig) {
		c.Username, c.Password, c.ClientCertificate, c.ClientPrivateKey = "", "", certPEM, keyPEM
	}).SVM(ctx); err != nil {
		t.Fatalf("certificate auth: %v", err)
	}
}

func TestSimVolumeSnapshotCloneLifecycle(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	aggr := s.Info().Aggregates[0]

	check(t, c.CreateVolume(ctx, VolumeCreate{
		Name: "trident_pvc_1", Aggregate: aggr, Size: 1 << 30, SpaceReserve: "none", SnapshotPolicy: "none",
		SnapshotReservePercent: new(0), SnapshotDirAccess: new(false), UnixPermissions: "755", ExportPolicy: "default",
		SecurityStyle: "unix", JunctionPath: "/trident_pvc_1", Comment: `{"size":"1Gi"}`,
	}))
	v := must(c.GetVolume(ctx, "trident_pvc_1"))(t)
	if v.Size != 1<<30 || v.JunctionPath != "/trident_pvc_1" || v.UnixPermissions != "755" || v.SpaceReserve != "none" ||
		v.SnapshotPolicy != "none" || v.SnapshotDirAccess || v.ExportPolicy != "default" || v.Comment != `{"size":"1Gi"}` ||
		v.State != "online" || !slices.Equal(v.Aggregates, []string{aggr}) {
		t.Errorf("volume %+v", v)
	}
	if err := c.CreateVolume(ctx, VolumeCreate{Name: "trident_pvc_1", Aggregate: aggr, Size: 1 << 30}); !IsAlreadyExists(err) {
		t.Errorf("duplicate create: %v", err)
	}
	if err := c.CreateVolume(ctx, VolumeCreate{Name: "trident_pvc_small", Aggregate: aggr, Size: 1 << 20}); ClassOf(err) != ClassInvalid {
		t.Errorf("too small: %v", err)
	}
	if _, err := c.GetVolume(ctx, "trident_pvc_none"); !IsNotFound(err) {
		t.Errorf("missing volume: %v", err)
	}

	check(t, c.ModifyVolume(ctx, v.UUID, VolumeModify{Size: new(int64(2 << 30)), Comment: new("c2"), SnapshotDirAccess: new(true)}))
	check(t, c.ModifyVolume(ctx, v.UUID, VolumeModify{JunctionPath: new("")}))
	v = must(c.GetVolume(ctx, "trident_pvc_1"))(t)
	if v.Size != 2<<30 || v.Comment != "c2" || !v.SnapshotDirAccess || v.JunctionPath != "" {
		t.Errorf("after modify %+v", v)
	}
	if sv, ok := s.Volume("trident_pvc_1"); !ok || sv.Size != 2<<30 || sv.JunctionPath != "" {
		t.Errorf("simulator sees %+v", sv)
	}
	check(t, c.ModifyVolume(ctx, v.UUID, VolumeModify{JunctionPath: new("/trident_pvc_1")}))

	check(t, c.CreateSnapshot(ctx, v.UUID, "snapshot-a"))
	snap := must(c.GetSnapshot(ctx, v.UUID, "snapshot-a"))(t)
	if snap.UUID == "" || snap.CreateTime.IsZero() || time.Since(snap.CreateTime) > time.Hour {
		t.Errorf("snapshot %+v", snap)
	}
	if err := c.CreateSnapshot(ctx, v.UUID, "snapshot-a"); !IsAlreadyExists(err) {
		t.Errorf("duplicate snapshot: %v", err)
	}
	if snaps := must(c.ListSnapshots(ctx, v.UUID))(t); len(snaps) != 1 || snaps[0].Name != "snapshot-a" {
		t.Errorf("snapshots %+v", snaps)
	}

	check(t, c.CloneVolume(ctx, VolumeClone{Name: "trident_pvc_2", ParentVolume: "trident_pvc_1", ParentSnapshot: "snapshot-a"}))
	clone := must(c.GetVolume(ctx, "trident_pvc_2"))(t)
	if !clone.IsClone || clone.CloneParentVolume != "trident_pvc_1" || clone.CloneParentSnapshot != "snapshot-a" {
		t.Errorf("clone %+v", clone)
	}
	if vols := must(c.ListVolumes(ctx, "trident_pvc_"))(t); len(vols) != 2 {
		t.Errorf("listed %d volumes", len(vols))
	}
	// Dependencies: the snapshot backs the clone, the parent has a clone.
	if err := c.DeleteSnapshot(ctx, v.UUID, snap.UUID); !IsInUse(err) {
		t.Errorf("delete busy snapshot: %v", err)
	}
	if err := c.DeleteVolume(ctx, v.UUID, true); !IsInUse(err) {
		t.Errorf("delete parent: %v", err)
	}
	check(t, c.ModifyVolume(ctx, clone.UUID, VolumeModify{SplitClone: true}))
	check(t, c.DeleteVolume(ctx, clone.UUID, true))
	check(t, c.DeleteSnapshot(ctx, v.UUID, snap.UUID))
	if _, err := c.GetSnapshot(ctx, v.UUID, "snapshot-a"); !IsNotFound(err) {
		t.Errorf("deleted snapshot: %v", err)
	}
	check(t, c.DeleteVolume(ctx, v.UUID, true))
	if err := c.DeleteVolume(ctx, v.UUID, true); !IsNotFound(err) {
		t.Errorf("second delete: %v", err)
	}
	if vols := must(c.ListVolumes(ctx, "trident_"))(t); len(vols) != 0 {
		t.Errorf("left %+v", vols)
	}
}

func TestSimExportPolicies(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	pol := must(c.CreateExportPolicy(ctx, "trident_pvc_1"))(t)
	if pol.ID == 0 || pol.Name != "trident_pvc_1" {
		t.Fatalf("policy %+v", pol)
	}
	if got := must(c.GetExportPolicy(ctx, "trident_pvc_1"))(t); *got != *pol {
		t.Errorf("get %+v, created %+v", got, pol)
	}
	if _, err := c.CreateExportPolicy(ctx, "trident_pvc_1"); !IsAlreadyExists(err) {
		t.Errorf("duplicate policy: %v", err)
	}
	r1 := must(c.AddExportRule(ctx, pol.ID, ExportRule{Clients: []string{"10.0.0.5"}}))(t)
	r2 := must(c.AddExportRule(ctx, pol.ID, ExportRule{Clients: []string{"10.0.0.6", "fd00::6"}, RWRule: []string{"never"}}))(t)
	if r1.Index == 0 || r2.Index == r1.Index || !slices.Equal(r1.Protocols, []string{"nfs"}) || !slices.Equal(r1.Superuser, []string{"any"}) {
		t.Errorf("rules %+v %+v", r1, r2)
	}
	if _, err := c.AddExportRule(ctx, pol.ID, ExportRule{Clients: []string{"10.0.0.5"}}); !IsAlreadyExists(err) {
		t.Errorf("duplicate rule: %v", err)
	}
	rules := must(c.ListExportRules(ctx, pol.ID))(t)
	if len(rules) != 2 || !sameSet(rules[1].Clients, []string{"10.0.0.6", "fd00::6"}) || !slices.Equal(rules[1].RWRule, []string{"never"}) {
		t.Errorf("rules %+v", rules)
	}
	// In use by a volume: not deletable.
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "trident_pvc_1", Aggregate: s.Info().Aggregates[0], Size: 1 << 30, ExportPolicy: "trident_pvc_1", JunctionPath: "/trident_pvc_1"}))
	if err := c.DeleteExportPolicy(ctx, pol.ID); !IsInUse(err) {
		t.Errorf("delete used policy: %v", err)
	}
	v := must(c.GetVolume(ctx, "trident_pvc_1"))(t)
	if v.ExportPolicy != "trident_pvc_1" {
		t.Errorf("volume policy %q", v.ExportPolicy)
	}
	check(t, c.ModifyVolume(ctx, v.UUID, VolumeModify{ExportPolicy: new("default")}))
	check(t, c.DeleteExportRule(ctx, pol.ID, r1.Index))
	if err := c.DeleteExportRule(ctx, pol.ID, r1.Index); !IsNotFound(err) {
		t.Errorf("delete missing rule: %v", err)
	}
	check(t, c.DeleteExportPolicy(ctx, pol.ID))
	if _, err := c.GetExportPolicy(ctx, "trident_pvc_1"); !IsNotFound(err) {
		t.Errorf("deleted policy: %v", err)
	}
	def := must(c.GetExportPolicy(ctx, "default"))(t)
	if err := c.DeleteExportPolicy(ctx, def.ID); !IsInUse(err) {
		t.Errorf("delete default policy: %v", err)
	}
}

func TestSimLUNsIgroupsMaps(t *testing.T) {
	s, c := startSim(t, ontapsim.Config{}, nil)
	ctx := context.Background()
	lun := simLUNLifecycle(ctx, t, s, c)
	ig, iqn := simIgroupLifecycle(ctx, t, c)
	lun2 := simLUNMaps(ctx, t, s, c, lun, ig)
	simMapDependencies(ctx, t, s, c, lun, lun2, ig, iqn)
}

// simLUNLifecycle creates, reads, resizes and labels a LUN.
func simLUNLifecycle(ctx context.Context, t *testing.T, s *ontapsim.Simulator, c *Client) *LUN {
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "trident_pvc_1", Aggregate: s.Info().Aggregates[0], Size: 2 << 30, SpaceReserve: "none"}))
	lun := must(c.CreateLUN(ctx, LUNCreate{Path: "/vol/trident_pvc_1/lun0", Size: 1 << 30, SpaceAllocation: true}))(t)
	if lun.UUID == "" || len(lun.SerialNumber) != 12 || lun.Size < 1<<30 || lun.OSType != "linux" || lun.VolumeName != "trident_pvc_1" {
		t.Fatalf("lun %+v", lun)
	}
	if got := must(c.GetLUN(ctx, "/vol/trident_pvc_1/lun0"))(t); got.SerialNumber != lun.SerialNumber || got.UUID != lun.UUID {
		t.Errorf("get %+v", got)
	}
	if _, err := c.CreateLUN(ctx, LUNCreate{Path: "/vol/trident_pvc_1/lun0", Size: 1 << 30}); !IsAlreadyExists(err) {
		t.Errorf("duplicate LUN: %v", err)
	}
	if _, err := c.GetLUN(ctx, "/vol/trident_pvc_1/lun9"); !IsNotFound(err) {
		t.Errorf("missing LUN: %v", err)
	}
	check(t, c.ResizeLUN(ctx, lun.UUID, 3<<29))
	cur := must(c.GetLUN(ctx, lun.Path))(t)
	check(t, c.ResizeLUN(ctx, lun.UUID, cur.Size)) // same size: fine
	if err := c.ResizeLUN(ctx, lun.UUID, 1<<29); ClassOf(err) != ClassInvalid {
		t.Errorf("shrink: %v", err)
	}
	check(t, c.SetLUNAttribute(ctx, lun.UUID, "com.netapp.ndvp.fstype", "ext4"))
	check(t, c.SetLUNAttribute(ctx, lun.UUID, "com.netapp.ndvp.fstype", "xfs")) // replaces
	check(t, c.SetLUNAttribute(ctx, lun.UUID, "context", "csi"))
	if attrs := must(c.LUNAttributes(ctx, lun.UUID))(t); attrs["com.netapp.ndvp.fstype"] != "xfs" || attrs["context"] != "csi" {
		t.Errorf("attributes %v", attrs)
	}
	return lun
}

// simIgroupLifecycle creates igroups, with and without initiators, and
// returns one holding iqn.
func simIgroupLifecycle(ctx context.Context, t *testing.T, c *Client) (*Igroup, string) {
	ig := must(c.CreateIgroup(ctx, "node1-trident"))(t)
	if ig.UUID == "" || ig.Protocol != "iscsi" || ig.OSType != "linux" {
		t.Fatalf("igroup %+v", ig)
	}
	if _, err := c.CreateIgroup(ctx, "node1-trident"); !IsAlreadyExists(err) {
		t.Errorf("duplicate igroup: %v", err)
	}
	// An igroup created with its initiators, in one request.
	const iqn2 = "iqn.1994-05.com.redhat:node2"
	ig2 := must(c.CreateIgroup(ctx, "node2-trident", iqn2))(t)
	if !slices.Equal(ig2.Initiators, []string{iqn2}) {
		t.Errorf("igroup created with an initiator: %+v", ig2)
	}
	if got := must(c.GetIgroup(ctx, "node2-trident"))(t); !slices.Equal(got.Initiators, []string{iqn2}) {
		t.Errorf("initiators of the igroup created with one: %v", got.Initiators)
	}
	check(t, c.DeleteIgroup(ctx, ig2.UUID))
	const iqn = "iqn.1994-05.com.redhat:node1"
	check(t, c.AddInitiator(ctx, ig.UUID, iqn))
	if err := c.AddInitiator(ctx, ig.UUID, iqn); !IsAlreadyExists(err) {
		t.Errorf("duplicate initiator: %v", err)
	}
	if got := must(c.GetIgroup(ctx, "node1-trident"))(t); !slices.Equal(got.Initiators, []string{iqn}) {
		t.Errorf("initiators %v", got.Initiators)
	}
	return ig, iqn
}

// simLUNMaps maps lun and a second LUN to ig and returns the second.
func simLUNMaps(ctx context.Context, t *testing.T, s *ontapsim.Simulator, c *Client, lun *LUN, ig *Igroup) *LUN {
	m := must(c.CreateLUNMap(ctx, LUNMapCreate{LUNPath: lun.Path, IgroupName: ig.Name}))(t)
	if m.LUNID != 0 || m.LUNUUID != lun.UUID || m.IgroupUUID != ig.UUID {
		t.Errorf("map %+v", m)
	}
	if _, err := c.CreateLUNMap(ctx, LUNMapCreate{LUNPath: lun.Path, IgroupName: ig.Name}); !IsAlreadyExists(err) {
		t.Errorf("duplicate map: %v", err)
	}
	check(t, c.CreateVolume(ctx, VolumeCreate{Name: "trident_pvc_2", Aggregate: s.Info().Aggregates[0], Size: 2 << 30}))
	lun2 := must(c.CreateLUN(ctx, LUNCreate{Path: "/vol/trident_pvc_2/lun0", Size: 1 << 30}))(t)
	if lun2.SerialNumber == lun.SerialNumber {
		t.Error("serials collide")
	}
	m2 := must(c.CreateLUNMap(ctx, LUNMapCreate{LUNPath: lun2.Path, IgroupName: ig.Name, LUNID: new(7)}))(t)
	if m2.LUNID != 7 {
		t.Errorf("fixed LUN id: %+v", m2)
	}
	if maps := must(c.ListLUNMaps(ctx, "", ig.Name))(t); len(maps) != 2 {
		t.Errorf("maps of igroup %+v", maps)
	}
	if maps := must(c.ListLUNMaps(ctx, lun.Path, ""))(t); len(maps) != 1 || maps[0].LUNID != 0 {
		t.Errorf("maps of LUN %+v", maps)
	}
	nodes := must(c.LUNMapReportingNodes(ctx, lun.UUID, ig.UUID))(t)
	if len(nodes) == 0 || !slices.Contains(s.Info().Nodes, nodes[0]) {
		t.Errorf("reporting nodes %v", nodes)
	}
	if !slices.Equal(m.ReportingNodes, nodes) {
		t.Errorf("CreateLUNMap's reporting nodes %v, the reporting-nodes endpoint's %v", m.ReportingNodes, nodes)
	}
	if got := must(c.GetLUN(ctx, lun.Path))(t); !got.Mapped {
		t.Error("LUN not mapped")
	}
	return lun2
}

// simMapDependencies checks the dependency rules of maps, LUNs and igroups
// and tears them down.
func simMapDependencies(ctx context.Context, t *testing.T, s *ontapsim.Simulator, c *Client, lun, lun2 *LUN, ig *Igroup, iqn string) {
	if err := c.DeleteIgroup(ctx, ig.UUID); !IsInUse(err) {
		t.Errorf("delete mapped igroup: %v", err)
	}
	if err := c.removeInitiator(ctx, ig.UUID, iqn); !IsInUse(err) {
		t.Errorf("remove initiator of mapped igroup: %v", err)
	}
	if err := c.deleteLUN(ctx, lun.UUID, false); !IsInUse(err) {
		t.Errorf("delete mapped LUN: %v", err)
	}
	check(t, c.DeleteLUNMap(ctx, lun.UUID, ig.UUID))
	if err := c.DeleteLUNMap(ctx, lun.UUID, ig.UUID); !IsNotFound(err) {
		t.Errorf("delete missing map: %v", err)
	}
	check(t, c.deleteLUN(ctx, lun2.UUID, true)) // takes its map along
	check(t, c.removeInitiator(ctx, ig.UUID, iqn))
	if err := c.removeInitiator(ctx, ig.UUID, iqn); !IsNotFound(err) {
		t.Errorf("remove non-member: %v", err)
	}
	check(t, c.DeleteIgroup(ctx, ig.UUID))
	check(t, c.deleteLUN(ctx, lun.UUID, false))
	if len(s.LUNs()) != 0 || len(s.IGroups()) != 0 || len(s.LUNMaps()) != 0 {
		t.Errorf("left: %+v %+v %+v", s.LUNs(), s.IGroups(), s.LUNMaps())
	}
}

// TestSimFaultsEachKind runs one volume create into each fault the
// simulator injects, once, and checks how the client came out of it: a
// transient fault is retried (429 after its Retry-After) and leaves exactly
// one volume; a failed job is classified from its code, keeps ONTAP's
// message and leaves nothing. client_test.go pins the same behaviour down
// on hand-made responses; this is the same against ONTAP's semantics.
func TestSimFaultsEachKind(t *testing.T) {
	const name = "trident_pvc_f"
	for _, tc := range []struct {
		rule      ontapsim.FaultRule
		wantClass Class // ClassUnknown: the create succeeds
		wantSleep time.Duration
	}{
		{rule: ontapsim.FaultRule{Kind: ontapsim.FaultThrottle, RetryAfter: 2}, wantSleep: 2 * time.Second},
		{rule: ontapsim.FaultRule{Kind: ontapsim.FaultUnavailable}},
		{rule: ontapsim.FaultRule{Kind: ontapsim.FaultLocked}},
		{rule: ontapsim.FaultRule{Kind: ontapsim.FaultDrop}},
		{rule: ontapsim.FaultRule{Kind: ontapsim.FaultDropAfterCommit}},
		{rule: ontapsim.FaultRule{Kind: ontapsim.FaultJob, Code: 524486}, wantClass: ClassInUse},
		{rule: ontapsim.FaultRule{Kind: ontapsim.FaultJob, Code: 917508}, wantClass: ClassNotFound},
	} {
		t.Run(string(tc.rule.Kind)+"-"+strconv.Itoa(tc.rule.Code), func(t *testing.T) {
			s, c := startSim(t, ontapsim.Config{}, nil)
			rec := &sleepRecorder{}
			c.sleep = rec.sleep
			aggr := s.Info().Aggregates[0]
			if _, err := c.SVM(context.Background()); err != nil {
				t.Fatal(err)
			}
			rule := tc.rule
			rule.Method, rule.Path, rule.Rate, rule.Limit = "POST", "/storage/volumes", 1, 1
			s.SetFaults([]ontapsim.FaultRule{rule})
			err := c.CreateVolume(context.Background(), VolumeCreate{Name: name, Aggregate: aggr, Size: 1 << 30, JunctionPath: "/" + name})
			if st := s.Stats(); st.Faults != 1 {
				t.Fatalf("%d faults injected, want 1", st.Faults)
			}
			var vols []string
			for _, v := range s.Volumes() {
				if !v.IsSVMRoot {
					vols = append(vols, v.Name)
				}
			}
			if tc.wantClass == ClassUnknown {
				if err != nil {
					t.Fatalf("create through a transient fault: %v", err)
				}
				if !slices.Equal(vols, []string{name}) {
					t.Errorf("volumes %v, want exactly %s", vols, name)
				}
			} else {
				var e *Error
				if ClassOf(err) != tc.wantClass || !errors.As(err, &e) || e.Message == "" || e.Code != strconv.Itoa(tc.rule.Code) {
					t.Fatalf("failed job: %v (class %s), want class %s with ONTAP's code and message", err, ClassOf(err), tc.wantClass)
				}
				if len(vols) != 0 {
					t.Errorf("a failed create left %v", vols)
				}
			}
			if tc.wantSleep > 0 && !slices.Contains(rec.all(), tc.wantSleep) {
				t.Errorf("waits %v: Retry-After %v not honoured", rec.all(), tc.wantSleep)
			}
		})
	}
}
