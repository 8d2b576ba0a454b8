package kubevolumes

import (
	"context"
	"errors"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/ontap-csi/ontap-csi/controller"
)

func fakeClient(objs ...runtime.Object) *dynamicfake.FakeDynamicClient {
	return dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		PVCsGVR: "PersistentVolumeClaimList", PVsGVR: "PersistentVolumeList", TridentVolumesGVR: "TridentVolumeList",
	}, objs...)
}

func pvc(ns, name, volume string, ann map[string]any) *unstructured.Unstructured {
	meta := map[string]any{"name": name, "namespace": ns}
	if ann != nil {
		meta["annotations"] = ann
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": meta,
		"spec": map[string]any{"volumeName": volume},
	}}
}

func TestClaim(t *testing.T) {
	client := fakeClient(pvc("apps", "data", "pvc-1", map[string]any{"trident.netapp.io/snapshotPolicy": "default"}))
	c := NewClaims(client, false)
	got, err := c.Claim(context.Background(), "apps", "data")
	if err != nil {
		t.Fatal(err)
	}
	if got.Namespace != "apps" || got.Name != "data" || got.VolumeName != "pvc-1" || got.Annotations["trident.netapp.io/snapshotPolicy"] != "default" {
		t.Errorf("claim: %+v", got)
	}
	if _, err := c.Claim(context.Background(), "other", "data"); !errors.Is(err, controller.ErrClaimNotFound) {
		t.Errorf("claim in another namespace: %v, want ErrClaimNotFound", err)
	}
	client.PrependReactor("get", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(PVCsGVR.GroupResource(), "data", errors.New("no RBAC"))
	})
	if _, err := c.Claim(context.Background(), "apps", "data"); err == nil || errors.Is(err, controller.ErrClaimNotFound) {
		t.Errorf("forbidden: %v, want an error that is not ErrClaimNotFound", err)
	}
}

func TestClaimByUID(t *testing.T) {
	obj := pvc("apps", "data", "", map[string]any{"trident.netapp.io/snapshotPolicy": "default"})
	obj.SetUID("5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f")
	other := pvc("apps", "other", "", nil)
	other.SetUID("0f1e2d3c-4b5a-4968-8776-655443322110")
	ctx := context.Background()
	client := fakeClient(other, obj)
	got, err := NewClaims(client, true).ClaimByUID(ctx, "5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f")
	if err != nil || got.Namespace != "apps" || got.Name != "data" || got.Annotations["trident.netapp.io/snapshotPolicy"] != "default" {
		t.Errorf("by UID: %+v, %v", got, err)
	}
	if _, err := NewClaims(client, true).ClaimByUID(ctx, "11111111-1b2d-4c6e-9f70-8a9b0c1d2e3f"); !errors.Is(err, controller.ErrClaimNotFound) {
		t.Errorf("unknown UID: %v, want ErrClaimNotFound", err)
	}
	// Without list on claims (ontap-csi's own install) it does not search.
	if _, err := NewClaims(client, false).ClaimByUID(ctx, "5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"); !errors.Is(err, controller.ErrClaimNotFound) {
		t.Errorf("not by UID: %v, want ErrClaimNotFound", err)
	}
	client.PrependReactor("list", "persistentvolumeclaims", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(PVCsGVR.GroupResource(), "", errors.New("no RBAC"))
	})
	if _, err := NewClaims(client, true).ClaimByUID(ctx, "5e0c8a43-1b2d-4c6e-9f70-8a9b0c1d2e3f"); err == nil || errors.Is(err, controller.ErrClaimNotFound) {
		t.Errorf("forbidden: %v, want an error that is not ErrClaimNotFound", err)
	}
}
