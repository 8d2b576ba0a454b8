package cluster_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// Scenarios 1 to 5 of issue 20: volumes provisioned, attached, moved,
// snapshotted and expanded by the real sidecars and the stand-ins, each in
// a namespace of its own, all at once.

const (
	bindTimeout = 2 * time.Minute
	podTimeout  = 3 * time.Minute
)

// dataPod runs the workload program in mode (put, get, statfs) on a claim.
// It is Ready once the mode did its job (workload ok); node pins it, "" lets
// the scheduler choose.
func dataPod(ns, name, node, claimName, mode, file, content string) *corev1.Pod {
	p := workloadPod(ns, name, node, claimName, mode, "--dir=/data", "--file="+file, "--content="+content)
	p.Spec.Containers[0].ReadinessProbe = &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"/workload", "ok"}}},
		PeriodSeconds: 1,
	}
	return p
}

// startPod creates a pod and waits until it is Ready; it fails early if
// the container exits (a get that read the wrong data).
func (s *suite) startPod(ctx context.Context, p *corev1.Pod) (*corev1.Pod, error) {
	c := s.cluster.Client
	if _, err := c.CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	var got *corev1.Pod
	err := waitPod(ctx, c, p.Namespace, p.Name, podTimeout, func(q *corev1.Pod) bool {
		got = q
		return podReady(q)
	})
	if err == nil {
		for _, cs := range got.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				return got, fmt.Errorf("pod %s/%s restarted %d times", p.Namespace, p.Name, cs.RestartCount)
			}
		}
	}
	return got, err
}

// deletePod deletes a pod and waits until it is gone: its volumes are
// unmounted then (kubelet removes a pod only after that).
func (s *suite) deletePod(ctx context.Context, ns, name string) error {
	if err := s.cluster.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return waitPodGone(ctx, s.cluster.Client, ns, name, podTimeout)
}

// createClaim creates a claim; wait makes it wait until Bound.
func (s *suite) createClaim(ctx context.Context, pvc *corev1.PersistentVolumeClaim, wait bool) (*corev1.PersistentVolumeClaim, error) {
	c := s.cluster.Client
	if _, err := c.CoreV1().PersistentVolumeClaims(pvc.Namespace).Create(ctx, pvc, metav1.CreateOptions{}); err != nil {
		return nil, err
	}
	if !wait {
		return pvc, nil
	}
	return s.waitBound(ctx, pvc.Namespace, pvc.Name, bindTimeout)
}

func (s *suite) waitBound(ctx context.Context, ns, name string, timeout time.Duration) (*corev1.PersistentVolumeClaim, error) {
	var got *corev1.PersistentVolumeClaim
	err := pollUntil(ctx, timeout, func() (bool, string, error) {
		var err error
		got, err = s.cluster.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return got.Status.Phase == corev1.ClaimBound, "claim " + string(got.Status.Phase), nil
	})
	if err != nil {
		return nil, fmt.Errorf("claim %s/%s: %w", ns, name, err)
	}
	s.boundPV(ns, got.Spec.VolumeName)
	return got, nil
}

// deleteClaims deletes claims and waits until their PVs are gone: the
// provisioner deleted the volumes (reclaim policy Delete).
func (s *suite) deleteClaims(ctx context.Context, ns string, names ...string) error {
	c := s.cluster.Client
	var pvs []string
	for _, n := range names {
		pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			return err
		}
		pvs = append(pvs, pvc.Spec.VolumeName)
		if err := c.CoreV1().PersistentVolumeClaims(ns).Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	if err := pollUntil(ctx, bindTimeout, func() (bool, string, error) {
		for _, pv := range pvs {
			if _, err := c.CoreV1().PersistentVolumes().Get(ctx, pv, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				return false, "PV " + pv + " still there", nil
			}
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	// The provisioner deletes a PV only after DeleteVolume succeeded: the
	// volume, its LUN and export policy must be gone from ONTAP by now.
	objs, err := s.ontap.objects(ctx)
	if err != nil {
		return err
	}
	for _, pv := range pvs {
		if left := objs.with(ontapVolume(pv)); len(left) > 0 {
			return fmt.Errorf("PV %s deleted, but ONTAP still has %v", pv, left)
		}
	}
	return nil
}

// ontapVolume is the FlexVol ontap-csi names after a PV (Trident's naming:
// storage prefix, then the PV name with '-' as '_').
func ontapVolume(pv string) string { return "e2e_" + strings.ReplaceAll(pv, "-", "_") }

// expectOntap fails unless the SVM holds (want) or lacks (!want) an object
// line with all the words.
func (s *suite) expectOntap(ctx context.Context, want bool, words ...string) ([]string, error) {
	objs, err := s.ontap.objects(ctx)
	if err != nil {
		return nil, err
	}
	got := objs.with(words...)
	if want && len(got) == 0 {
		return nil, fmt.Errorf("ONTAP has no %q", strings.Join(words, " "))
	}
	if !want && len(got) > 0 {
		return nil, fmt.Errorf("ONTAP still has %v", got)
	}
	return got, nil
}

// waitOntap waits until expectOntap holds.
func (s *suite) waitOntap(ctx context.Context, want bool, words ...string) ([]string, error) {
	var got []string
	var last error
	err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		got, last = s.expectOntap(ctx, want, words...)
		return last == nil, fmt.Sprint(last), nil
	})
	if err != nil {
		return nil, last
	}
	return got, nil
}

func token() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

func (s *suite) firstNode() string { return s.cluster.Nodes[0].Name }
func (s *suite) lastNode() string  { return s.cluster.Nodes[len(s.cluster.Nodes)-1].Name }

// dynamicProvisioning (1): an NFS claim bound at once; an iSCSI claim of a
// WaitForFirstConsumer class limited to the second node's zone, which stays
// Pending until a pod uses it, is then provisioned in that zone and its pod
// scheduled there; both deleted again with their volumes.
func dynamicProvisioning(ctx context.Context, s *suite, r *scenarioRun) error {
	ns := r.namespace
	nas, err := s.createClaim(ctx, claim(ns, "nas", nasClass, corev1.ReadWriteMany, "1Gi"), true)
	if err != nil {
		return err
	}
	pv, err := s.cluster.Client.CoreV1().PersistentVolumes().Get(ctx, nas.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := checkProvisionedPV(pv, nasClass); err != nil {
		return err
	}
	if _, err := s.expectOntap(ctx, true, "volume "+ontapVolume(pv.Name)); err != nil {
		return err
	}
	r.note(s, "claim nas bound to %s; ONTAP volume %s; PV attributes %v", pv.Name, ontapVolume(pv.Name), pv.Spec.CSI.VolumeAttributes)
	if _, err := s.startPod(ctx, dataPod(ns, "nas-writer", s.firstNode(), "nas", "put", "f", "nas-"+token())); err != nil {
		return err
	}
	if err := wffcClaim(ctx, s, r); err != nil {
		return err
	}
	for _, p := range []string{"nas-writer", "san-writer"} {
		if err := s.deletePod(ctx, ns, p); err != nil {
			return err
		}
	}
	san, err := s.cluster.Client.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "san", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := s.deleteClaims(ctx, ns, "nas", "san"); err != nil {
		return err
	}
	for _, v := range []string{pv.Name, san.Spec.VolumeName} {
		if _, err := s.waitOntap(ctx, false, "volume "+ontapVolume(v)); err != nil {
			return err
		}
	}
	r.note(s, "claims deleted: PVs and ONTAP volumes %s, %s gone", ontapVolume(pv.Name), ontapVolume(san.Spec.VolumeName))
	return nil
}

// checkProvisionedPV checks what csi-provisioner writes into a PV.
func checkProvisionedPV(pv *corev1.PersistentVolume, class string) error {
	switch {
	case pv.Spec.CSI == nil || pv.Spec.CSI.Driver != driverName:
		return fmt.Errorf("PV %s is not a %s volume", pv.Name, driverName)
	case pv.Spec.StorageClassName != class:
		return fmt.Errorf("PV %s has class %q", pv.Name, pv.Spec.StorageClassName)
	case pv.Spec.PersistentVolumeReclaimPolicy != corev1.PersistentVolumeReclaimDelete:
		return fmt.Errorf("PV %s has reclaim policy %s", pv.Name, pv.Spec.PersistentVolumeReclaimPolicy)
	case pv.Annotations["pv.kubernetes.io/provisioned-by"] != driverName:
		return fmt.Errorf("PV %s is not annotated provisioned-by %s", pv.Name, driverName)
	case pv.Spec.CSI.VolumeAttributes["storage.kubernetes.io/csiProvisionerIdentity"] == "":
		return fmt.Errorf("PV %s has no provisioner identity", pv.Name)
	}
	return nil
}

// wffcClaim is the WaitForFirstConsumer half of scenario 1.
func wffcClaim(ctx context.Context, s *suite, r *scenarioRun) error {
	ns, c := r.namespace, s.cluster.Client
	if _, err := s.createClaim(ctx, claim(ns, "san", sanWFFCClass, corev1.ReadWriteOnce, "1Gi"), false); err != nil {
		return err
	}
	time.Sleep(3 * time.Second)
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "san", metav1.GetOptions{})
	if err != nil {
		return err
	}
	if pvc.Status.Phase != corev1.ClaimPending || pvc.Spec.VolumeName != "" {
		return fmt.Errorf("the WaitForFirstConsumer claim is %s (volume %q) before any pod uses it", pvc.Status.Phase, pvc.Spec.VolumeName)
	}
	r.note(s, "claim san (WaitForFirstConsumer) still Pending 3 s after creation, no volume")
	// No node named: the scheduler must find the zone's node.
	p, err := s.startPod(ctx, dataPod(ns, "san-writer", "", "san", "put", "f", "san-"+token()))
	if err != nil {
		return err
	}
	if p.Spec.NodeName != s.lastNode() {
		return fmt.Errorf("the pod of a claim limited to zone %s runs on %s", s.lastNode(), p.Spec.NodeName)
	}
	pvc, err = s.waitBound(ctx, ns, "san", bindTimeout)
	if err != nil {
		return err
	}
	pv, err := c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{})
	if err != nil {
		return err
	}
	if err := checkProvisionedPV(pv, sanWFFCClass); err != nil {
		return err
	}
	affinity := fmt.Sprint(pv.Spec.NodeAffinity)
	if pv.Spec.NodeAffinity == nil || !strings.Contains(affinity, zoneLabel) || !strings.Contains(affinity, s.lastNode()) ||
		strings.Contains(affinity, s.firstNode()) {
		return fmt.Errorf("PV %s node affinity %s, want the zone %s only", pv.Name, affinity, s.lastNode())
	}
	r.note(s, "pod scheduled to %s (selected-node %q); PV %s node affinity %s=%s", p.Spec.NodeName,
		pvc.Annotations["volume.kubernetes.io/selected-node"], pv.Name, zoneLabel, s.lastNode())
	maps, err := s.expectOntap(ctx, true, "lun-map", ontapVolume(pv.Name), s.lastNode())
	if err != nil {
		return err
	}
	r.note(s, "ONTAP: %v", maps)
	return nil
}

// rwxTwoNodes (2): an NFS volume written on one node and read on the other
// while both pods run; both nodes are in its export policy, and leave it
// when their pods are gone.
func rwxTwoNodes(ctx context.Context, s *suite, r *scenarioRun) error {
	ns := r.namespace
	pvc, err := s.createClaim(ctx, claim(ns, "shared", nasClass, corev1.ReadWriteMany, "1Gi"), true)
	if err != nil {
		return err
	}
	data := "shared-" + token()
	if _, err := s.startPod(ctx, dataPod(ns, "writer", s.firstNode(), "shared", "put", "f", data)); err != nil {
		return err
	}
	if _, err := s.startPod(ctx, dataPod(ns, "reader", s.lastNode(), "shared", "get", "f", data)); err != nil {
		return err
	}
	r.note(s, "written on %s, read back on %s while the writer still runs", s.firstNode(), s.lastNode())
	vol := ontapVolume(pvc.Spec.VolumeName)
	policies, err := s.ontap.exportPolicies(ctx)
	if err != nil {
		return err
	}
	rules := policyRules(policies, vol)
	for _, n := range s.cluster.Nodes {
		if !strings.Contains(rules, n.IP) {
			return fmt.Errorf("export policy of %s is %s, without %s", vol, rules, n.IP)
		}
	}
	r.note(s, "export policy of %s: %s", vol, rules)
	for _, p := range []string{"writer", "reader"} {
		if err := s.deletePod(ctx, ns, p); err != nil {
			return err
		}
	}
	if err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		policies, err := s.ontap.exportPolicies(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		rules = policyRules(policies, vol)
		return !strings.Contains(rules, "10.250.0."), "export rules " + rules, nil
	}); err != nil {
		return fmt.Errorf("the nodes stay in the export policy of %s after their pods left: %w", vol, err)
	}
	r.note(s, "both pods gone: the export policy of %s holds %s", vol, rules)
	return s.deleteClaims(ctx, ns, "shared")
}

// policyRules are the clients of the export policy named after a volume
// (autoExportPolicy makes one per volume), or "" if there is none.
func policyRules(policies map[string][]string, vol string) string {
	for name, clients := range policies {
		if strings.Contains(name, vol) {
			return fmt.Sprint(clients)
		}
	}
	return ""
}

// iscsiMovesNode (3): an iSCSI RWO volume written on the first node; its pod
// deleted and a new one started on the second. csi-attacher detaches it
// from the first (its LUN map to the node's igroup goes on ONTAP), attaches
// it to the second, and the data is there.
func iscsiMovesNode(ctx context.Context, s *suite, r *scenarioRun) error {
	ns, c := r.namespace, s.cluster.Client
	pvc, err := s.createClaim(ctx, claim(ns, "rwo", sanClass, corev1.ReadWriteOnce, "1Gi"), true)
	if err != nil {
		return err
	}
	vol, data := ontapVolume(pvc.Spec.VolumeName), "moving-"+token()
	if _, err := s.startPod(ctx, dataPod(ns, "first", s.firstNode(), "rwo", "put", "f", data)); err != nil {
		return err
	}
	maps, err := s.expectOntap(ctx, true, "lun-map", vol, s.firstNode())
	if err != nil {
		return err
	}
	r.note(s, "on %s: %v", s.firstNode(), maps)
	if err := s.deletePod(ctx, ns, "first"); err != nil {
		return err
	}
	if err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		vas, err := c.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for _, va := range vas.Items {
			if va.Spec.NodeName == s.firstNode() && ptr.Deref(va.Spec.Source.PersistentVolumeName, "") == pvc.Spec.VolumeName {
				return false, "VolumeAttachment " + va.Name + " still there", nil
			}
		}
		return true, "", nil
	}); err != nil {
		return err
	}
	if _, err := s.waitOntap(ctx, false, "lun-map", vol, s.firstNode()); err != nil {
		return err
	}
	// The node's iSCSI keeper still uses the igroup: it stays (scenario 8
	// shows it go with the last LUN).
	igroups, err := s.expectOntap(ctx, true, "igroup "+s.firstNode()+"-")
	if err != nil {
		return err
	}
	r.note(s, "detached from %s: no LUN map of this volume left there; %v stays for the keeper's LUN", s.firstNode(), igroups)
	if _, err := s.startPod(ctx, dataPod(ns, "second", s.lastNode(), "rwo", "get", "f", data)); err != nil {
		return err
	}
	if maps, err = s.expectOntap(ctx, true, "lun-map", vol, s.lastNode()); err != nil {
		return err
	}
	r.note(s, "attached to %s (%v), data intact", s.lastNode(), maps)
	if err := s.deletePod(ctx, ns, "second"); err != nil {
		return err
	}
	return s.deleteClaims(ctx, ns, "rwo")
}

// onlineExpansion (5): an xfs iSCSI volume grown from 1 GiB to 2 GiB while
// its pod runs: the resizer stand-in expands it on ONTAP, kubelet asks the
// node plugin to grow the file system, the pod sees the new size. xfs, not
// ext4: growing a mounted ext4 needs CAP_SYS_RESOURCE (the kernel's
// ext4_resize_begin), which no process on these machines has
// (docs/design/local-cluster.md §1); xfs_growfs needs CAP_SYS_ADMIN only.
func onlineExpansion(ctx context.Context, s *suite, r *scenarioRun) error {
	ns, c := r.namespace, s.cluster.Client
	pvc, err := s.createClaim(ctx, claim(ns, "grow", sanXFSClass, corev1.ReadWriteOnce, "1Gi"), true)
	if err != nil {
		return err
	}
	node := s.cluster.Node(s.lastNode())
	p, err := s.startPod(ctx, dataPod(ns, "sizer", node.Name, "grow", "statfs", "", ""))
	if err != nil {
		return err
	}
	before, err := s.reportedSize(ctx, p, 0)
	if err != nil {
		return err
	}
	r.note(s, "file system of %s: %d bytes", pvc.Spec.VolumeName, before)
	patch := []byte(`{"spec":{"resources":{"requests":{"storage":"2Gi"}}}}`)
	if _, err := c.CoreV1().PersistentVolumeClaims(ns).Patch(ctx, "grow", "application/merge-patch+json", patch, metav1.PatchOptions{}); err != nil {
		return err
	}
	if err := pollUntil(ctx, 2*time.Minute, func() (bool, string, error) {
		got, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "grow", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		size := got.Status.Capacity[corev1.ResourceStorage]
		return size.Value() >= 2<<30 && len(got.Status.AllocatedResourceStatuses) == 0,
			fmt.Sprintf("capacity %s, resize status %v, conditions %v", size.String(), got.Status.AllocatedResourceStatuses, got.Status.Conditions), nil
	}); err != nil {
		return err
	}
	after, err := s.reportedSize(ctx, p, before+(512<<20))
	if err != nil {
		return err
	}
	r.note(s, "claim capacity 2Gi; the running pod sees %d bytes (was %d), no restart", after, before)
	if err := s.deletePod(ctx, ns, "sizer"); err != nil {
		return err
	}
	return s.deleteClaims(ctx, ns, "grow")
}

// reportedSize waits until the statfs pod has logged a size above min and
// returns it. The log is read on the pod's node, as kubelet writes it.
func (s *suite) reportedSize(ctx context.Context, p *corev1.Pod, min uint64) (uint64, error) {
	n := s.cluster.Node(p.Spec.NodeName)
	dir := n.NodePath(filepath.Join("/var/log/pods", p.Namespace+"_"+p.Name+"_"+string(p.UID), "workload"))
	var size uint64
	err := pollUntil(ctx, 2*time.Minute, func() (bool, string, error) {
		b, err := os.ReadFile(filepath.Join(dir, "0.log"))
		if err != nil {
			return false, err.Error(), nil
		}
		for _, l := range strings.Split(string(b), "\n") {
			if i := strings.Index(l, " size "); i >= 0 {
				if v, err := strconv.ParseUint(strings.TrimSpace(l[i+6:]), 10, 64); err == nil {
					size = v
				}
			}
		}
		return size > min, fmt.Sprintf("size %d", size), nil
	})
	return size, err
}
