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
	c := NewClaims(client)
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
