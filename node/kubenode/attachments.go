package kubenode

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

var (
	// VolumeAttachmentsGVR and PersistentVolumesGVR are what Attachments
	// reads. The ServiceAccount needs list on volumeattachments and get on
	// persistentvolumes.
	VolumeAttachmentsGVR = schema.GroupVersionResource{Group: "storage.k8s.io", Version: "v1", Resource: "volumeattachments"}
	PersistentVolumesGVR = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumes"}
)

// Attachments implements node.Attachments from VolumeAttachment objects
// (docs/design/fencing.md §4).
type Attachments struct {
	client dynamic.Interface
	driver string
}

var _ node.Attachments = (*Attachments)(nil)

// NewAttachments reads the VolumeAttachments of driver (the CSI driver
// name, --driver-name) through client. It does no I/O.
func NewAttachments(client dynamic.Interface, driver string) *Attachments {
	return &Attachments{client: client, driver: driver}
}

// AttachedVolumes implements node.Attachments: the CSI volume IDs (volume
// handles) of every VolumeAttachment of this driver for nodeID, attached
// or not, and whether or not it is being deleted. A VolumeAttachment names
// a PersistentVolume, whose spec.csi.volumeHandle is the volume ID (a
// static PV's name need not be); an inline volume carries its handle. Any
// read that fails, or a PV that is gone or is not this driver's, fails the
// whole answer: a guess could call an attached volume stale.
func (a *Attachments) AttachedVolumes(ctx context.Context, nodeID string) (map[string]bool, error) {
	// A VolumeAttachment names the Kubernetes Node. A node ID that is not
	// a Node's name (a misconfigured --node-name) would match none, and
	// every volume of the node would read as stale: make sure it is one.
	if _, err := a.client.Resource(nodeinfo.NodesGVR).Get(ctx, nodeID, metav1.GetOptions{}); err != nil {
		return nil, fmt.Errorf("reading Node %s, which this node's VolumeAttachments name: %w", nodeID, err)
	}
	list, err := a.client.Resource(VolumeAttachmentsGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("listing VolumeAttachments: %w", err)
	}
	out := map[string]bool{}
	for i := range list.Items {
		va := list.Items[i].Object
		attacher, _, _ := unstructured.NestedString(va, "spec", "attacher")
		nodeName, _, _ := unstructured.NestedString(va, "spec", "nodeName")
		if attacher != a.driver || nodeName != nodeID {
			continue
		}
		handle, err := a.handleOf(ctx, &list.Items[i])
		if err != nil {
			return nil, err
		}
		out[handle] = true
	}
	return out, nil
}

func (a *Attachments) handleOf(ctx context.Context, va *unstructured.Unstructured) (string, error) {
	if h, ok, _ := unstructured.NestedString(va.Object, "spec", "source", "inlineVolumeSpec", "csi", "volumeHandle"); ok && h != "" {
		return h, nil
	}
	pvName, _, _ := unstructured.NestedString(va.Object, "spec", "source", "persistentVolumeName")
	if pvName == "" {
		return "", fmt.Errorf("VolumeAttachment %s names no PersistentVolume", va.GetName())
	}
	pv, err := a.client.Resource(PersistentVolumesGVR).Get(ctx, pvName, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return "", fmt.Errorf("VolumeAttachment %s: its PersistentVolume %s is gone", va.GetName(), pvName)
	}
	if err != nil {
		return "", fmt.Errorf("VolumeAttachment %s: reading PersistentVolume %s: %w", va.GetName(), pvName, err)
	}
	h, _, _ := unstructured.NestedString(pv.Object, "spec", "csi", "volumeHandle")
	if h == "" {
		return "", fmt.Errorf("VolumeAttachment %s: PersistentVolume %s has no CSI volume handle", va.GetName(), pvName)
	}
	return h, nil
}
