// Package kubevolumes is what the controller reads of Kubernetes' volume
// objects: the PersistentVolumeClaim a CreateVolume is for (Trident's
// trident.netapp.io annotations), and where a volume lives on the storage
// system as its PersistentVolume (the internalName volume attribute) or
// Trident's TridentVolume record says.
package kubevolumes

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/controller"
)

// PVCsGVR is the resource read here.
var PVCsGVR = schema.GroupVersionResource{Version: "v1", Resource: "persistentvolumeclaims"}

// Claims implements controller.ClaimReader with one GET per call: a
// CreateVolume reads its claim once, and a cache would have to be as fresh
// as the annotations a user just set. The ServiceAccount needs get on
// persistentvolumeclaims, and list for ClaimByUID.
type Claims struct {
	client dynamic.NamespaceableResourceInterface
	byUID  bool
}

var _ controller.ClaimReader = (*Claims)(nil)

// NewClaims returns a ClaimReader; it does no I/O. byUID lets it list
// every claim to find one by UID (Trident's controller role may).
func NewClaims(client dynamic.Interface, byUID bool) *Claims {
	return &Claims{client: client.Resource(PVCsGVR), byUID: byUID}
}

// ClaimByUID implements controller.ClaimReader with one LIST of every
// claim, from the API server's watch cache (resourceVersion 0): the API
// has no UID selector, and a create happens once per claim.
func (c *Claims) ClaimByUID(ctx context.Context, uid string) (*controller.Claim, error) {
	if !c.byUID {
		return nil, fmt.Errorf("claim %s: %w (not searched by UID)", uid, controller.ErrClaimNotFound)
	}
	list, err := c.client.List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, err
	}
	for i := range list.Items {
		if obj := &list.Items[i]; string(obj.GetUID()) == uid {
			return toClaim(obj), nil
		}
	}
	return nil, fmt.Errorf("claim with UID %s: %w", uid, controller.ErrClaimNotFound)
}

// Claim implements controller.ClaimReader.
func (c *Claims) Claim(ctx context.Context, namespace, name string) (*controller.Claim, error) {
	obj, err := c.client.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("%w: %v", controller.ErrClaimNotFound, err)
	}
	if err != nil {
		return nil, err
	}
	return toClaim(obj), nil
}

func toClaim(obj *unstructured.Unstructured) *controller.Claim {
	volume, _, _ := unstructured.NestedString(obj.Object, "spec", "volumeName")
	class, _, _ := unstructured.NestedString(obj.Object, "spec", "storageClassName")
	return &controller.Claim{
		Namespace: obj.GetNamespace(), Name: obj.GetName(), Annotations: obj.GetAnnotations(), VolumeName: volume,
		StorageClass: class,
	}
}
