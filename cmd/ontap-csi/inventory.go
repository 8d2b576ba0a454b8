package main

import (
	"context"
	"errors"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/controller/inventory"
	"github.com/ontap-csi/ontap-csi/controller/kubevolumes"
	"github.com/ontap-csi/ontap-csi/controller/tridentnodes"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

var storageClassesGVR = schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "storageclasses"}

var errNoKube = errors.New("no Kubernetes API")

// clusterFacts are what the inventory reads from Kubernetes: the driver's
// PersistentVolumes (for ontap_csi_volume_info), its StorageClasses and
// nodes (trident_storageclass_count, trident_node_count). startController
// fills the fields in as it learns how to reach them; the inventory reads
// them only once it runs, after that.
type clusterFacts struct {
	kube       dynamic.Interface // nil outside a cluster
	driver     string
	countNodes func(context.Context) (int, error)
}

func (f *clusterFacts) config(period time.Duration, served func() []backends.Backend) inventory.Config {
	return inventory.Config{
		Period: period, Backends: served,
		PVs: f.pvs, StorageClasses: f.storageClasses,
		Nodes: func(ctx context.Context) (int, error) { return f.countNodes(ctx) },
	}
}

// list lists a cluster-scoped collection, one request.
func (f *clusterFacts) list(ctx context.Context, gvr schema.GroupVersionResource) ([]unstructured.Unstructured, error) {
	if f.kube == nil {
		return nil, errNoKube
	}
	l, err := f.kube.Resource(gvr).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// pvs are the driver's PersistentVolumes with their claims and classes.
func (f *clusterFacts) pvs(ctx context.Context) ([]inventory.PV, error) {
	items, err := f.list(ctx, kubevolumes.PVsGVR)
	if err != nil {
		return nil, err
	}
	var out []inventory.PV
	for _, pv := range items {
		if d, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "driver"); d != f.driver {
			continue
		}
		handle, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "volumeHandle")
		ns, _, _ := unstructured.NestedString(pv.Object, "spec", "claimRef", "namespace")
		claim, _, _ := unstructured.NestedString(pv.Object, "spec", "claimRef", "name")
		class, _, _ := unstructured.NestedString(pv.Object, "spec", "storageClassName")
		out = append(out, inventory.PV{VolumeID: handle, Name: pv.GetName(), Namespace: ns, Claim: claim, StorageClass: class})
	}
	return out, nil
}

// storageClasses counts the StorageClasses of the driver, as Trident counts
// its own.
func (f *clusterFacts) storageClasses(ctx context.Context) (int, error) {
	items, err := f.list(ctx, storageClassesGVR)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, sc := range items {
		if p, _, _ := unstructured.NestedString(sc.Object, "provisioner"); p == f.driver {
			n++
		}
	}
	return n, nil
}

// annotatedNodes counts the Nodes whose node plugin published its node
// info (ontap-csi's own install), as Trident counts its TridentNodes.
func (f *clusterFacts) annotatedNodes(ctx context.Context) (int, error) {
	items, err := f.list(ctx, nodeinfo.NodesGVR)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, node := range items {
		if _, ok := node.GetAnnotations()[nodeinfo.AnnotationKey]; ok {
			n++
		}
	}
	return n, nil
}

// tridentNodeCount counts TridentNodes, Trident's node records.
func tridentNodeCount(s *tridentnodes.Store) func(context.Context) (int, error) {
	return func(ctx context.Context) (int, error) {
		l, err := s.List(ctx)
		return len(l), err
	}
}
