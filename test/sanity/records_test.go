package sanity

import (
	"slices"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/controller/kubevolumes"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// Volumes Trident named otherwise than storagePrefix + PV name, as Trident
// leaves them: one named by a nameTemplate (found through its PV's
// internalName), and an unmanaged import kept under its own name (found
// through its TridentVolume, under --crd_persistence). Both are served;
// the unmanaged one is never resized or deleted on ONTAP.
func TestTridentInternalNames(t *testing.T) {
	const (
		templated     = "pvc-5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"
		templatedName = "apps_data_5e0c8a43"
		unmanaged     = "pvc-9a8b7c6d-5e4f-4a3b-8c2d-1e0f9a8b7c6d"
		unmanagedName = "legacy_oracle_01"
	)
	pv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume", "metadata": map[string]any{"name": templated},
		"spec": map[string]any{"csi": map[string]any{"driver": DriverName, "volumeHandle": templated,
			"volumeAttributes": map[string]any{"backendUUID": tridentUUID, "internalName": templatedName, "name": templated, "protocol": "file"}}},
	}}
	tv := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trident.netapp.io/v1", "kind": "TridentVolume",
		"metadata": map[string]any{"name": unmanaged, "namespace": "trident"},
		"config": map[string]any{"name": unmanaged, "internalName": unmanagedName, "importOriginalName": unmanagedName,
			"importNotManaged": true},
		"backendUUID": tridentUUID, "pool": "aggr1", "state": "online",
	}}
	kube := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		kubevolumes.PVsGVR: "PersistentVolumeList", kubevolumes.TridentVolumesGVR: "TridentVolumeList"}, pv, tv)
	o := Options{Driver: config.DriverONTAPNAS, Records: kubevolumes.NewRecords(kube, DriverName, "trident")}
	p := Start(t, o)
	s := p.Sim
	_, err := s.CreateExportPolicy("trident_empty")
	must(t, err)
	for _, name := range []string{templatedName, unmanagedName} {
		_, err = s.CreateVolume(ontapsim.VolumeSpec{Name: name, Size: gib, Thin: true, ExportPolicy: "trident_empty",
			JunctionPath: "/" + name, SnapshotPolicy: "none", Comment: tridentLabels, UnixPermissions: 777})
		must(t, err)
	}
	c := &controllerCalls{t: t, s: s, o: o, cap: mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)}

	for _, id := range []string{templated, unmanaged} {
		internal := map[string]string{templated: templatedName, unmanaged: unmanagedName}[id]
		if _, err := c.fresh().ControllerPublishVolume(Ctx(t), &csi.ControllerPublishVolumeRequest{
			VolumeId: id, NodeId: NodeID, VolumeCapability: c.cap}); err != nil {
			t.Fatalf("publish %s: %v", id, err)
		}
		if pol := exportPolicy(s, internal); pol == nil || !slices.Equal(ruleClients(pol), []string{"10.10.0.5"}) {
			t.Errorf("%s: export policy %+v", id, pol)
		}
		if _, err := c.fresh().ControllerUnpublishVolume(Ctx(t), &csi.ControllerUnpublishVolumeRequest{VolumeId: id, NodeId: NodeID}); err != nil {
			t.Fatalf("unpublish %s: %v", id, err)
		}
	}

	c.unmanagedStaysPut(unmanaged, unmanagedName)

	// The templated volume is Trident's managed volume: the whole
	// lifecycle works at its own name.
	exp, err := c.fresh().ControllerExpandVolume(Ctx(t), &csi.ControllerExpandVolumeRequest{
		VolumeId: templated, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
	if err != nil || exp.CapacityBytes < 2*gib {
		t.Fatalf("expand: %v %v", err, exp)
	}
	snap, err := c.fresh().CreateSnapshot(Ctx(t), &csi.CreateSnapshotRequest{Name: "snapshot-1", SourceVolumeId: templated})
	if err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	if v, _ := s.Volume(templatedName); !slices.Contains(v.Snapshots, "snapshot-1") {
		t.Errorf("snapshot not on %s: %v", templatedName, v.Snapshots)
	}
	if _, err := c.fresh().DeleteSnapshot(Ctx(t), &csi.DeleteSnapshotRequest{SnapshotId: snap.Snapshot.SnapshotId}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.fresh().DeleteVolume(Ctx(t), &csi.DeleteVolumeRequest{VolumeId: templated}); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Volume(templatedName); ok {
		t.Errorf("volume %s still exists", templatedName)
	}
	for _, v := range s.Volumes() {
		if !v.IsSVMRoot && v.Name != unmanagedName {
			t.Errorf("volume %s is left over", v.Name)
		}
	}
	for _, pol := range s.ExportPolicies() {
		if pol.Name != "default" && pol.Name != "trident_empty" {
			t.Errorf("export policy %s is left over", pol.Name)
		}
	}
}

// unmanagedStaysPut checks that Trident's unmanaged import id is neither
// resized nor deleted on ONTAP, while DeleteVolume succeeds.
func (c *controllerCalls) unmanagedStaysPut(id, internalName string) {
	t := c.t
	t.Helper()
	_, err := c.fresh().ControllerExpandVolume(Ctx(t), &csi.ControllerExpandVolumeRequest{
		VolumeId: id, CapacityRange: &csi.CapacityRange{RequiredBytes: 2 * gib}})
	if status.Code(err) != codes.FailedPrecondition {
		t.Errorf("expanding the unmanaged import: %v, want FailedPrecondition", err)
	}
	if _, err := c.fresh().DeleteVolume(Ctx(t), &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
		t.Fatalf("delete the unmanaged import: %v", err)
	}
	if v, ok := c.s.Volume(internalName); !ok || v.Size != gib {
		t.Errorf("the unmanaged import was changed on ONTAP: %+v, %v", v, ok)
	}
}
