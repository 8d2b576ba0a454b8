package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	snapclient "github.com/kubernetes-csi/external-snapshotter/client/v8/clientset/versioned"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	v1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/klog/v2"
	"sigs.k8s.io/sig-storage-lib-external-provisioner/v11/controller"
)

// provisioner is the csi-provisioner part of the stand-in: the library calls
// Provision and Delete.
type provisioner struct {
	driver        string
	identity      string
	client        kubernetes.Interface
	snaps         snapclient.Interface
	ctrl          csi.ControllerClient
	timeout       time.Duration
	extraMetadata bool
	topology      bool
	caps          map[csi.ControllerServiceCapability_RPC_Type]bool
}

var (
	_ controller.Provisioner      = (*provisioner)(nil)
	_ controller.BlockProvisioner = (*provisioner)(nil)
)

// Keys csi-provisioner reads from the parameters and PV annotations.
const (
	prefix            = "csi.storage.k8s.io/"
	fstypeKey         = prefix + "fstype"
	identityAttribute = "storage.kubernetes.io/csiProvisionerIdentity"
	// The provisioner secret is remembered on the PV for DeleteVolume.
	deletionSecretName      = "volume.kubernetes.io/provisioner-deletion-secret-name"
	deletionSecretNamespace = "volume.kubernetes.io/provisioner-deletion-secret-namespace"
)

// SupportsBlock: ontap-san serves raw block volumes.
func (p *provisioner) SupportsBlock(context.Context) bool { return true }

// Provision creates the volume for a claim and returns its PV.
func (p *provisioner) Provision(ctx context.Context, o controller.ProvisionOptions) (*v1.PersistentVolume, controller.ProvisioningState, error) {
	sc, pvc := o.StorageClass, o.PVC
	params, secretParams, err := splitParameters(sc.Parameters)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	if p.extraMetadata {
		params[prefix+"pvc/name"] = pvc.Name
		params[prefix+"pvc/namespace"] = pvc.Namespace
		params[prefix+"pv/name"] = o.PVName
	}
	caps, err := p.capabilities(pvc, params[fstypeKey], sc.MountOptions)
	if err != nil {
		return nil, controller.ProvisioningFinished, err
	}
	fsType := params[fstypeKey]
	delete(params, fstypeKey)
	size := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	req := &csi.CreateVolumeRequest{
		Name:               o.PVName,
		Parameters:         params,
		VolumeCapabilities: caps,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: size.Value()},
	}
	if lim, ok := pvc.Spec.Resources.Limits[v1.ResourceStorage]; ok {
		req.CapacityRange.LimitBytes = lim.Value()
	}
	refs := secretRefs(secretParams, o.PVName, pvc)
	if ref := refs[provisionerSecret]; ref != nil {
		if req.Secrets, err = p.readSecret(ctx, ref); err != nil {
			return nil, controller.ProvisioningNoChange, err
		}
	}
	if req.VolumeContentSource, err = p.contentSource(ctx, pvc, sc.Name, size); err != nil {
		return nil, controller.ProvisioningNoChange, err
	}
	if p.topology {
		if req.AccessibilityRequirements, err = p.requirements(ctx, sc, o.SelectedNode, pvc.Name); err != nil {
			return nil, controller.ProvisioningNoChange, err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	resp, err := p.ctrl.CreateVolume(cctx, req)
	if err != nil {
		return nil, provisioningState(err), fmt.Errorf("CreateVolume %s: %w", o.PVName, err)
	}
	klog.Infof("created volume %s for %s/%s: %s", o.PVName, pvc.Namespace, pvc.Name, resp.GetVolume().GetVolumeId())
	return p.persistentVolume(o, resp.GetVolume(), fsType, refs), controller.ProvisioningFinished, nil
}

// provisioningState says whether CreateVolume may still be running on the
// driver after an error: a timeout or a transient code means the library
// must call again with the same name (csi-provisioner's rule), so a volume
// half made is finished or found, never orphaned.
func provisioningState(err error) controller.ProvisioningState {
	switch status.Code(err) {
	case codes.Canceled, codes.DeadlineExceeded, codes.Unavailable, codes.ResourceExhausted, codes.Aborted:
		return controller.ProvisioningInBackground
	}
	return controller.ProvisioningFinished
}

// persistentVolume is the PV csi-provisioner writes for a created volume.
func (p *provisioner) persistentVolume(o controller.ProvisionOptions, vol *csi.Volume, fsType string, refs map[string]*v1.SecretReference) *v1.PersistentVolume {
	pvc := o.PVC
	capacity := pvc.Spec.Resources.Requests[v1.ResourceStorage]
	if vol.GetCapacityBytes() > 0 {
		capacity = *resource.NewQuantity(vol.GetCapacityBytes(), resource.BinarySI)
	}
	attrs := map[string]string{identityAttribute: p.identity}
	for k, v := range vol.GetVolumeContext() {
		attrs[k] = v
	}
	source := &v1.CSIPersistentVolumeSource{
		Driver:                     p.driver,
		VolumeHandle:               vol.GetVolumeId(),
		VolumeAttributes:           attrs,
		ControllerPublishSecretRef: refs[controllerPublishSecret],
		NodeStageSecretRef:         refs[nodeStageSecret],
		NodePublishSecretRef:       refs[nodePublishSecret],
		ControllerExpandSecretRef:  refs[controllerExpandSecret],
		NodeExpandSecretRef:        refs[nodeExpandSecret],
	}
	if pvc.Spec.VolumeMode == nil || *pvc.Spec.VolumeMode != v1.PersistentVolumeBlock {
		source.FSType = fsType
	}
	pv := &v1.PersistentVolume{
		ObjectMeta: metav1.ObjectMeta{Name: o.PVName},
		Spec: v1.PersistentVolumeSpec{
			AccessModes:                   pvc.Spec.AccessModes,
			MountOptions:                  o.StorageClass.MountOptions,
			Capacity:                      v1.ResourceList{v1.ResourceStorage: capacity},
			VolumeMode:                    pvc.Spec.VolumeMode,
			PersistentVolumeSource:        v1.PersistentVolumeSource{CSI: source},
			NodeAffinity:                  nodeAffinity(vol.GetAccessibleTopology()),
			PersistentVolumeReclaimPolicy: v1.PersistentVolumeReclaimDelete,
		},
	}
	if o.StorageClass.ReclaimPolicy != nil {
		pv.Spec.PersistentVolumeReclaimPolicy = *o.StorageClass.ReclaimPolicy
	}
	if ref := refs[provisionerSecret]; ref != nil {
		metav1.SetMetaDataAnnotation(&pv.ObjectMeta, deletionSecretName, ref.Name)
		metav1.SetMetaDataAnnotation(&pv.ObjectMeta, deletionSecretNamespace, ref.Namespace)
	}
	return pv
}

// capabilities are one per access mode of the claim, as csi-provisioner
// sends them.
func (p *provisioner) capabilities(pvc *v1.PersistentVolumeClaim, fsType string, mountOptions []string) ([]*csi.VolumeCapability, error) {
	if len(pvc.Spec.AccessModes) == 0 {
		return nil, errors.New("the claim has no access mode")
	}
	var out []*csi.VolumeCapability
	for _, m := range pvc.Spec.AccessModes {
		c := &csi.VolumeCapability{AccessMode: &csi.VolumeCapability_AccessMode{Mode: p.accessMode(m)}}
		if pvc.Spec.VolumeMode != nil && *pvc.Spec.VolumeMode == v1.PersistentVolumeBlock {
			c.AccessType = &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}
		} else {
			c.AccessType = &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: mountOptions}}
		}
		out = append(out, c)
	}
	return out, nil
}

func (p *provisioner) accessMode(m v1.PersistentVolumeAccessMode) csi.VolumeCapability_AccessMode_Mode {
	multi := p.caps[csi.ControllerServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER]
	switch m {
	case v1.ReadWriteMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER
	case v1.ReadOnlyMany:
		return csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY
	case v1.ReadWriteOncePod:
		if multi {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER
		}
	case v1.ReadWriteOnce:
		if multi {
			return csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER
		}
	}
	return csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER
}

// Delete deletes a released volume the library decided to delete (reclaim
// policy Delete). Like csi-provisioner it refuses while a VolumeAttachment
// still names the PV: the volume may be in use on a node.
func (p *provisioner) Delete(ctx context.Context, pv *v1.PersistentVolume) error {
	if pv.Spec.CSI == nil || pv.Spec.CSI.Driver != p.driver {
		return &controller.IgnoredError{Reason: "not a volume of " + p.driver}
	}
	vas, err := p.client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, va := range vas.Items {
		if name := va.Spec.Source.PersistentVolumeName; name != nil && *name == pv.Name {
			return fmt.Errorf("persistentvolume %s is still attached to node %s", pv.Name, va.Spec.NodeName)
		}
	}
	req := &csi.DeleteVolumeRequest{VolumeId: pv.Spec.CSI.VolumeHandle}
	if name := pv.Annotations[deletionSecretName]; name != "" {
		ref := &v1.SecretReference{Name: name, Namespace: pv.Annotations[deletionSecretNamespace]}
		if req.Secrets, err = p.readSecret(ctx, ref); err != nil {
			return err
		}
	}
	cctx, cancel := context.WithTimeout(ctx, p.timeout)
	defer cancel()
	if _, err := p.ctrl.DeleteVolume(cctx, req); err != nil {
		return fmt.Errorf("DeleteVolume %s: %w", req.VolumeId, err)
	}
	klog.Infof("deleted volume %s (PV %s)", req.VolumeId, pv.Name)
	return nil
}

func (p *provisioner) readSecret(ctx context.Context, ref *v1.SecretReference) (map[string]string, error) {
	s, err := p.client.CoreV1().Secrets(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("secret %s/%s: %w", ref.Namespace, ref.Name, err)
	}
	out := make(map[string]string, len(s.Data))
	for k, v := range s.Data {
		out[k] = string(v)
	}
	return out, nil
}

// Secret kinds, by the parameter prefix that names them.
const (
	provisionerSecret       = "provisioner"
	controllerPublishSecret = "controller-publish"
	nodeStageSecret         = "node-stage"
	nodePublishSecret       = "node-publish"
	controllerExpandSecret  = "controller-expand"
	nodeExpandSecret        = "node-expand"
)

var secretKinds = []string{provisionerSecret, controllerPublishSecret, nodeStageSecret, nodePublishSecret, controllerExpandSecret, nodeExpandSecret}

// splitParameters separates the driver's parameters from csi-provisioner's
// own: the secret names (returned apart) and fstype (kept, under its key,
// for the caller to take out). An unknown csi.storage.k8s.io/ key is an
// error, as in csi-provisioner.
func splitParameters(in map[string]string) (params, secrets map[string]string, err error) {
	params, secrets = map[string]string{}, map[string]string{}
	for k, v := range in {
		rest, ours := strings.CutPrefix(k, prefix)
		if !ours {
			params[k] = v
			continue
		}
		switch {
		case k == fstypeKey:
			params[k] = v
		case strings.HasSuffix(rest, "-secret-name") || strings.HasSuffix(rest, "-secret-namespace"):
			kind := strings.TrimSuffix(strings.TrimSuffix(rest, "-name"), "-namespace")
			if !validSecretKind(strings.TrimSuffix(kind, "-secret")) {
				return nil, nil, fmt.Errorf("StorageClass parameter %s is not a known secret", k)
			}
			secrets[rest] = v
		default:
			return nil, nil, fmt.Errorf("StorageClass parameter %s is not supported", k)
		}
	}
	return params, secrets, nil
}

func validSecretKind(kind string) bool {
	for _, k := range secretKinds {
		if k == kind {
			return true
		}
	}
	return false
}

// secretRefs resolves the secret parameters of each kind, with the
// templates csi-provisioner allows.
func secretRefs(secrets map[string]string, pvName string, pvc *v1.PersistentVolumeClaim) map[string]*v1.SecretReference {
	expand := strings.NewReplacer("${pv.name}", pvName, "${pvc.name}", pvc.Name, "${pvc.namespace}", pvc.Namespace)
	out := map[string]*v1.SecretReference{}
	for _, kind := range secretKinds {
		name, ns := secrets[kind+"-secret-name"], secrets[kind+"-secret-namespace"]
		if name == "" && ns == "" {
			continue
		}
		out[kind] = &v1.SecretReference{Name: expand.Replace(name), Namespace: expand.Replace(ns)}
	}
	return out
}
