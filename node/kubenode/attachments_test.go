package kubenode

import (
	"context"
	"errors"
	"maps"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

const driver = "csi.trident.netapp.io"

func va(name, attacher, node, pv string, attached bool) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "storage.k8s.io/v1", "kind": "VolumeAttachment", "metadata": map[string]any{"name": name},
		"spec":   map[string]any{"attacher": attacher, "nodeName": node, "source": map[string]any{"persistentVolumeName": pv}},
		"status": map[string]any{"attached": attached},
	}}
}

func pv(name, handle string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolume", "metadata": map[string]any{"name": name},
		"spec": map[string]any{"csi": map[string]any{"driver": driver, "volumeHandle": handle}},
	}}
}

func k8sNode(name string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Node", "metadata": map[string]any{"name": name}}}
}

// newAttachFake serves objs and the Node node-1.
func newAttachFake(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return newAttachFakeNoNode(append(objs, k8sNode("node-1"))...)
}

func newAttachFakeNoNode(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		VolumeAttachmentsGVR: "VolumeAttachmentList", PersistentVolumesGVR: "PersistentVolumeList", nodeinfo.NodesGVR: "NodeList",
	}, objs...)
}

func TestAttachedVolumes(t *testing.T) {
	objs := []runtime.Object{
		va("a1", driver, "node-1", "pvc-1", true),
		// Not attached yet (or detaching): still the node's, left alone.
		va("a2", driver, "node-1", "pvc-2", false),
		va("a3", driver, "node-2", "pvc-3", true),
		va("a4", "other.csi.example.com", "node-1", "pv-other", true),
		// A static PV whose name is not its volume handle.
		va("a5", driver, "node-1", "static-pv", true),
		pv("pvc-1", "pvc-1"), pv("pvc-2", "pvc-2"), pv("pvc-3", "pvc-3"), pv("static-pv", "imported-vol"),
	}
	got, err := NewAttachments(newAttachFake(objs...), driver).AttachedVolumes(context.Background(), "node-1")
	if want := map[string]bool{"pvc-1": true, "pvc-2": true, "imported-vol": true}; err != nil || !maps.Equal(got, want) {
		t.Errorf("got %v, %v; want %v", got, err, want)
	}

	// Whatever cannot be read fails the whole answer; so does a node ID
	// that names no Node, which no VolumeAttachment could name either.
	for name, c := range map[string]*dynamicfake.FakeDynamicClient{
		"no Node of that name": newAttachFakeNoNode(va("a1", driver, "node-1", "pvc-1", true), pv("pvc-1", "pvc-1")),
		"PV gone":              newAttachFake(va("a1", driver, "node-1", "pvc-1", true)),
		"PV without a handle": newAttachFake(va("a1", driver, "node-1", "pvc-1", true),
			&unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "PersistentVolume", "metadata": map[string]any{"name": "pvc-1"}}}),
	} {
		if got, err := NewAttachments(c, driver).AttachedVolumes(context.Background(), "node-1"); err == nil {
			t.Errorf("%s: %v, want an error", name, got)
		}
	}
	down := newAttachFake()
	down.PrependReactor("list", "volumeattachments", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(schema.GroupResource{Group: "storage.k8s.io", Resource: "volumeattachments"}, "", errors.New("RBAC"))
	})
	if _, err := NewAttachments(down, driver).AttachedVolumes(context.Background(), "node-1"); !apierrors.IsForbidden(errors.Unwrap(err)) {
		t.Errorf("list refused: %v", err)
	}
}
