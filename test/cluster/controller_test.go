package cluster_test

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

const failoverClaims = 20

// provisionerLease is the Lease csi-provisioner's replicas elect a leader
// on (csi-lib-utils names it after the driver).
const provisionerLease = "csi-trident-netapp-io"

// controllerFailover (6): with the controller Deployment's two replicas,
// 20 claims are created at once and the provisioning leader's pod is
// killed (deleted with no grace) as soon as the first is bound. Every
// claim must end Bound, with one ONTAP volume each: no duplicate, no
// orphan.
func controllerFailover(ctx context.Context, s *suite, r *scenarioRun) error {
	ns, c := r.namespace, s.cluster.Client
	leader, err := s.leaseHolder(ctx, provisionerLease)
	if err != nil {
		return err
	}
	r.note(s, "provisioning leader: %s", leader)
	for i := 0; i < failoverClaims; i++ {
		if _, err := s.createClaim(ctx, claim(ns, fmt.Sprintf("c%02d", i), nasClass, corev1.ReadWriteMany, "1Gi"), false); err != nil {
			return err
		}
	}
	bound := 0
	if err := pollUntil(ctx, bindTimeout, func() (bool, string, error) {
		var err error
		bound, err = boundClaims(ctx, s, ns)
		return bound > 0, fmt.Sprintf("%d bound", bound), err
	}); err != nil {
		return err
	}
	if err := c.CoreV1().Pods(s.m.Namespace).Delete(ctx, leader, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		return err
	}
	r.note(s, "killed the leader %s with %d of %d claims bound", leader, bound, failoverClaims)
	start := time.Now()
	if err := pollUntil(ctx, 3*time.Minute, func() (bool, string, error) {
		var err error
		bound, err = boundClaims(ctx, s, ns)
		return bound == failoverClaims, fmt.Sprintf("%d of %d bound", bound, failoverClaims), err
	}); err != nil {
		return err
	}
	next, err := s.leaseHolder(ctx, provisionerLease)
	if err != nil {
		return err
	}
	r.note(s, "all %d claims bound %s after the kill; new leader %s", failoverClaims, time.Since(start).Round(time.Second), next)
	if err := s.checkOneVolumePerClaim(ctx, ns); err != nil {
		return err
	}
	r.note(s, "ONTAP holds exactly one volume per claim: no duplicate, no orphan")
	var names []string
	for i := 0; i < failoverClaims; i++ {
		names = append(names, fmt.Sprintf("c%02d", i))
	}
	if err := s.deleteClaims(ctx, ns, names...); err != nil {
		return err
	}
	return s.waitControllerReady(ctx)
}

func boundClaims(ctx context.Context, s *suite, ns string) (int, error) {
	l, err := s.cluster.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return 0, err
	}
	n := 0
	for _, p := range l.Items {
		if p.Status.Phase == corev1.ClaimBound {
			s.boundPV(ns, p.Spec.VolumeName)
			n++
		}
	}
	return n, nil
}

// checkOneVolumePerClaim compares the claims of a namespace with ONTAP:
// every claim has exactly the volume named after its PV, and no volume is
// named after one of the claims without being its PV. Other scenarios'
// volumes, created and deleted at the same time, are not looked at.
func (s *suite) checkOneVolumePerClaim(ctx context.Context, ns string) error {
	claims, err := s.cluster.Client.CoreV1().PersistentVolumeClaims(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	objs, err := s.ontap.objects(ctx)
	if err != nil {
		return err
	}
	var problems []string
	for _, c := range claims.Items {
		// The provisioner names the PV, and so the volume, after the claim.
		uid := strings.ReplaceAll(string(c.UID), "-", "_")
		vols := objs.with("volume e2e_pvc_" + uid)
		want := "volume " + ontapVolume(c.Spec.VolumeName)
		if len(vols) != 1 || vols[0] != want {
			problems = append(problems, fmt.Sprintf("claim %s (PV %s): ONTAP volumes %v", c.Name, c.Spec.VolumeName, vols))
		}
	}
	sort.Strings(problems)
	if len(problems) > 0 {
		return fmt.Errorf("not one volume per claim: %s", strings.Join(problems, "; "))
	}
	return nil
}

// leaseHolder is the pod holding a Lease in the controller's namespace.
func (s *suite) leaseHolder(ctx context.Context, name string) (string, error) {
	var holder string
	err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		l, err := s.cluster.Client.CoordinationV1().Leases(s.m.Namespace).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		holder = ptr.Deref(l.Spec.HolderIdentity, "")
		if holder == "" {
			return false, "no holder", nil
		}
		_, err = s.cluster.Client.CoreV1().Pods(s.m.Namespace).Get(ctx, holder, metav1.GetOptions{})
		return err == nil, "holder " + holder + " is not a pod", nil
	})
	return holder, err
}

// waitControllerReady waits until the controller Deployment has all its
// replicas ready again.
func (s *suite) waitControllerReady(ctx context.Context) error {
	return pollUntil(ctx, 3*time.Minute, func() (bool, string, error) {
		d, err := s.cluster.Client.AppsV1().Deployments(s.m.Namespace).Get(ctx, s.m.Controller.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		want := ptr.Deref(d.Spec.Replicas, 1)
		return d.Status.ReadyReplicas == want && d.Status.UpdatedReplicas == want && d.Status.Replicas == want,
			fmt.Sprintf("%d/%d ready", d.Status.ReadyReplicas, want), nil
	})
}

// drainAndDelete (8): the last node is cordoned, its pods evicted (as
// kubectl drain --ignore-daemonsets), which detaches its volumes; then the
// machine goes (its kubelet and containers stopped) and its Node is
// deleted. Its igroup and its address in export policies must be gone
// once nothing uses them.
func drainAndDelete(ctx context.Context, s *suite, r *scenarioRun) error {
	n, c := s.cluster.Node(s.lastNode()), s.cluster.Client
	pvc, err := s.createClaim(ctx, claim(r.namespace, "on-"+n.Name, sanClass, corev1.ReadWriteOnce, "1Gi"), true)
	if err != nil {
		return err
	}
	if _, err := s.startPod(ctx, dataPod(r.namespace, "iscsi-user", n.Name, pvc.Name, "put", "f", token())); err != nil {
		return err
	}
	before, err := s.ontap.objects(ctx)
	if err != nil {
		return err
	}
	held := append(before.with("igroup "+n.Name+"-"), before.with("export-policy", n.IP)...)
	if len(held) == 0 {
		return fmt.Errorf("nothing on ONTAP names %s before the drain", n.Name)
	}
	r.note(s, "before the drain, ONTAP holds for %s: %v", n.Name, held)
	if err := s.drain(ctx, n.Name); err != nil {
		return err
	}
	if _, err := s.waitOntap(ctx, false, "igroup "+n.Name+"-"); err != nil {
		return err
	}
	if _, err := s.waitOntap(ctx, false, "export-policy", n.IP); err != nil {
		return err
	}
	r.note(s, "drained: %s's igroup deleted and its address in no export policy", n.Name)
	s.obs.nodeGone(n.Name)
	n.StopKubelet()
	if out, err := n.Ctr(ctx, "tasks", "ls", "-q"); err == nil {
		for _, id := range strings.Fields(string(out)) {
			_, _ = n.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
		}
	}
	if err := c.CoreV1().Nodes().Delete(ctx, n.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	r.note(s, "kubelet and containers of %s stopped, Node deleted", n.Name)
	return s.deleteClaims(ctx, r.namespace, pvc.Name)
}

// drain cordons a node and evicts every pod on it that a DaemonSet does
// not own, and waits until they are gone; the workload there stops first.
func (s *suite) drain(ctx context.Context, node string) error {
	c := s.cluster.Client
	if _, err := c.CoreV1().Nodes().Patch(ctx, node, "application/merge-patch+json", []byte(`{"spec":{"unschedulable":true}}`), metav1.PatchOptions{}); err != nil {
		return err
	}
	for _, w := range s.wl {
		if w.node.Name == node {
			w.stop()
		}
	}
	pods, err := c.CoreV1().Pods("").List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node})
	if err != nil {
		return err
	}
	var evicted []corev1.Pod
	for _, p := range pods.Items {
		if owner := metav1.GetControllerOf(&p); owner != nil && owner.Kind == "DaemonSet" {
			continue
		}
		if err := evict(ctx, s, p); err != nil {
			return err
		}
		evicted = append(evicted, p)
		s.obs.addRecord(record{At: time.Now(), Source: "test", Namespace: p.Namespace, Text: "evicted " + p.Namespace + "/" + p.Name})
	}
	for _, p := range evicted {
		if err := waitPodGone(ctx, c, p.Namespace, p.Name, podTimeout); err != nil {
			return err
		}
	}
	return nil
}

// evict asks the API to evict a pod, as kubectl drain does.
func evict(ctx context.Context, s *suite, p corev1.Pod) error {
	return s.cluster.Client.CoreV1().Pods(p.Namespace).EvictV1(ctx, &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: p.Name, Namespace: p.Namespace},
	})
}
