package kubevolumes

import (
	"context"
	"errors"
	"maps"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ontap-csi/ontap-csi/controller"
)

const driver = "csi.trident.netapp.io"

func pv(name, drv, handle, internal string) *unstructured.Unstructured {
	attrs := map[string]any{"backendUUID": "b", "name": handle, "protocol": "file"}
	if internal != "" {
		attrs["internalName"] = internal
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"csi": map[string]any{"driver": drv, "volumeHandle": handle, "volumeAttributes": attrs}},
	}}
}

// tridentVolume is a TridentVolume as Trident 26.06 stores it.
func tridentVolume(name, internal string, notManaged bool) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "trident.netapp.io/v1", "kind": "TridentVolume",
		"metadata": map[string]any{"name": name, "namespace": "trident"},
		"config": map[string]any{"version": "1", "name": name, "internalName": internal, "importOriginalName": internal,
			"importNotManaged": notManaged, "size": "1073741824"},
		"backendUUID": "b", "pool": "aggr1", "orphaned": false, "state": "online",
	}}
}

// recordObjs are the records TestRecord and TestListRecords read.
func recordObjs() []runtime.Object {
	return []runtime.Object{
		pv("pvc-template", driver, "pvc-template", "apps_data_5e0c"),
		pv("pvc-other-driver", "nfs.csi.k8s.io", "pvc-other-driver", "x_y"),
		pv("static-name", driver, "pvc-handle", "imported"),
		pv("pvc-both", driver, "pvc-both", "from_pv"),
		pv("pvc-rule", driver, "pvc-rule", ""),
		tridentVolume("pvc-both", "from_trident", false),
		tridentVolume("pvc-unmanaged", "legacy_vol", true),
	}
}

func TestRecord(t *testing.T) {
	objs := recordObjs()
	client := NewRecords(fakeClient(objs...), driver, "trident")
	for _, tc := range []struct {
		id   string
		want controller.VolumeRecord
	}{
		{"pvc-template", controller.VolumeRecord{InternalName: "apps_data_5e0c"}},
		{"pvc-other-driver", controller.VolumeRecord{}},
		{"pvc-handle", controller.VolumeRecord{}},  // a PV not named after its handle is not found
		{"static-name", controller.VolumeRecord{}}, // nor by its name under another handle
		{"pvc-both", controller.VolumeRecord{InternalName: "from_pv"}},
		{"pvc-rule", controller.VolumeRecord{}}, // named by the naming rule
		{"pvc-unmanaged", controller.VolumeRecord{InternalName: "legacy_vol", NotManaged: true}},
		{"pvc-none", controller.VolumeRecord{}},
		{"Not/A_Name", controller.VolumeRecord{}},
	} {
		got, err := client.Record(context.Background(), tc.id)
		if err != nil || got != tc.want {
			t.Errorf("%s: %+v, %v; want %+v", tc.id, got, err, tc.want)
		}
	}
	// Without --crd_persistence TridentVolumes are not read.
	if got, _ := NewRecords(fakeClient(objs...), driver, "").Record(context.Background(), "pvc-unmanaged"); got != (controller.VolumeRecord{}) {
		t.Errorf("TridentVolume read without a namespace: %+v", got)
	}
}

// ListRecords gives what Record gives, for every volume that has a name
// on record, from one LIST each.
func TestListRecords(t *testing.T) {
	objs := recordObjs()
	for _, tc := range []struct {
		name    string
		trident string
		want    map[string]controller.VolumeRecord
	}{
		{"PVs and TridentVolumes", "trident", map[string]controller.VolumeRecord{
			"pvc-template":  {InternalName: "apps_data_5e0c"},
			"pvc-both":      {InternalName: "from_pv"},
			"pvc-unmanaged": {InternalName: "legacy_vol", NotManaged: true},
		}},
		{"PVs only without --crd_persistence", "", map[string]controller.VolumeRecord{
			"pvc-template": {InternalName: "apps_data_5e0c"},
			"pvc-both":     {InternalName: "from_pv"},
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRecords(fakeClient(objs...), driver, tc.trident)
			got, err := r.ListRecords(context.Background())
			if err != nil || !maps.Equal(got, tc.want) {
				t.Fatalf("ListRecords = %v, %v; want %v", got, err, tc.want)
			}
			for id, rec := range got {
				if one, err := r.Record(context.Background(), id); err != nil || one != rec {
					t.Errorf("Record(%s) = %+v, %v; ListRecords says %+v", id, one, err, rec)
				}
			}
		})
	}
	fc := fakeClient(objs...)
	fc.PrependReactor("list", "persistentvolumes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(PVsGVR.GroupResource(), "", errors.New("no RBAC"))
	})
	if _, err := NewRecords(fc, driver, "").ListRecords(context.Background()); err == nil {
		t.Error("PVs not listable: no error")
	}
}

// An API that does not answer is an error, never "no record".
func TestRecordAPIError(t *testing.T) {
	for _, resource := range []string{"persistentvolumes", "tridentvolumes"} {
		fc := fakeClient(pv("pvc-1", driver, "pvc-1", "a"))
		fc.PrependReactor("get", resource, func(k8stesting.Action) (bool, runtime.Object, error) {
			return true, nil, apierrors.NewForbidden(PVsGVR.GroupResource(), "pvc-1", errors.New("no RBAC"))
		})
		if _, err := NewRecords(fc, driver, "trident").Record(context.Background(), "pvc-1"); err == nil {
			t.Errorf("%s forbidden: no error", resource)
		}
	}
}
