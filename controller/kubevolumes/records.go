package kubevolumes

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/controller"
)

// The resources Records reads.
var (
	PVsGVR            = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
	TridentVolumesGVR = schema.GroupVersionResource{Group: "trident.netapp.io", Version: "v1", Resource: "tridentvolumes"}
)

// Records implements controller.VolumeRecords from the volume's
// PersistentVolume, named after the volume as csi-provisioner names it
// (and as a static PV for ontap-csi must be), and under Trident's
// Deployment from the TridentVolume of the same name. One GET each per
// volume: the controller keeps what it found. The ServiceAccount needs get
// on persistentvolumes (and tridentvolumes).
type Records struct {
	pvs    dynamic.ResourceInterface
	tvols  dynamic.ResourceInterface // nil without --crd_persistence
	driver string
}

var _ controller.VolumeRecords = (*Records)(nil)

// NewRecords reads PVs of driver; tridentNamespace, if not "", is where
// Trident's TridentVolumes are. It does no I/O.
func NewRecords(client dynamic.Interface, driver, tridentNamespace string) *Records {
	r := &Records{pvs: client.Resource(PVsGVR), driver: driver}
	if tridentNamespace != "" {
		r.tvols = client.Resource(TridentVolumesGVR).Namespace(tridentNamespace)
	}
	return r
}

// Record implements controller.VolumeRecords: the PV's internalName
// first, as Kubernetes holds it, then Trident's record. An ID that cannot
// name an object has neither.
func (r *Records) Record(ctx context.Context, id string) (controller.VolumeRecord, error) {
	if len(validation.IsDNS1123Subdomain(id)) > 0 {
		return controller.VolumeRecord{}, nil
	}
	var rec controller.VolumeRecord
	pv, err := get(ctx, r.pvs, id)
	if err != nil {
		return rec, err
	}
	if pv != nil {
		driver, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "driver")
		handle, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "volumeHandle")
		if driver == r.driver && handle == id {
			rec.InternalName, _, _ = unstructured.NestedString(pv.Object, "spec", "csi", "volumeAttributes", "internalName")
		}
	}
	if r.tvols == nil {
		return rec, nil
	}
	tv, err := get(ctx, r.tvols, id)
	if err != nil || tv == nil {
		return rec, err
	}
	// Trident's volume config (storage.VolumeConfig) as stored.
	name, _, _ := unstructured.NestedString(tv.Object, "config", "internalName")
	rec.NotManaged, _, _ = unstructured.NestedBool(tv.Object, "config", "importNotManaged")
	if rec.InternalName == "" {
		rec.InternalName = name
	}
	return rec, nil
}

// get reads one object; nil when there is none.
func get(ctx context.Context, c dynamic.ResourceInterface, name string) (*unstructured.Unstructured, error) {
	obj, err := c.Get(ctx, name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("reading %s: %w", name, err)
	}
	return obj, nil
}
