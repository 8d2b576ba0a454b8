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

var (
	_ controller.VolumeRecords = (*Records)(nil)
	_ controller.RecordLister  = (*Records)(nil)
)

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

// listPage is the page size of ListRecords' LISTs: a cluster's PVs can
// be many, and the API server answers a page at a time.
const listPage = 500

// ListRecords implements controller.RecordLister with the same rules as
// Record, from one LIST of the PVs (and of the TridentVolumes): the
// ServiceAccount needs list on them too.
func (r *Records) ListRecords(ctx context.Context) (map[string]controller.VolumeRecord, error) {
	out := map[string]controller.VolumeRecord{}
	err := list(ctx, r.pvs, func(pv *unstructured.Unstructured) {
		driver, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "driver")
		handle, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "volumeHandle")
		name, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "volumeAttributes", "internalName")
		if driver == r.driver && handle == pv.GetName() && name != "" {
			out[handle] = controller.VolumeRecord{InternalName: name}
		}
	})
	if err != nil || r.tvols == nil {
		return out, err
	}
	err = list(ctx, r.tvols, func(tv *unstructured.Unstructured) {
		name, _, _ := unstructured.NestedString(tv.Object, "config", "internalName")
		notManaged, _, _ := unstructured.NestedBool(tv.Object, "config", "importNotManaged")
		rec := out[tv.GetName()]
		rec.NotManaged = notManaged
		if rec.InternalName == "" {
			rec.InternalName = name
		}
		if rec.InternalName != "" {
			out[tv.GetName()] = rec
		}
	})
	return out, err
}

// list calls each for every object of c, a page at a time.
func list(ctx context.Context, c dynamic.ResourceInterface, each func(*unstructured.Unstructured)) error {
	opts := metav1.ListOptions{Limit: listPage}
	for {
		l, err := c.List(ctx, opts)
		if err != nil {
			return fmt.Errorf("listing: %w", err)
		}
		for i := range l.Items {
			each(&l.Items[i])
		}
		if opts.Continue = l.GetContinue(); opts.Continue == "" {
			return nil
		}
	}
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
