package sanity

import (
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/controller/kubevolumes"
)

// A backend's defaults.nameTemplate names the ONTAP volume of a new claim
// through the whole controller: CreateVolume renders it from
// csi-provisioner's metadata and the claim (its storage class), a retry
// finds the same volume, the volume context carries the name as
// internalName, which csi-provisioner keeps in the PV, and later calls,
// each on a freshly started controller, find the volume through that
// record: publish, unpublish, delete. Another claim rendering the same
// name is refused; one without the claim's name creates nothing.
func TestNameTemplateThroughTheController(t *testing.T) {
	const (
		uid      = "5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"
		pv       = "pvc-" + uid
		internal = "gold_apps_data_0_5e0c8"
		otherPV  = "pvc-5e0c8a43-0000-4000-8000-000000000000" // same five hex digits
	)
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		t.Run(driver, func(t *testing.T) {
			claim := claimObject("apps", "data-0", "", nil)
			claim.SetUID(uid)
			must(t, unstructured.SetNestedField(claim.Object, "gold", "spec", "storageClassName"))
			kube := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
				kubevolumes.PVCsGVR: "PersistentVolumeClaimList", kubevolumes.PVsGVR: "PersistentVolumeList",
				kubevolumes.TridentVolumesGVR: "TridentVolumeList"}, claim)
			o := Options{Driver: driver,
				Backend: map[string]any{"defaults": map[string]any{
					"nameTemplate": "{{.volume.StorageClass}}_{{.volume.Namespace}}_{{.volume.RequestName}}"}},
				Claims:  kubevolumes.NewClaims(kube, true),
				Records: kubevolumes.NewRecords(kube, DriverName, "trident")}
			p := Start(t, o)
			s := p.Sim
			fresh := func() csi.ControllerClient { return Attach(t, s, o).Controller }

			created, err := createFor(t, p.Controller, pv, "apps", "data-0", nil)
			if err != nil {
				t.Fatalf("create: %v", err)
			}
			vctx := created.Volume.VolumeContext
			if vctx["internalName"] != internal {
				t.Fatalf("volume context %v, want internalName %s", vctx, internal)
			}
			if _, ok := s.Volume(internal); !ok {
				t.Fatalf("no FlexVol %s on ONTAP", internal)
			}
			// The retry (csi-provisioner's, before the PV exists) finds it.
			before := len(s.Volumes())
			again, err := createFor(t, fresh(), pv, "apps", "data-0", nil)
			if err != nil || again.Volume.VolumeId != pv || again.Volume.VolumeContext["internalName"] != internal {
				t.Fatalf("retry: %v %+v", err, again)
			}
			if len(s.Volumes()) != before {
				t.Errorf("the retry made another volume: %d, were %d", len(s.Volumes()), before)
			}

			// csi-provisioner makes the PV with the volume context.
			attrs := map[string]any{}
			for k, v := range vctx {
				attrs[k] = v
			}
			pvObj := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "v1", "kind": "PersistentVolume", "metadata": map[string]any{"name": pv},
				"spec": map[string]any{"csi": map[string]any{"driver": DriverName, "volumeHandle": pv, "volumeAttributes": attrs}},
			}}
			_, err = kube.Resource(kubevolumes.PVsGVR).Create(Ctx(t), pvObj, metav1.CreateOptions{})
			must(t, err)

			cap := mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)
			if _, err := fresh().ControllerPublishVolume(Ctx(t), &csi.ControllerPublishVolumeRequest{
				VolumeId: pv, NodeId: NodeID, VolumeCapability: cap, VolumeContext: vctx}); err != nil {
				t.Fatalf("publish: %v", err)
			}
			switch driver {
			case config.DriverONTAPNAS:
				v, _ := s.Volume(internal)
				if pol := exportPolicy(s, v.ExportPolicy); pol == nil || len(ruleClients(pol)) == 0 {
					t.Errorf("published volume's export policy %q: %+v", v.ExportPolicy, pol)
				}
			case config.DriverONTAPSAN:
				if maps := s.LUNMaps(); len(maps) != 1 || maps[0].LUNPath != "/vol/"+internal+"/lun0" {
					t.Errorf("LUN maps after publish: %+v", maps)
				}
			}
			if _, err := fresh().ControllerUnpublishVolume(Ctx(t), &csi.ControllerUnpublishVolumeRequest{VolumeId: pv, NodeId: NodeID}); err != nil {
				t.Fatalf("unpublish: %v", err)
			}
			if driver == config.DriverONTAPSAN && len(s.LUNMaps()) != 0 {
				t.Errorf("LUN maps after unpublish: %+v", s.LUNMaps())
			}

			// Another volume for a claim apps/data-0 (say, recreated)
			// whose UID starts alike renders the same name: refused, the
			// volume untouched.
			_, err = createFor(t, fresh(), otherPV, "apps", "data-0", nil)
			if status.Code(err) != codes.AlreadyExists {
				t.Errorf("second claim rendering %s: %v, want AlreadyExists", internal, err)
			}
			// Without csi-provisioner's metadata and a claim to find by
			// UID, the template cannot be rendered: nothing is created.
			_, err = fresh().CreateVolume(Ctx(t), &csi.CreateVolumeRequest{
				Name: "volume-without-claim", CapacityRange: &csi.CapacityRange{RequiredBytes: gib},
				VolumeCapabilities: []*csi.VolumeCapability{cap}})
			if status.Code(err) != codes.InvalidArgument || len(s.Volumes()) != before {
				t.Errorf("create without a claim: %v (%d volumes, were %d), want InvalidArgument and none made", err, len(s.Volumes()), before)
			}

			if _, err := fresh().DeleteVolume(Ctx(t), &csi.DeleteVolumeRequest{VolumeId: pv}); err != nil {
				t.Fatalf("delete: %v", err)
			}
			if _, ok := s.Volume(internal); ok {
				t.Errorf("volume %s still on ONTAP after delete", internal)
			}
		})
	}
}
