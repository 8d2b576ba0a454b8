package sanity

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// transientFaults is ONTAP misbehaving the way the client must survive:
// overload answers, dropped connections (before and after the request took
// effect), and jobs failing with errors a retry gets past.
var transientFaults = []ontapsim.FaultRule{
	{Path: "*", Rate: 0.04, Kind: ontapsim.FaultUnavailable},
	{Path: "*", Rate: 0.03, Kind: ontapsim.FaultThrottle, RetryAfter: 0},
	{Path: "*", Rate: 0.03, Kind: ontapsim.FaultDrop},
	{Path: "*", Rate: 0.03, Kind: ontapsim.FaultDropAfterCommit},
	{Path: "*", Rate: 0.02, Kind: ontapsim.FaultLocked},
	{Method: "POST", Path: "/storage/volumes", Rate: 0.05, Kind: ontapsim.FaultJob, Code: 460770},
	{Method: "DELETE", Path: "/storage/volumes/{uuid}", Rate: 0.05, Kind: ontapsim.FaultJob, Code: 524486},
	{Method: "POST", Path: "/storage/luns", Rate: 0.05, Kind: ontapsim.FaultJob, Code: 460770},
	{Method: "PATCH", Path: "/storage/volumes/{uuid}", Rate: 0.05, Kind: ontapsim.FaultJob, Code: 460770},
	{Method: "POST", Path: "/protocols/san/lun-maps", Rate: 0.05, Kind: ontapsim.FaultJob, Code: 460770},
	{Method: "POST", Path: "/protocols/nfs/export-policies/{policy.id}/rules", Rate: 0.05, Kind: ontapsim.FaultJob, Code: 460770},
	// The economy drivers' qtrees and quota rules.
	{Method: "POST", Path: "/storage/qtrees", Rate: 0.05, Kind: ontapsim.FaultJob, Code: 460770},
	{Method: "DELETE", Path: "/storage/qtrees/{volume.uuid}/{id}", Rate: 0.05, Kind: ontapsim.FaultJob, Code: 460770},
	{Method: "POST", Path: "/storage/quota/rules", Rate: 0.05, Kind: ontapsim.FaultJob, Code: 460770},
}

// maxAttempts bounds provisioner's retries of one call (2026-12-04: 200
// ran out once for an ontap-san create at load 10 on 2 cores, while 400
// operations took 733 attempts in all on a quiet one).
const maxAttempts = 600

// provisioner retries a CSI call with the same arguments until it succeeds,
// as csi-provisioner and csi-attacher do: each attempt has a deadline, and a
// timed-out attempt leaves its ONTAP job running behind it. The deadline is
// far shorter than any sidecar's, to cut jobs in the middle; on a loaded
// machine most attempts then run out (a volume POST's job answers even "it
// exists" only after its latency, as ONTAP does), so the bound on attempts
// is generous: it catches a call that never converges, not a slow one.
func provisioner(t *testing.T, what string, failures map[codes.Code]int, call func(ctx context.Context) error) (attempts int) {
	t.Helper()
	backoff := time.Millisecond
	for attempts = 1; attempts <= maxAttempts; attempts++ {
		ctx, cancel := context.WithTimeout(context.Background(), 80*time.Millisecond)
		err := call(ctx)
		cancel()
		if err == nil {
			return attempts
		}
		failures[status.Code(err)]++
		switch status.Code(err) {
		case codes.InvalidArgument, codes.NotFound, codes.AlreadyExists, codes.OutOfRange:
			t.Fatalf("%s: attempt %d: final error %v", what, attempts, err)
		}
		time.Sleep(backoff)
		backoff = min(2*backoff, 50*time.Millisecond)
	}
	t.Fatalf("%s: no success after %d attempts", what, attempts-1)
	return attempts
}

// TestFaultsLeaveNoOrphans drives 100 create/publish/unpublish/delete
// rounds per driver through transient ONTAP faults and calls that time out
// mid-job, and checks that ONTAP ends up with nothing left behind: no
// volume (economy pools included), qtree, LUN, igroup or export policy.
func TestFaultsLeaveNoOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	ms := time.Millisecond
	latency := ontapsim.LatencyModel{
		// Jobs long enough that some attempts time out while their job
		// still runs, short enough to keep the test quick.
		VolumeCreate: ontapsim.Range{Min: 10 * ms, Max: 100 * ms}, VolumeDelete: ontapsim.Range{Min: 10 * ms, Max: 100 * ms},
		VolumePatch: ontapsim.Range{Min: 2 * ms, Max: 50 * ms}, LUNCreate: ontapsim.Range{Min: 2 * ms, Max: 50 * ms},
		QtreeCreate: ontapsim.Range{Min: 2 * ms, Max: 50 * ms}, QtreeDelete: ontapsim.Range{Min: 2 * ms, Max: 50 * ms},
		QuotaRule: ontapsim.Range{Min: 2 * ms, Max: 50 * ms}, QuotaInitialize: ontapsim.Range{Min: 10 * ms, Max: 100 * ms},
	}
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN, config.DriverONTAPNASEconomy, config.DriverONTAPSANEconomy} {
		t.Run(driver, func(t *testing.T) {
			t.Parallel()
			p := Start(t, Options{Driver: driver, FastRetries: true, Sim: ontapsim.Config{Latency: latency, Seed: 7}})
			p.Sim.SetFaults(transientFaults)
			caps := mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
			total, failures := 0, map[codes.Code]int{}
			for i := 0; i < 100; i++ {
				id := fmt.Sprintf("pvc-fault-%03d", i)
				total += provisioner(t, "create "+id, failures, func(ctx context.Context) error {
					_, err := p.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
						Name: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
						VolumeCapabilities: []*csi.VolumeCapability{caps},
					})
					return err
				})
				total += provisioner(t, "publish "+id, failures, func(ctx context.Context) error {
					_, err := p.Controller.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
						VolumeId: id, NodeId: NodeID, VolumeCapability: caps,
					})
					return err
				})
				total += provisioner(t, "unpublish "+id, failures, func(ctx context.Context) error {
					_, err := p.Controller.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: NodeID})
					return err
				})
				total += provisioner(t, "delete "+id, failures, func(ctx context.Context) error {
					_, err := p.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id})
					return err
				})
			}
			st := p.Sim.Stats()
			t.Logf("%s: 400 CSI operations took %d attempts (failures by code: %v); ONTAP saw %d requests, %d of them faulted",
				driver, total, failures, st.Requests, st.Faults)
			if st.Faults == 0 || total == 400 {
				t.Errorf("no fault reached the controller (%d faults, %d attempts): the test proves nothing", st.Faults, total)
			}
			// Let jobs of abandoned attempts finish before looking.
			p.Sim.SetFaults(nil)
			waitJobs(t, p.Sim)
			p.AssertClean(t)
		})
	}
}

// waitJobs waits until the simulator runs no job.
func waitJobs(t *testing.T, s *ontapsim.Simulator) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		busy := false
		for _, j := range s.Jobs() {
			if j.State == "queued" || j.State == "running" {
				busy = true
			}
		}
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("simulator jobs do not finish")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A clone whose create stopped after ONTAP made the FlexClone (it still
// carries its parent's comment) is completed by the retried create, for
// both drivers.
func TestInterruptedCloneIsCompleted(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			p := Start(t, Options{Driver: driver, FastRetries: true})
			caps := []*csi.VolumeCapability{mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}
			if _, err := p.Controller.CreateVolume(Ctx(t), &csi.CreateVolumeRequest{Name: "pvc-src", VolumeCapabilities: caps}); err != nil {
				t.Fatal(err)
			}
			snap, err := p.Controller.CreateSnapshot(Ctx(t), &csi.CreateSnapshotRequest{Name: "snap-1", SourceVolumeId: "pvc-src"})
			if err != nil {
				t.Fatal(err)
			}
			req := &csi.CreateVolumeRequest{Name: "pvc-clone", VolumeCapabilities: caps,
				CapacityRange: &csi.CapacityRange{RequiredBytes: 2 << 30},
				VolumeContentSource: &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
					Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: snap.Snapshot.SnapshotId}}}}
			// The PATCH that gives the clone its own comment fails.
			p.Sim.SetFaults([]ontapsim.FaultRule{{Method: "PATCH", Path: "/storage/volumes/{uuid}", Rate: 1, Kind: ontapsim.FaultJob, Code: 460770, Limit: 1}})
			if _, err := p.Controller.CreateVolume(Ctx(t), req); err == nil {
				t.Fatal("clone create succeeded despite the fault")
			}
			resp, err := p.Controller.CreateVolume(Ctx(t), req)
			if err != nil {
				t.Fatalf("retried clone create: %v", err)
			}
			if resp.Volume.CapacityBytes != 2<<30 || resp.Volume.GetContentSource().GetSnapshot().GetSnapshotId() != snap.Snapshot.SnapshotId {
				t.Errorf("clone %+v", resp.Volume)
			}
			v, _ := p.Sim.Volume("trident_pvc_clone")
			if !strings.Contains(v.Comment, `"name":"pvc-clone"`) {
				t.Errorf("clone comment %s", v.Comment)
			}
			// Another name must not adopt it.
			other := proto.Clone(req).(*csi.CreateVolumeRequest)
			other.Name = "pvc.clone"
			if _, err := p.Controller.CreateVolume(Ctx(t), other); status.Code(err) != codes.AlreadyExists {
				t.Errorf("a colliding name: %v, want AlreadyExists", err)
			}
		})
	}
}
