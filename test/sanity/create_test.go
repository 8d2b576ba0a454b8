package sanity

import (
	"fmt"
	"maps"
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// A create with one backend goes straight to ONTAP, and ONTAP's answer
// that the name is taken sends a retry to the usual lookup: the retry gets
// the same volume, an incompatible one is refused, and a half-made
// ontap-san volume (its LUN missing) is completed.
func TestCreateWithoutLookup(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			p := Start(t, Options{Driver: driver, Sim: ontapsim.Config{}})
			ctx := Ctx(t)
			capability := mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
			createReq := func(name string, size int64) *csi.CreateVolumeRequest {
				return &csi.CreateVolumeRequest{Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
					VolumeCapabilities: []*csi.VolumeCapability{capability}}
			}
			if _, err := p.Controller.CreateVolume(ctx, createReq("pvc-warm", 1<<30)); err != nil {
				t.Fatal(err)
			}
			before := p.Sim.Stats()
			first, err := p.Controller.CreateVolume(ctx, createReq("pvc-1", 1<<30))
			if err != nil {
				t.Fatal(err)
			}
			want := map[string]int64{"POST /api/storage/volumes": 1}
			if driver == config.DriverONTAPSAN {
				want["POST /api/storage/luns"] = 1
			}
			if got := endpointDiff(before, p.Sim.Stats()); !maps.Equal(got, want) {
				t.Errorf("create: requests %v, want %v", got, want)
			}
			again, err := p.Controller.CreateVolume(ctx, createReq("pvc-1", 1<<30))
			if err != nil || again.GetVolume().GetVolumeId() != first.GetVolume().GetVolumeId() ||
				!maps.Equal(again.GetVolume().GetVolumeContext(), first.GetVolume().GetVolumeContext()) {
				t.Errorf("retry: %v, %v; want %v", again, err, first)
			}
			if _, err := p.Controller.CreateVolume(ctx, createReq("pvc-1", 2<<30)); status.Code(err) != codes.AlreadyExists {
				t.Errorf("incompatible retry: %v, want AlreadyExists", err)
			}
			if driver == config.DriverONTAPSAN {
				// An earlier attempt stopped before the LUN.
				luns := p.Sim.LUNs()
				i := slices.IndexFunc(luns, func(l ontapsim.LUNInfo) bool { return l.Path == "/vol/trident_pvc_1/lun0" })
				if i < 0 {
					t.Fatalf("LUNs %+v", luns)
				}
				if _, _, err := p.Sim.Do("DELETE", "/api/storage/luns/"+luns[i].UUID, nil); err != nil {
					t.Fatal(err)
				}
				if _, err := p.Controller.CreateVolume(ctx, createReq("pvc-1", 1<<30)); err != nil {
					t.Fatalf("completing: %v", err)
				}
				if n := len(p.Sim.LUNs()); n != 2 {
					t.Errorf("%d LUNs after completing, want 2", n)
				}
			}
			for _, id := range []string{"pvc-warm", "pvc-1"} {
				if _, err := p.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
					t.Fatal(fmt.Errorf("delete %s: %w", id, err))
				}
			}
			p.AssertClean(t)
		})
	}
}
