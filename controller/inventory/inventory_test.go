package inventory

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/ontap-csi/ontap-csi/backends"
)

// fake is the part of a backend the inventory uses; the rest of
// backends.Backend panics if called.
type fake struct {
	backends.Backend
	name, driver string
	protocol     backends.Protocol
	desc         backends.Description
	vols         []*backends.Volume
	snaps        []*backends.Snapshot
	err          error
	calls        int
}

func (f *fake) Name() string                   { return f.name }
func (f *fake) Driver() string                 { return f.driver }
func (f *fake) Protocol() backends.Protocol    { return f.protocol }
func (f *fake) Describe() backends.Description { return f.desc }
func (f *fake) Pools(context.Context) ([]backends.Pool, error) {
	f.calls++
	return nil, f.err
}

func (f *fake) ListVolumes(context.Context) ([]*backends.Volume, error) {
	f.calls++
	return f.vols, f.err
}

func (f *fake) Snapshots(context.Context, backends.SnapshotFilter) ([]*backends.Snapshot, error) {
	f.calls++
	return f.snaps, f.err
}

func vol(id, internal, owner string, size int64, access backends.AccessType, fs string) *backends.Volume {
	return &backends.Volume{ID: id, Owner: owner, SizeBytes: size, AccessType: access, FSType: fs,
		Context: map[string]string{"internalName": internal}}
}

func fixture() (*fake, *fake, *fake) {
	nas := &fake{name: "nas1", driver: "ontap-nas", protocol: backends.ProtocolFile,
		desc: backends.Description{UUID: "uuid-nas", SVM: "svm_nfs"},
		vols: []*backends.Volume{
			vol("pvc-a", "trident_pvc_a", "nas1", 1<<30, backends.AccessMount, ""),
			vol("pvc-b", "trident_pvc_b", "", 2<<30, "", ""), // made by Trident: no record
		},
		snaps: []*backends.Snapshot{{Name: "snap-1", VolumeID: "pvc-a", SizeBytes: 1 << 30}},
	}
	san := &fake{name: "san1", driver: "ontap-san", protocol: backends.ProtocolBlock,
		desc: backends.Description{UUID: "uuid-san", SVM: "svm_san"},
		vols: []*backends.Volume{
			vol("pvc-c", "trident_pvc_c", "san1", 3<<30, backends.AccessMount, "ext4"),
			vol("pvc-d", "trident_pvc_d", "san1", 4<<30, backends.AccessBlock, "raw"),
		},
	}
	// A second backend on nas1's SVM and prefix sees its volumes too;
	// they count once, under their creator.
	twin := &fake{name: "nas0", driver: "ontap-nas", protocol: backends.ProtocolFile,
		desc: backends.Description{UUID: "uuid-twin", SVM: "svm_nfs"}, vols: nas.vols, snaps: nas.snaps}
	return nas, san, twin
}

const wantScrape = `
# HELP ontap_csi_volume_info A volume's PersistentVolume and claim and its ONTAP volume and SVM; always 1.
# TYPE ontap_csi_volume_info gauge
ontap_csi_volume_info{backend_name="nas1",backend_uuid="uuid-nas",namespace="db",persistentvolume="pvc-a",persistentvolumeclaim="data-a",storageclass="gold",svm="svm_nfs",volume="trident_pvc_a"} 1
ontap_csi_volume_info{backend_name="nas0",backend_uuid="uuid-twin",namespace="",persistentvolume="pvc-b",persistentvolumeclaim="",storageclass="",svm="svm_nfs",volume="trident_pvc_b"} 1
ontap_csi_volume_info{backend_name="san1",backend_uuid="uuid-san",namespace="",persistentvolume="pvc-c",persistentvolumeclaim="",storageclass="",svm="svm_san",volume="trident_pvc_c"} 1
ontap_csi_volume_info{backend_name="san1",backend_uuid="uuid-san",namespace="",persistentvolume="pvc-d",persistentvolumeclaim="",storageclass="",svm="svm_san",volume="trident_pvc_d"} 1
# HELP trident_backend_count The total number of backends
# TYPE trident_backend_count gauge
trident_backend_count{backend_state="failed",backend_type="ontap-san"} 1
trident_backend_count{backend_state="online",backend_type="ontap-nas"} 2
trident_backend_count{backend_state="online",backend_type="ontap-san"} 1
# HELP trident_backend_info Trident backend information
# TYPE trident_backend_info gauge
trident_backend_info{backend_name="broken",backend_type="ontap-san",backend_uuid=""} 1
trident_backend_info{backend_name="nas0",backend_type="ontap-nas",backend_uuid="uuid-twin"} 1
trident_backend_info{backend_name="nas1",backend_type="ontap-nas",backend_uuid="uuid-nas"} 1
trident_backend_info{backend_name="san1",backend_type="ontap-san",backend_uuid="uuid-san"} 1
# HELP trident_node_count The total number of nodes
# TYPE trident_node_count gauge
trident_node_count 3
# HELP trident_snapshot_allocated_bytes The allocated number of snapshot bytes in all backends
# TYPE trident_snapshot_allocated_bytes gauge
trident_snapshot_allocated_bytes{backend_type="ontap-nas",backend_uuid="uuid-nas"} 1.073741824e+09
# HELP trident_snapshot_count The total number of snapshots
# TYPE trident_snapshot_count gauge
trident_snapshot_count{backend_type="ontap-nas",backend_uuid="uuid-nas"} 1
# HELP trident_storageclass_count The total number of storage classes
# TYPE trident_storageclass_count gauge
trident_storageclass_count 2
# HELP trident_volume_allocated_bytes The total allocated number of bytes grouped by backends and volumes
# TYPE trident_volume_allocated_bytes gauge
trident_volume_allocated_bytes{backend_type="ontap-nas",backend_uuid="uuid-nas",volume_state="online",volume_type="Filesystem"} 1.073741824e+09
trident_volume_allocated_bytes{backend_type="ontap-nas",backend_uuid="uuid-twin",volume_state="online",volume_type="Filesystem"} 2.147483648e+09
trident_volume_allocated_bytes{backend_type="ontap-san",backend_uuid="uuid-san",volume_state="online",volume_type="Block"} 4.294967296e+09
trident_volume_allocated_bytes{backend_type="ontap-san",backend_uuid="uuid-san",volume_state="online",volume_type="Filesystem"} 3.221225472e+09
# HELP trident_volume_count The total number of volumes
# TYPE trident_volume_count gauge
trident_volume_count{backend_type="ontap-nas",backend_uuid="uuid-nas",volume_state="online",volume_type="Filesystem"} 1
trident_volume_count{backend_type="ontap-nas",backend_uuid="uuid-twin",volume_state="online",volume_type="Filesystem"} 1
trident_volume_count{backend_type="ontap-san",backend_uuid="uuid-san",volume_state="online",volume_type="Block"} 1
trident_volume_count{backend_type="ontap-san",backend_uuid="uuid-san",volume_state="online",volume_type="Filesystem"} 1
# HELP trident_volume_total_bytes The total number of bytes in all volumes
# TYPE trident_volume_total_bytes gauge
trident_volume_total_bytes 1.073741824e+10
`

// TestScrapeSeriesAndLabels: the exact series, labels and values of a
// scrape, from one refresh; scraping costs no backend call.
func TestScrapeSeriesAndLabels(t *testing.T) {
	nas, san, twin := fixture()
	inv := New(Config{
		Backends: func() []backends.Backend { return []backends.Backend{nas, san, twin} },
		PVs: func(context.Context) ([]PV, error) {
			return []PV{{VolumeID: "pvc-a", Name: "pvc-a", Namespace: "db", Claim: "data-a", StorageClass: "gold"}}, nil
		},
		StorageClasses: func(context.Context) (int, error) { return 2, nil },
		Nodes:          func(context.Context) (int, error) { return 3, nil },
	})
	inv.Report("broken", "ontap-san", errors.New("cannot reach SVM s"))
	inv.Refresh(context.Background())
	calls := nas.calls + san.calls + twin.calls

	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(inv)
	names := []string{"trident_backend_info", "trident_backend_count", "trident_volume_count", "trident_volume_allocated_bytes",
		"trident_volume_total_bytes", "trident_snapshot_count", "trident_snapshot_allocated_bytes", "trident_node_count",
		"trident_storageclass_count", "ontap_csi_volume_info"}
	for range 3 {
		if err := testutil.GatherAndCompare(reg, strings.NewReader(wantScrape), names...); err != nil {
			t.Fatal(err)
		}
	}
	if got := nas.calls + san.calls + twin.calls; got != calls {
		t.Errorf("scrapes made %d backend calls; they must read the cache only", got-calls)
	}
	if n, err := testutil.GatherAndCount(reg, "ontap_csi_inventory_refresh_timestamp_seconds"); err != nil || n != 1 {
		t.Errorf("refresh timestamp: %d series, %v", n, err)
	}
}

// TestStates: online, then offline when a working backend stops answering
// (its volumes still counted), failed when it never worked; a reported
// failure stays listed until it works or is forgotten.
func TestStates(t *testing.T) {
	nas, san, _ := fixture()
	san.err = backends.Named("san1", errors.New("the TLS certificate ONTAP presents at x is not trusted"))
	inv := New(Config{Backends: func() []backends.Backend { return []backends.Backend{nas, san} }})
	inv.Refresh(context.Background())
	nas.err = errors.New("connection refused")
	inv.Refresh(context.Background())
	got := inv.Backends()
	if len(got) != 2 || got[0].Name != "nas1" || got[0].State != Offline || got[0].Volumes != 2 || got[1].State != Failed {
		t.Fatalf("%+v", got)
	}
	if m := got[1].Message; !strings.HasPrefix(m, "backend san1: the TLS") || strings.Count(m, "san1") != 1 {
		t.Errorf("message %q: want the backend named once", m)
	}
	inv.Report("tbc-backend", "ontap-nas", errors.New("ONTAP: refused"))
	inv.Refresh(context.Background())
	if n := len(inv.Backends()); n != 3 {
		t.Fatalf("a reported failure is listed until forgotten: %+v", inv.Backends())
	}
	inv.Forget("tbc-backend")
	if n := len(inv.Backends()); n != 2 {
		t.Fatalf("forgotten: %+v", inv.Backends())
	}
}

// TestChangedListsAgain: a backend served after start-up (a
// TridentBackendConfig loaded, or every one after a controller restart) is
// listed once Changed is called, not a period later; calls made while a
// refresh is pending coalesce.
func TestChangedListsAgain(t *testing.T) {
	nas, san, _ := fixture()
	var mu sync.Mutex
	served := []backends.Backend{nas}
	inv := New(Config{Period: time.Hour, Backends: func() []backends.Backend {
		mu.Lock()
		defer mu.Unlock()
		return served
	}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { inv.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	waitFor := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); !ok(); time.Sleep(time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("never: %s; backends %+v", what, inv.Backends())
			}
		}
	}
	waitFor("the start-up listing", func() bool { return !inv.Refreshed().IsZero() })
	first := inv.Refreshed()

	mu.Lock()
	served = []backends.Backend{nas, san}
	mu.Unlock()
	inv.Changed()
	inv.Changed() // coalesces with the first
	waitFor("san listed", func() bool { return len(inv.Backends()) == 2 })
	if got := inv.Backends()[1]; got.Name != "san1" || got.State != Online || got.Volumes != len(san.vols) {
		t.Errorf("san after Changed: %+v", got)
	}
	// Only the start-up listing and one for the two Changed calls, or two
	// if the second came after Run took the first; never more.
	time.Sleep(50 * time.Millisecond)
	if n := nas.calls; n > 3*3 {
		t.Errorf("nas listed %d times (3 calls each), want at most 3 listings", n/3)
	}
	if !inv.Refreshed().After(first) {
		t.Error("Refreshed did not move")
	}
}
