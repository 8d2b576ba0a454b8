package cluster_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
)

// snapshotRestoreClone (4): a VolumeSnapshot of an NFS claim (the real
// snapshot-controller and csi-snapshotter), a claim restored from it and a
// claim cloned from the source claim; both read the source's data on the
// other node. Everything is deleted again, clones first.
func snapshotRestoreClone(ctx context.Context, s *suite, r *scenarioRun) error {
	ns := r.namespace
	src, err := s.createClaim(ctx, claim(ns, "source", nasClass, corev1.ReadWriteMany, "1Gi"), true)
	if err != nil {
		return err
	}
	data := "snap-" + token()
	if _, err := s.startPod(ctx, dataPod(ns, "writer", s.firstNode(), "source", "put", "f", data)); err != nil {
		return err
	}
	handle, err := s.snapshot(ctx, ns, "snap", "source")
	if err != nil {
		return err
	}
	vol := ontapVolume(src.Spec.VolumeName)
	snaps, err := s.expectOntap(ctx, true, "snapshot "+vol+"@")
	if err != nil {
		return err
	}
	r.note(s, "VolumeSnapshot snap ready, handle %s; ONTAP %v", handle, snaps)
	restored := claim(ns, "restored", nasClass, corev1.ReadWriteMany, "1Gi")
	restored.Spec.DataSource = &corev1.TypedLocalObjectReference{APIGroup: ptr.To("snapshot.storage.k8s.io"), Kind: "VolumeSnapshot", Name: "snap"}
	clone := claim(ns, "clone", nasClass, corev1.ReadWriteMany, "1Gi")
	clone.Spec.DataSource = &corev1.TypedLocalObjectReference{Kind: "PersistentVolumeClaim", Name: "source"}
	for _, c := range []*corev1.PersistentVolumeClaim{restored, clone} {
		got, err := s.createClaim(ctx, c, true)
		if err != nil {
			return err
		}
		if _, err := s.startPod(ctx, dataPod(ns, c.Name+"-reader", s.lastNode(), c.Name, "get", "f", data)); err != nil {
			return err
		}
		r.note(s, "claim %s (from %s %s) bound to %s; %s reads the source's data", c.Name, c.Spec.DataSource.Kind,
			c.Spec.DataSource.Name, got.Spec.VolumeName, s.lastNode())
	}
	for _, p := range []string{"writer", "restored-reader", "clone-reader"} {
		if err := s.deletePod(ctx, ns, p); err != nil {
			return err
		}
	}
	if err := s.deleteClaims(ctx, ns, "restored", "clone"); err != nil {
		return err
	}
	if err := s.deleteSnapshot(ctx, ns, "snap"); err != nil {
		return err
	}
	if _, err := s.waitOntap(ctx, false, "snapshot "+vol+"@"); err != nil {
		return err
	}
	r.note(s, "restored and clone claims, the VolumeSnapshot and its ONTAP snapshot deleted")
	return s.deleteClaims(ctx, ns, "source")
}

// snapshot creates a VolumeSnapshot of a claim and waits until it is ready
// to use; it returns the snapshot handle.
func (s *suite) snapshot(ctx context.Context, ns, name, claimName string) (string, error) {
	vs := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshot",
		"metadata": map[string]any{"name": name, "namespace": ns},
		"spec": map[string]any{
			"volumeSnapshotClassName": snapshotClass,
			"source":                  map[string]any{"persistentVolumeClaimName": claimName},
		},
	}}
	res := s.dyn.Resource(snapshotGVR).Namespace(ns)
	if _, err := res.Create(ctx, vs, metav1.CreateOptions{}); err != nil {
		return "", err
	}
	var content string
	err := pollUntil(ctx, 2*time.Minute, func() (bool, string, error) {
		got, err := res.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		ready, _, _ := unstructured.NestedBool(got.Object, "status", "readyToUse")
		content, _, _ = unstructured.NestedString(got.Object, "status", "boundVolumeSnapshotContentName")
		status, _, _ := unstructured.NestedMap(got.Object, "status")
		return ready, fmt.Sprintf("status %v", status), nil
	})
	if err != nil {
		return "", fmt.Errorf("VolumeSnapshot %s/%s: %w", ns, name, err)
	}
	vsc, err := s.dyn.Resource(snapshotGVR.GroupVersion().WithResource("volumesnapshotcontents")).Get(ctx, content, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	handle, _, _ := unstructured.NestedString(vsc.Object, "status", "snapshotHandle")
	if !strings.Contains(handle, "/") {
		return "", fmt.Errorf("VolumeSnapshotContent %s has snapshot handle %q", content, handle)
	}
	return handle, nil
}

// deleteSnapshot deletes a VolumeSnapshot and waits until it and its
// content are gone (deletionPolicy Delete: the snapshot on ONTAP goes too).
func (s *suite) deleteSnapshot(ctx context.Context, ns, name string) error {
	res := s.dyn.Resource(snapshotGVR).Namespace(ns)
	got, err := res.Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	content, _, _ := unstructured.NestedString(got.Object, "status", "boundVolumeSnapshotContentName")
	if err := res.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	contents := s.dyn.Resource(snapshotGVR.GroupVersion().WithResource("volumesnapshotcontents"))
	return pollUntil(ctx, 2*time.Minute, func() (bool, string, error) {
		_, err1 := res.Get(ctx, name, metav1.GetOptions{})
		_, err2 := contents.Get(ctx, content, metav1.GetOptions{})
		return apierrors.IsNotFound(err1) && apierrors.IsNotFound(err2), "VolumeSnapshot or its content still there", nil
	})
}
