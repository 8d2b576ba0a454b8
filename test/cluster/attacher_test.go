package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
)

// attacher does what the csi-attacher sidecar does, which cannot run here
// (no sidecar images): the CSIDriver says attachRequired, so the
// attach/detach controller creates a VolumeAttachment per volume and node,
// and kubelet waits until it is attached. The attacher calls the real
// controller's ControllerPublishVolume (which grants the node access on
// ONTAP) and stores the publish context in the VolumeAttachment, where
// kubelet reads it for NodeStage; on deletion it calls
// ControllerUnpublishVolume and lets the object go.
type attacher struct {
	client kubernetes.Interface
	csi    csi.ControllerClient
	driver string
	obs    *observer
	// mu serializes syncs: the watch and the retries act on fresh copies,
	// one at a time.
	mu sync.Mutex
}

// finalizer is the one csi-attacher puts on VolumeAttachments of a driver.
func (a *attacher) finalizer() string {
	return "external-attacher/" + strings.ReplaceAll(a.driver, ".", "-")
}

func dialCSI(ctx context.Context, socket string) (*grpc.ClientConn, error) {
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	// Wait for the server: the controller may still be starting.
	deadline := time.Now().Add(time.Minute)
	for {
		cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := csi.NewIdentityClient(conn).Probe(cctx, &csi.ProbeRequest{})
		cancel()
		if err == nil {
			return conn, nil
		}
		if time.Now().After(deadline) {
			conn.Close()
			return nil, fmt.Errorf("controller at %s does not answer: %w", socket, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (a *attacher) run(ctx context.Context) {
	a.obs.watchLoop(ctx, "volumeattachments", func(ctx context.Context) error {
		list, err := a.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		for i := range list.Items {
			a.sync(ctx, &list.Items[i])
		}
		w, err := a.client.StorageV1().VolumeAttachments().Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			return err
		}
		defer w.Stop()
		for ev := range w.ResultChan() {
			if va, ok := ev.Object.(*storagev1.VolumeAttachment); ok && ev.Type != watch.Deleted {
				a.sync(ctx, va)
			}
		}
		return nil
	})
}

func (a *attacher) sync(ctx context.Context, va *storagev1.VolumeAttachment) {
	if va.Spec.Attacher != a.driver || va.Spec.Source.PersistentVolumeName == nil {
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	// The event may be stale (our own updates come back as events).
	va, err := a.client.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{})
	if err != nil {
		return
	}
	switch {
	case va.DeletionTimestamp != nil:
		err = a.detach(ctx, va)
	case !va.Status.Attached:
		err = a.attach(ctx, va)
	default:
		return
	}
	if err != nil {
		a.obs.add("attacher", "%s: %v", va.Name, err)
		// Like csi-attacher: record the error and retry.
		go func() {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
				if cur, err := a.client.StorageV1().VolumeAttachments().Get(ctx, va.Name, metav1.GetOptions{}); err == nil {
					a.sync(ctx, cur)
				}
			}
		}()
	}
}

func (a *attacher) attach(ctx context.Context, va *storagev1.VolumeAttachment) error {
	pv, err := a.client.CoreV1().PersistentVolumes().Get(ctx, *va.Spec.Source.PersistentVolumeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pv.Spec.CSI == nil {
		return fmt.Errorf("PV %s is not a CSI volume", pv.Name)
	}
	nodeID, err := csiNodeID(ctx, a.client, a.driver, va.Spec.NodeName)
	if err != nil {
		return err
	}
	if !hasString(va.Finalizers, a.finalizer()) {
		va.Finalizers = append(va.Finalizers, a.finalizer())
		if va, err = a.client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); err != nil {
			return err
		}
	}
	resp, err := a.csi.ControllerPublishVolume(ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId:         pv.Spec.CSI.VolumeHandle,
		NodeId:           nodeID,
		VolumeCapability: volumeCapability(pv),
		Readonly:         pv.Spec.CSI.ReadOnly,
		VolumeContext:    pv.Spec.CSI.VolumeAttributes,
	})
	if err != nil {
		return fmt.Errorf("ControllerPublishVolume %s to %s: %w", pv.Spec.CSI.VolumeHandle, nodeID, err)
	}
	va.Status.Attached = true
	va.Status.AttachmentMetadata = resp.PublishContext
	va.Status.AttachError = nil
	if _, err := a.client.StorageV1().VolumeAttachments().UpdateStatus(ctx, va, metav1.UpdateOptions{}); err != nil {
		return err
	}
	a.obs.add("attacher", "attached %s to %s", pv.Name, va.Spec.NodeName)
	return nil
}

func (a *attacher) detach(ctx context.Context, va *storagev1.VolumeAttachment) error {
	if !hasString(va.Finalizers, a.finalizer()) {
		return nil
	}
	pv, err := a.client.CoreV1().PersistentVolumes().Get(ctx, *va.Spec.Source.PersistentVolumeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	nodeID, err := csiNodeID(ctx, a.client, a.driver, va.Spec.NodeName)
	if err != nil {
		return err
	}
	if _, err := a.csi.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{
		VolumeId: pv.Spec.CSI.VolumeHandle, NodeId: nodeID,
	}); err != nil {
		return fmt.Errorf("ControllerUnpublishVolume %s from %s: %w", pv.Spec.CSI.VolumeHandle, nodeID, err)
	}
	va.Finalizers = removeString(va.Finalizers, a.finalizer())
	if _, err := a.client.StorageV1().VolumeAttachments().Update(ctx, va, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	a.obs.add("attacher", "detached %s from %s", pv.Name, va.Spec.NodeName)
	return nil
}

// csiNodeID is the driver's node ID from CSINode, as csi-attacher reads it:
// a node whose kubelet has the driver unregistered cannot be attached to.
func csiNodeID(ctx context.Context, client kubernetes.Interface, driver, node string) (string, error) {
	n, err := client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, d := range n.Spec.Drivers {
		if d.Name == driver {
			return d.NodeID, nil
		}
	}
	return "", fmt.Errorf("CSINode %s has no driver %s", node, driver)
}

func volumeCapability(pv *corev1.PersistentVolume) *csi.VolumeCapability {
	mode := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	for _, m := range pv.Spec.AccessModes {
		switch m {
		case corev1.ReadWriteMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		case corev1.ReadOnlyMany:
			if mode != csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER {
				mode = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
			}
		}
	}
	return &csi.VolumeCapability{
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{
			FsType: pv.Spec.CSI.FSType, MountFlags: pv.Spec.MountOptions,
		}},
	}
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func removeString(list []string, s string) []string {
	out := list[:0:0]
	for _, x := range list {
		if x != s {
			out = append(out, x)
		}
	}
	return out
}
