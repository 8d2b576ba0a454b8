package sanity

import (
	"slices"
	"strings"
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
)

// claimObject is a PersistentVolumeClaim as the API server returns it.
func claimObject(ns, name, volume string, ann map[string]any) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim",
		"metadata": map[string]any{"name": name, "namespace": ns, "annotations": ann},
		"spec":     map[string]any{"volumeName": volume},
	}}
}

// createFor is CreateVolume as csi-provisioner --extra-create-metadata
// sends it for claim ns/name, under a class with classParams.
func createFor(t *testing.T, c csi.ControllerClient, pv, ns, name string, classParams map[string]string) (*csi.CreateVolumeResponse, error) {
	params := map[string]string{
		"csi.storage.k8s.io/pvc/name": name, "csi.storage.k8s.io/pvc/namespace": ns, "csi.storage.k8s.io/pv/name": pv,
	}
	for k, v := range classParams {
		params[k] = v
	}
	return c.CreateVolume(Ctx(t), &csi.CreateVolumeRequest{
		Name: pv, Parameters: params, CapacityRange: &csi.CapacityRange{RequiredBytes: gib},
		VolumeCapabilities: []*csi.VolumeCapability{mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	})
}

// Trident's trident.netapp.io annotations of the claim, read through the
// Kubernetes API as the deployed controller reads them, shape the ONTAP
// volume over the StorageClass's parameters; cloneFromPVC clones the
// claim's volume; skipRecoveryQueue is honoured at delete; a bad value is
// refused naming the annotation, and nothing is made on ONTAP.
func TestTridentClaimAnnotations(t *testing.T) {
	const dbPV = "pvc-5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"
	// Trident's csi-provisioner (trident-operator) does not name the
	// claim: it is found by the UID in the volume's name.
	const uid = "0f1e2d3c-4b5a-4968-8776-655443322110"
	byUID := claimObject("apps", "logs", "", map[string]any{"trident.netapp.io/snapshotReserve": "30"})
	byUID.SetUID(uid)
	kube := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{kubevolumes.PVCsGVR: "PersistentVolumeClaimList"},
		claimObject("apps", "db", dbPV, map[string]any{
			"trident.netapp.io/snapshotReserve": "20", "trident.netapp.io/snapshotDirectory": "true",
			"trident.netapp.io/unixPermissions": "0750", "trident.netapp.io/skipRecoveryQueue": "true",
		}),
		claimObject("apps", "db-copy", "", map[string]any{"trident.netapp.io/cloneFromPVC": "db"}),
		claimObject("apps", "bad", "", map[string]any{"trident.netapp.io/snapshotReserve": "95"}),
		byUID,
	)
	p := Start(t, Options{Driver: config.DriverONTAPNAS, Claims: kubevolumes.NewClaims(kube, true)})
	class := map[string]string{"snapshotReserve": "0", "unixPermissions": "0777", "snapshotDirectory": "false"}

	db, err := createFor(t, p.Controller, dbPV, "apps", "db", class)
	if err != nil {
		t.Fatal(err)
	}
	v, ok := p.Sim.Volume("trident_" + strings.ReplaceAll(dbPV, "-", "_"))
	if !ok || v.ReservePercent != 20 || !v.SnapdirAccess || v.UnixPermissions != 750 {
		t.Errorf("annotated volume on ONTAP: %+v", v)
	}

	logs, err := p.Controller.CreateVolume(Ctx(t), &csi.CreateVolumeRequest{
		Name: "pvc-" + uid, Parameters: class, CapacityRange: &csi.CapacityRange{RequiredBytes: gib},
		VolumeCapabilities: []*csi.VolumeCapability{mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	})
	if err != nil {
		t.Fatal(err)
	}
	if v, _ := p.Sim.Volume("trident_pvc_" + strings.ReplaceAll(uid, "-", "_")); v.ReservePercent != 30 {
		t.Errorf("claim found by UID: reserve %d, want its annotation's 30", v.ReservePercent)
	}

	clone, err := createFor(t, p.Controller, "pvc-copy", "apps", "db-copy", class)
	if err != nil {
		t.Fatal(err)
	}
	if src := clone.Volume.GetContentSource().GetVolume().GetVolumeId(); src != db.Volume.VolumeId {
		t.Errorf("cloneFromPVC: content source %q, want %s", src, db.Volume.VolumeId)
	}
	if c, _ := p.Sim.Volume("trident_pvc_copy"); c.CloneParent != v.Name {
		t.Errorf("cloneFromPVC: ONTAP clone of %q, want %s", c.CloneParent, v.Name)
	}

	_, err = createFor(t, p.Controller, "pvc-bad", "apps", "bad", class)
	if status.Code(err) != codes.InvalidArgument || !strings.Contains(err.Error(), "trident.netapp.io/snapshotReserve") {
		t.Errorf("bad annotation: %v, want InvalidArgument naming it", err)
	}
	if _, ok := p.Sim.Volume("trident_pvc_bad"); ok {
		t.Error("a volume was created for a refused claim")
	}

	for _, id := range []string{clone.Volume.VolumeId, db.Volume.VolumeId, logs.Volume.VolumeId} {
		if _, err := p.Controller.DeleteVolume(Ctx(t), &csi.DeleteVolumeRequest{VolumeId: id}); err != nil {
			t.Fatalf("delete %s: %v", id, err)
		}
	}
	var queued []string
	for _, q := range p.Sim.RecoveryQueue() {
		queued = append(queued, q.Name)
	}
	if len(queued) != 2 || !slices.ContainsFunc(queued, func(q string) bool { return strings.HasPrefix(q, "trident_pvc_copy") }) {
		t.Errorf("recovery queue %v: want the clone and pvc-%s (their claims do not skip it)", queued, uid)
	}
	p.AssertClean(t)
}
