package sanity

import (
	"reflect"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// onONTAP is what a volume's VolumeAttributesClass governs on ONTAP.
type onONTAP struct {
	Volume ontapsim.VolumeInfo
	LUNQoS string
}

func readONTAP(t *testing.T, s *ontapsim.Simulator, name string) onONTAP {
	t.Helper()
	v, ok := s.Volume(name)
	if !ok {
		t.Fatalf("ONTAP volume %s is gone", name)
	}
	o := onONTAP{Volume: v}
	for _, l := range s.LUNs() {
		if l.Volume == name {
			o.LUNQoS = l.QoSPolicy
		}
	}
	return o
}

// volumePatches counts the PATCHes of volumes and LUNs ONTAP received.
func volumePatches(s *ontapsim.Simulator) int64 {
	st := s.Stats()
	return st.Count("PATCH", "/api/storage/volumes/{uuid}") + st.Count("PATCH", "/api/storage/luns/{uuid}")
}

// TestModifyVolume drives ControllerModifyVolume through the controller's
// gRPC server for ontap-nas and ontap-san: a volume created with one
// VolumeAttributesClass moves to another, ten times over, which changes
// ONTAP once; each refusal comes with its code and leaves ONTAP as it was.
func TestModifyVolume(t *testing.T) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) { testModifyVolume(t, driver) })
	}
}

func testModifyVolume(t *testing.T, driver string) {
	p := Start(t, Options{Driver: driver})
	for _, name := range []string{"gold", "silver"} {
		if err := p.Sim.CreateQoSPolicy(name, false, 1000); err != nil {
			t.Fatal(err)
		}
	}
	vol, err := p.Controller.CreateVolume(Ctx(t), &csi.CreateVolumeRequest{
		Name: "pvc-vac", VolumeCapabilities: []*csi.VolumeCapability{mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
		CapacityRange:     &csi.CapacityRange{RequiredBytes: 1 << 30},
		MutableParameters: map[string]string{"qosPolicy": "gold", "snapshotPolicy": "none", "tieringPolicy": "auto"},
	})
	if err != nil {
		t.Fatal(err)
	}
	id, name := vol.Volume.VolumeId, vol.Volume.VolumeContext["internalName"]
	qosOf := func(o onONTAP) string {
		if driver == config.DriverONTAPSAN {
			return o.LUNQoS // ontap-san's QoS group is its LUN's, as Trident's
		}
		return o.Volume.QoSPolicy
	}
	o := readONTAP(t, p.Sim, name)
	if qosOf(o) != "gold" || o.Volume.SnapshotPolicy != "none" || o.Volume.TieringPolicy != "auto" {
		t.Fatalf("created with %+v", o)
	}

	class := map[string]string{"qosPolicy": "silver", "snapshotReserve": "20", "trident.netapp.io/tieringPolicy": "none"}
	wantPatches := map[string]int64{config.DriverONTAPNAS: 1, config.DriverONTAPSAN: 2}[driver]
	before := volumePatches(p.Sim)
	for i := range 10 {
		if _, err := p.Controller.ControllerModifyVolume(Ctx(t), &csi.ControllerModifyVolumeRequest{VolumeId: id, MutableParameters: class}); err != nil {
			t.Fatalf("modify #%d: %v", i+1, err)
		}
	}
	if n := volumePatches(p.Sim) - before; n != wantPatches {
		t.Errorf("ten identical modifies sent %d PATCHes, want %d", n, wantPatches)
	}
	o = readONTAP(t, p.Sim, name)
	if qosOf(o) != "silver" || o.Volume.ReservePercent != 20 || o.Volume.TieringPolicy != "none" || o.Volume.Size*80/100 < 1<<30 {
		t.Errorf("after modify: %+v", o)
	}

	type refusal struct {
		name   string
		id     string
		params map[string]string
		want   codes.Code
	}
	refusals := []refusal{
		{"unknown key", id, map[string]string{"XXX_FakeKey": "v", "qosPolicy": "gold"}, codes.InvalidArgument},
		{"immutable key", id, map[string]string{"provisioningType": "thick", "qosPolicy": "gold"}, codes.InvalidArgument},
		{"QoS group ONTAP lacks", id, map[string]string{"qosPolicy": "bronze", "snapshotReserve": "5"}, codes.InvalidArgument},
		{"adaptive group as qosPolicy", id, map[string]string{"qosPolicy": "extreme", "snapshotReserve": "5"}, codes.InvalidArgument},
		{"snapshot policy ONTAP lacks", id, map[string]string{"snapshotPolicy": "hourly-42", "qosPolicy": "gold"}, codes.InvalidArgument},
		{"reserve out of range", id, map[string]string{"snapshotReserve": "91", "qosPolicy": "gold"}, codes.InvalidArgument},
		{"unknown volume", "pvc-nope", map[string]string{"qosPolicy": "gold"}, codes.NotFound},
	}
	if driver == config.DriverONTAPSAN {
		refusals = append(refusals, refusal{"NFS permissions on iSCSI", id, map[string]string{"unixPermissions": "0700", "qosPolicy": "gold"}, codes.InvalidArgument})
	} else {
		// The test backend sets autoExportPolicy: the export policy is
		// the driver's.
		refusals = append(refusals, refusal{"export policy of autoExportPolicy", id, map[string]string{"exportPolicy": "default", "qosPolicy": "gold"}, codes.InvalidArgument})
	}
	for _, r := range refusals {
		before, patches := readONTAP(t, p.Sim, name), volumePatches(p.Sim)
		_, err := p.Controller.ControllerModifyVolume(Ctx(t), &csi.ControllerModifyVolumeRequest{VolumeId: r.id, MutableParameters: r.params})
		if status.Code(err) != r.want {
			t.Errorf("%s: %v, want %v", r.name, err, r.want)
		}
		if after := readONTAP(t, p.Sim, name); !reflect.DeepEqual(after, before) || volumePatches(p.Sim) != patches {
			t.Errorf("%s changed ONTAP:\n%+v\nwas\n%+v", r.name, after, before)
		}
	}

	if _, err := p.Controller.DeleteVolume(Ctx(t), &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatal(err)
	}
	p.AssertClean(t)
}
