package main

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/klog/v2"
)

type resizer struct {
	client   kubernetes.Interface
	ctrl     csi.ControllerClient
	driver   string
	timeout  time.Duration
	recorder record.EventRecorder
	queue    workqueue.TypedRateLimitingInterface[string]
	claims   cache.SharedIndexInformer
}

func newResizer(client kubernetes.Interface, ctrl csi.ControllerClient, driver string, timeout time.Duration) *resizer {
	b := record.NewBroadcaster()
	b.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return &resizer{
		client: client, ctrl: ctrl, driver: driver, timeout: timeout,
		recorder: b.NewRecorder(scheme.Scheme, v1.EventSource{Component: "external-resizer " + driver}),
		queue:    workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]()),
	}
}

func (r *resizer) run(ctx context.Context, workers int) {
	f := informers.NewSharedInformerFactory(r.client, 10*time.Minute)
	r.claims = f.Core().V1().PersistentVolumeClaims().Informer()
	enqueue := func(obj any) {
		if key, err := cache.MetaNamespaceKeyFunc(obj); err == nil {
			r.queue.Add(key)
		}
	}
	_, _ = r.claims.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) },
	})
	f.Start(ctx.Done())
	cache.WaitForCacheSync(ctx.Done(), r.claims.HasSynced)
	for i := 0; i < workers; i++ {
		go func() {
			for r.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	r.queue.ShutDown()
}

func (r *resizer) next(ctx context.Context) bool {
	key, quit := r.queue.Get()
	if quit {
		return false
	}
	defer r.queue.Done(key)
	if err := r.sync(ctx, key); err != nil {
		klog.Errorf("resizing %s: %v", key, err)
		r.queue.AddRateLimited(key)
		return true
	}
	r.queue.Forget(key)
	return true
}

// sync expands the claim's volume if its request exceeds the PV.
func (r *resizer) sync(ctx context.Context, key string) error {
	obj, ok, err := r.claims.GetStore().GetByKey(key)
	if err != nil || !ok {
		return err
	}
	pvc := obj.(*v1.PersistentVolumeClaim)
	if pvc.Status.Phase != v1.ClaimBound || pvc.Spec.VolumeName == "" {
		return nil
	}
	pv, err := r.client.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != r.driver {
		return nil
	}
	want := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	have := pv.Spec.Capacity[v1.ResourceStorage]
	switch pvc.Status.AllocatedResourceStatuses[v1.ResourceStorage] {
	case v1.PersistentVolumeClaimNodeResizePending, v1.PersistentVolumeClaimNodeResizeInProgress:
		return nil // kubelet's turn
	}
	if want.Cmp(have) <= 0 {
		return nil
	}
	return r.expand(ctx, pvc, pv, want)
}

func (r *resizer) expand(ctx context.Context, pvc *v1.PersistentVolumeClaim, pv *v1.PersistentVolume, want resource.Quantity) error {
	if err := r.patchClaimStatus(ctx, pvc, map[string]any{
		"allocatedResources":        map[string]any{"storage": want.String()},
		"allocatedResourceStatuses": map[string]any{"storage": v1.PersistentVolumeClaimControllerResizeInProgress},
		"conditions":                conditions(pvc, v1.PersistentVolumeClaimResizing, ""),
	}); err != nil {
		return err
	}
	r.recorder.Eventf(pvc, v1.EventTypeNormal, "Resizing", "External resizer is resizing volume %s", pv.Name)
	req := &csi.ControllerExpandVolumeRequest{
		VolumeId:         pv.Spec.CSI.VolumeHandle,
		CapacityRange:    &csi.CapacityRange{RequiredBytes: want.Value()},
		VolumeCapability: capability(pv),
	}
	if ref := pv.Spec.CSI.ControllerExpandSecretRef; ref != nil {
		s, err := r.client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		req.Secrets = map[string]string{}
		for k, v := range s.Data {
			req.Secrets[k] = string(v)
		}
	}
	cctx, cancel := context.WithTimeout(ctx, r.timeout)
	resp, err := r.ctrl.ControllerExpandVolume(cctx, req)
	cancel()
	if err != nil {
		r.recorder.Eventf(pvc, v1.EventTypeWarning, "VolumeResizeFailed", "resize volume %s failed: %v", pv.Name, err)
		return fmt.Errorf("ControllerExpandVolume %s: %w", req.VolumeId, err)
	}
	size := want
	if resp.GetCapacityBytes() > 0 {
		size = *resource.NewQuantity(resp.GetCapacityBytes(), resource.BinarySI)
	}
	pvPatch, _ := json.Marshal(map[string]any{"spec": map[string]any{"capacity": map[string]any{"storage": size.String()}}})
	if _, err := r.client.CoreV1().PersistentVolumes().Patch(ctx, pv.Name, types.MergePatchType, pvPatch, metav1.PatchOptions{}); err != nil {
		return err
	}
	if resp.GetNodeExpansionRequired() {
		r.recorder.Eventf(pvc, v1.EventTypeNormal, "FileSystemResizeRequired", "Require file system resize of volume on node")
		return r.patchClaimStatus(ctx, pvc, map[string]any{
			"allocatedResourceStatuses": map[string]any{"storage": v1.PersistentVolumeClaimNodeResizePending},
			"conditions":                conditions(pvc, v1.PersistentVolumeClaimFileSystemResizePending, "Waiting for user to (re-)start a pod to finish file system resize of volume on node."),
		})
	}
	r.recorder.Eventf(pvc, v1.EventTypeNormal, "VolumeResizeSuccessful", "Resize volume succeeded")
	return r.patchClaimStatus(ctx, pvc, map[string]any{
		"capacity":                  map[string]any{"storage": size.String()},
		"allocatedResourceStatuses": map[string]any{"storage": nil},
		"conditions":                []v1.PersistentVolumeClaimCondition{},
	})
}

// conditions are the claim's conditions with the resize ones replaced by
// one of type t.
func conditions(pvc *v1.PersistentVolumeClaim, t v1.PersistentVolumeClaimConditionType, msg string) []v1.PersistentVolumeClaimCondition {
	out := []v1.PersistentVolumeClaimCondition{}
	for _, c := range pvc.Status.Conditions {
		switch c.Type {
		case v1.PersistentVolumeClaimResizing, v1.PersistentVolumeClaimFileSystemResizePending:
		default:
			out = append(out, c)
		}
	}
	return append(out, v1.PersistentVolumeClaimCondition{
		Type: t, Status: v1.ConditionTrue, LastTransitionTime: metav1.Now(), Message: msg,
	})
}

func (r *resizer) patchClaimStatus(ctx context.Context, pvc *v1.PersistentVolumeClaim, status map[string]any) error {
	b, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return err
	}
	_, err = r.client.CoreV1().PersistentVolumeClaims(pvc.Namespace).Patch(ctx, pvc.Name, types.MergePatchType, b, metav1.PatchOptions{}, "status")
	return err
}

// capability is the PV's, as the resizer passes it to the driver.
func capability(pv *v1.PersistentVolume) *csi.VolumeCapability {
	mode := csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
	for _, m := range pv.Spec.AccessModes {
		switch m {
		case v1.ReadWriteMany:
			mode = csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
		case v1.ReadOnlyMany:
			if mode != csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER {
				mode = csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
			}
		}
	}
	c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode}}
	if pv.Spec.VolumeMode != nil && *pv.Spec.VolumeMode == v1.PersistentVolumeBlock {
		c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
	} else {
		c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: pv.Spec.CSI.FSType, MountFlags: pv.Spec.MountOptions}}
	}
	return c
}
