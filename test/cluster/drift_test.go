package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

// Attachment drift (issue 19): an export rule or a LUN map removed on
// ONTAP by hand comes back without anyone touching Kubernetes. ontap-csi
// advertises LIST_VOLUMES_PUBLISHED_NODES and reads published nodes from
// ONTAP's rules and maps (docs/design/ontap-rest.md §9); every
// --reconcile-sync the real csi-attacher compares them with its
// VolumeAttachments and, for an attached one whose node is no longer
// listed, calls ControllerPublishVolume again (external-attacher v4.13.0
// pkg/controller/csi_handler.go, ReconcileVA: a forced sync; the
// VolumeAttachment's status is not changed), and the publish puts the rule
// or map back.

const (
	// attacherLease is the Lease csi-attacher's replicas elect a leader
	// on (csi-lib-utils names it after the driver).
	attacherLease = "external-attacher-leader-csi-trident-netapp-io"
	// defaultReconcileSync is csi-attacher v4.13.0's --reconcile-sync
	// default (cmd/csi-attacher/main.go), the period when deploy/ sets none.
	defaultReconcileSync = time.Minute
	// repairSlack is what the repair may take beyond one period: the
	// reconciler's period runs from the end of its last pass (wait.Until,
	// sliding), then ListVolumes, the forced publish, and a loaded machine.
	repairSlack = 45 * time.Second
)

// driftVolume is one of the scenario's volumes and what happened to it.
type driftVolume struct {
	kind, class string // "nas" or "san"
	mode        corev1.PersistentVolumeAccessMode
	pv          *corev1.PersistentVolume
	vol         string // the ONTAP volume
	va          string // the VolumeAttachment to the node
	keeper      *corev1.Pod
	// before is the rule or map as publish made it; removedAt, repairedAt
	// when the test deleted it and when ONTAP had it again.
	before                string
	removedAt, repairedAt time.Time
	seqAtRemoval          int
	lun                   int // san: the map's LUN ID before the removal
}

func (d *driftVolume) claim() string  { return d.kind }
func (d *driftVolume) handle() string { return d.pv.Spec.CSI.VolumeHandle }

// attachmentDrift: an NFS (ontap-nas) and an iSCSI (ontap-san) volume,
// each kept written by a pod on the first node; that node's export rule
// and LUN map deleted on ONTAP through its REST API, as an admin would.
// ListVolumes stops listing the node, the access is gone at the data plane
// (a new NFS mount is refused, an iSCSI scan does not see the LUN), and
// within csi-attacher's reconcile period the rule and the map are back,
// ListVolumes lists the node again and the volumes work: the keepers never
// stopped writing, and a new pod on the node writes a file (NFS: through a
// new mount, which the export policy must admit) that the test reads back
// through the keeper's mount.
//
// The first node: no other scenario of the storage group maps a LUN to it
// after its first seconds. A LUN map made to the node while this one is
// removed would take its LUN ID (ONTAP gives the lowest free one), and the
// repaired map would get another; the node plugin then refuses, rightly,
// to stage the other LUN over the device still in use at that address.
func attachmentDrift(ctx context.Context, s *suite, r *scenarioRun) error {
	ns, c := r.namespace, s.cluster.Client
	node := s.cluster.Node(s.firstNode())
	period, err := reconcileSyncOf(s.m)
	if err != nil {
		return err
	}
	// csi-attacher compares ListVolumes' node IDs with the one CSINode
	// gives for the VolumeAttachment's node.
	nodeID, err := s.csiNodeID(ctx, node.Name)
	if err != nil {
		return err
	}
	vols := []*driftVolume{
		{kind: "nas", class: nasClass, mode: corev1.ReadWriteMany},
		{kind: "san", class: sanClass, mode: corev1.ReadWriteOnce},
	}
	for _, d := range vols {
		if _, err := s.createClaim(ctx, claim(ns, d.claim(), d.class, d.mode, "1Gi"), false); err != nil {
			return err
		}
	}
	for _, d := range vols {
		pvc, err := s.waitBound(ctx, ns, d.claim(), bindTimeout)
		if err != nil {
			return err
		}
		if d.pv, err = c.CoreV1().PersistentVolumes().Get(ctx, pvc.Spec.VolumeName, metav1.GetOptions{}); err != nil {
			return err
		}
		d.vol = ontapVolume(d.pv.Name)
		p := workloadPod(ns, "keep-"+d.kind, node.Name, d.claim(), "keep", "--dir=/data", "--interval=200ms")
		if _, err := c.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, d := range vols {
		if err := waitPod(ctx, c, ns, "keep-"+d.kind, podTimeout, func(p *corev1.Pod) bool { d.keeper = p; return podReady(p) }); err != nil {
			return err
		}
		va, err := s.attachment(ctx, d.pv.Name, node.Name)
		if err != nil {
			return err
		}
		d.va = va.Name
		if d.before, err = s.nodeAccess(ctx, d, node); err != nil {
			return err
		}
		if d.before == "" {
			return fmt.Errorf("%s: ONTAP has no export rule or LUN map of %s for %s after the attach", d.kind, d.vol, node.Name)
		}
		if d.kind == "san" {
			if m, err := s.nodeMap(ctx, d.vol, node.Name); err == nil && m != nil {
				d.lun = m.Number
			}
		}
		r.note(s, "%s: %s (PV %s) used by %s on %s; VolumeAttachment %s attached %v, metadata %v; ONTAP: %s",
			d.kind, d.vol, d.pv.Name, d.keeper.Name, node.Name, va.Name, va.Status.Attached, va.Status.AttachmentMetadata, d.before)
	}
	// ListVolumes is called directly only if a controller's socket can be
	// reached from here; else csi-attacher's log is the only witness.
	direct := true
	if err := s.expectListed(ctx, vols, nodeID, true); err != nil {
		if !errors.Is(err, errUnreachable) {
			return err
		}
		direct = false
		r.note(s, "ListVolumes not called directly: %v", err)
	}
	if err := s.expectDataPlane(ctx, vols, node, true); err != nil {
		return err
	}
	leader, err := s.leaseHolder(ctx, attacherLease)
	if err != nil {
		leader = fmt.Sprintf("unknown (%v)", err)
	}
	r.note(s, "ListVolumes lists node ID %s for both; the data plane admits %s (NFS export, iSCSI LUN); csi-attacher's leader %s, --reconcile-sync %s",
		nodeID, node.Name, leader, period)

	// The admin's hand: both at once, so one reconcile pass sees both.
	for _, d := range vols {
		if d.seqAtRemoval, _, err = s.journalTail(ctx, node, d); err != nil {
			return err
		}
		if err := s.removeAccess(ctx, d, node); err != nil {
			return err
		}
		d.removedAt = time.Now()
		r.note(s, "%s: deleted on ONTAP by hand: %s (the keeper's journal at line %d)", d.kind, d.before, d.seqAtRemoval)
	}
	// At once, before a reconcile pass can have repaired it (one in a
	// period could fall in between; then ONTAP has it back already).
	listed := map[string][]string{}
	if direct {
		if listed, err = s.publishedNodes(ctx); err != nil {
			return err
		}
	}
	for _, d := range vols {
		if !direct {
			break
		}
		if slices.Contains(listed[d.handle()], nodeID) {
			if now, err := s.nodeAccess(ctx, d, node); err != nil || now == "" {
				return fmt.Errorf("%s: ListVolumes still lists %s for %s with its access removed on ONTAP (%v)", d.kind, nodeID, d.handle(), err)
			}
			r.note(s, "%s: repaired before ListVolumes could be asked", d.kind)
			continue
		}
		r.note(s, "%s: ListVolumes lists %v for %s: not %s", d.kind, listed[d.handle()], d.vol, nodeID)
	}
	if err := s.expectDataPlane(ctx, vols, node, false); err != nil {
		r.note(s, "the data plane during the drift: %v (repaired already?)", err)
	} else {
		r.note(s, "the data plane refuses %s: a new NFS mount of the export, an iSCSI scan for the LUN", node.Name)
	}

	// The repair: nothing but csi-attacher's reconciler and ontap-csi.
	deadline := period + repairSlack
	if err := pollUntil(ctx, deadline, func() (bool, string, error) {
		var waiting []string
		for _, d := range vols {
			if !d.repairedAt.IsZero() {
				continue
			}
			now, err := s.nodeAccess(ctx, d, node)
			if err != nil {
				return false, err.Error(), nil
			}
			if now == "" {
				waiting = append(waiting, d.kind)
				continue
			}
			d.repairedAt = time.Now()
			r.note(s, "%s: back on ONTAP %.1f s after the removal: %s", d.kind, d.repairedAt.Sub(d.removedAt).Seconds(), now)
		}
		return len(waiting) == 0, fmt.Sprintf("%v not repaired", waiting), nil
	}); err != nil {
		return fmt.Errorf("not repaired within csi-attacher's --reconcile-sync %s + %s: %w", period, repairSlack, err)
	}
	if direct {
		if err := s.expectListed(ctx, vols, nodeID, true); err != nil {
			return err
		}
	}
	if err := s.expectDataPlane(ctx, vols, node, true); err != nil {
		return err
	}
	r.note(s, "ListVolumes lists %s again for both; the data plane admits %s again", nodeID, node.Name)
	// Publish maps at the lowest free LUN ID, which is not the old one if
	// another LUN took it meanwhile. The shim's device keeps working at the
	// old address; a real host's would stay cut off (docs/migration.md).
	for _, d := range vols {
		if d.kind != "san" {
			continue
		}
		if m, err := s.nodeMap(ctx, d.vol, node.Name); err == nil && m != nil && m.Number != d.lun {
			r.note(s, "san: the map came back at LUN %d, not at its old LUN %d, where the node's device still is: a real host would need the volume staged again", m.Number, d.lun)
		}
	}
	for _, d := range vols {
		va, err := c.StorageV1().VolumeAttachments().Get(ctx, d.va, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if !va.Status.Attached || va.Status.AttachError != nil {
			return fmt.Errorf("%s: VolumeAttachment %s after the repair: attached %v, error %v", d.kind, va.Name, va.Status.Attached, va.Status.AttachError)
		}
		r.note(s, "%s: VolumeAttachment %s attached %v throughout (csi-attacher forces a sync, it does not mark it detached), metadata %v",
			d.kind, va.Name, va.Status.Attached, va.Status.AttachmentMetadata)
		for _, l := range firstLines(s.controllerLog(ctx, "csi-attacher", d.removedAt.Add(-time.Second), va.Name), 8) {
			r.note(s, "%s: csi-attacher: %s", d.kind, l)
		}
		for _, l := range firstLines(s.controllerLog(ctx, "ontap-csi", d.removedAt.Add(-time.Second), "publishing volume", d.handle()), 4) {
			r.note(s, "%s: ontap-csi: %s", d.kind, l)
		}
	}
	// Mismatches for other VolumeAttachments would mean ListVolumes
	// misreports them: the attacher would publish them again every period.
	// (One that is being attached or detached meanwhile mismatches for
	// a moment: those are expected.)
	var others []string
	for _, l := range s.controllerLog(ctx, "csi-attacher", r.from, "actual state do not match") {
		if !slices.ContainsFunc(vols, func(d *driftVolume) bool { return strings.Contains(l, d.va) }) {
			others = append(others, l)
		}
	}
	r.note(s, "csi-attacher's mismatches for other VolumeAttachments since the scenario began: %d", len(others))
	for _, l := range firstLines(others, 3) {
		r.note(s, "csi-attacher: %s", l)
	}
	if err := s.driftIO(ctx, r, vols, node); err != nil {
		return err
	}
	var pods []string
	for _, d := range vols {
		pods = append(pods, "keep-"+d.kind, "after-"+d.kind)
	}
	for _, p := range pods {
		if err := c.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{}); err != nil {
			return err
		}
	}
	for _, p := range pods {
		if err := waitPodGone(ctx, c, ns, p, podTimeout); err != nil {
			return err
		}
	}
	return s.deleteClaims(ctx, ns, "nas", "san")
}

// driftIO shows the volumes working after the repair: the keepers wrote
// all along (no restart: a failed write exits them) and after the repair;
// a new pod on the node writes a file, which the test reads through the
// keeper's mount.
func (s *suite) driftIO(ctx context.Context, r *scenarioRun, vols []*driftVolume, node *localcluster.Node) error {
	ns, c := r.namespace, s.cluster.Client
	data := map[string]string{}
	for _, d := range vols {
		data[d.kind] = "after-repair-" + token()
		if _, err := c.CoreV1().Pods(ns).Create(ctx, dataPod(ns, "after-"+d.kind, node.Name, d.claim(), "put", "after", data[d.kind]), metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	for _, d := range vols {
		if err := waitPod(ctx, c, ns, "after-"+d.kind, podTimeout, podReady); err != nil {
			return err
		}
		got, err := os.ReadFile(node.NodePath(filepath.Join(podVolumeMount(d.keeper, d.pv.Name), "after")))
		if err != nil {
			return fmt.Errorf("%s: reading the new pod's file through %s's mount: %w", d.kind, d.keeper.Name, err)
		}
		if string(got) != data[d.kind] {
			return fmt.Errorf("%s: %s's mount reads %q, the new pod wrote %q", d.kind, d.keeper.Name, got, data[d.kind])
		}
		p, err := c.CoreV1().Pods(ns).Get(ctx, d.keeper.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cs := range p.Status.ContainerStatuses {
			if cs.RestartCount > 0 {
				return fmt.Errorf("%s: %s restarted %d times (a write failed)", d.kind, p.Name, cs.RestartCount)
			}
		}
		if !podReady(p) {
			return fmt.Errorf("%s: %s is not Ready: %s", d.kind, p.Name, podState(p))
		}
		seq, last, err := s.journalTail(ctx, node, d)
		if err != nil {
			return err
		}
		if seq <= d.seqAtRemoval || !last.After(d.repairedAt) {
			return fmt.Errorf("%s: %s's journal ends at line %d written %s; at the removal it was %d, repaired at %s",
				d.kind, p.Name, seq, last.Format(time.RFC3339Nano), d.seqAtRemoval, d.repairedAt.Format(time.RFC3339Nano))
		}
		r.note(s, "%s: a new pod on %s wrote a file, read back through %s's mount; %s Ready, no restart, journal at line %d (%d since the removal), last write %s after the repair",
			d.kind, node.Name, p.Name, p.Name, seq, seq-d.seqAtRemoval, last.Sub(d.repairedAt).Round(time.Millisecond))
	}
	return nil
}

// csiNodeID is the driver's node ID in a node's CSINode.
func (s *suite) csiNodeID(ctx context.Context, node string) (string, error) {
	cn, err := s.cluster.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	for _, d := range cn.Spec.Drivers {
		if d.Name == driverName {
			return d.NodeID, nil
		}
	}
	return "", fmt.Errorf("CSINode %s has no %s", node, driverName)
}

// podVolumeMount is where kubelet mounts a pod's CSI volume on its node.
func podVolumeMount(p *corev1.Pod, pv string) string {
	return filepath.Join("/var/lib/kubelet/pods", string(p.UID), "volumes", "kubernetes.io~csi", pv, "mount")
}

// journalTail reads the keeper's journal through its mount on the node: the
// last line's number and time. A keeper just started may not have written
// its first line yet.
func (s *suite) journalTail(ctx context.Context, node *localcluster.Node, d *driftVolume) (int, time.Time, error) {
	var seq int
	var at time.Time
	var last error
	err := pollUntil(ctx, 30*time.Second, func() (bool, string, error) {
		var b []byte
		if b, last = os.ReadFile(node.NodePath(filepath.Join(podVolumeMount(d.keeper, d.pv.Name), "journal"))); last == nil {
			seq, at, last = lastJournalLine(b)
		}
		return last == nil, fmt.Sprint(last), nil
	})
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("%s: %s's journal: %w", d.kind, d.keeper.Name, last)
	}
	return seq, at, nil
}

// lastJournalLine parses the last complete line of a keeper's journal
// ("<seq> <RFC 3339 time> <pod>\n"); a line still being written is not
// complete.
func lastJournalLine(b []byte) (int, time.Time, error) {
	text := string(b)
	end := strings.LastIndexByte(text, '\n')
	if end < 0 {
		return 0, time.Time{}, fmt.Errorf("no complete line in the journal")
	}
	l, err := parseJournalLine(text[strings.LastIndexByte(text[:end], '\n')+1 : end])
	if err != nil {
		return 0, time.Time{}, fmt.Errorf("journal's last line: %w", err)
	}
	return l.seq, l.at, nil
}

// attachment waits for the VolumeAttachment of a PV to a node to be attached.
func (s *suite) attachment(ctx context.Context, pv, node string) (*storagev1.VolumeAttachment, error) {
	var got *storagev1.VolumeAttachment
	err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		vas, err := s.cluster.Client.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		for i, va := range vas.Items {
			if va.Spec.NodeName == node && ptr.Deref(va.Spec.Source.PersistentVolumeName, "") == pv && va.Status.Attached {
				got = &vas.Items[i]
				return true, "", nil
			}
		}
		return false, "no attached VolumeAttachment of " + pv + " to " + node, nil
	})
	return got, err
}

// exportRule is a rule of an export policy as ONTAP lists it.
type exportRule struct {
	Index   int `json:"index"`
	Clients []struct {
		Match string `json:"match"`
	} `json:"clients"`
}

// nodeAccess is what ONTAP holds that lets the node reach the volume: the
// export rule with the node's address (ontap-nas, autoExportPolicy: a
// policy named after the volume) or the LUN's map to the node's igroup
// (ontap-san); "" if none.
func (s *suite) nodeAccess(ctx context.Context, d *driftVolume, node *localcluster.Node) (string, error) {
	if d.kind == "nas" {
		id, rule, err := s.nodeRule(ctx, d.vol, node.IP)
		if err != nil || rule == nil {
			return "", err
		}
		return fmt.Sprintf("export policy %s (id %d) rule %d for %s", d.vol, id, rule.Index, node.IP), nil
	}
	m, err := s.nodeMap(ctx, d.vol, node.Name)
	if err != nil || m == nil {
		return "", err
	}
	return fmt.Sprintf("LUN map %s -> %s (LUN %d)", m.LUN.Name, m.Igroup.Name, m.Number), nil
}

// nodeRule finds the rule of the volume's export policy that names ip.
func (s *suite) nodeRule(ctx context.Context, vol, ip string) (int, *exportRule, error) {
	var policies []struct {
		ID    int          `json:"id"`
		Name  string       `json:"name"`
		Rules []exportRule `json:"rules"`
	}
	if err := s.ontap.getWhere(ctx, "/api/protocols/nfs/export-policies", "id,name,rules.index,rules.clients", url.Values{"name": {vol}}, &policies); err != nil {
		return 0, nil, err
	}
	for _, p := range policies {
		if p.Name != vol {
			continue // never another volume's policy, whatever the filter did
		}
		for i, r := range p.Rules {
			if slices.ContainsFunc(r.Clients, func(c struct {
				Match string `json:"match"`
			}) bool {
				return c.Match == ip
			}) {
				return p.ID, &p.Rules[i], nil
			}
		}
	}
	return 0, nil, nil
}

// lunMap is a LUN map as ONTAP lists it.
type lunMap struct {
	LUN    named `json:"lun"`
	Igroup named `json:"igroup"`
	Number int   `json:"logical_unit_number"`
}

// nodeMap finds the map of the volume's LUN to the node's igroup.
func (s *suite) nodeMap(ctx context.Context, vol, node string) (*lunMap, error) {
	var maps []lunMap
	if err := s.ontap.get(ctx, "/api/protocols/san/lun-maps", "lun.uuid,lun.name,igroup.uuid,igroup.name,logical_unit_number", &maps); err != nil {
		return nil, err
	}
	for i, m := range maps {
		if strings.HasPrefix(m.LUN.Name, "/vol/"+vol+"/") && strings.HasPrefix(m.Igroup.Name, node+"-") {
			return &maps[i], nil
		}
	}
	return nil, nil
}

// removeAccess deletes the node's export rule or LUN map with ONTAP's REST
// API, as an admin would with the CLI.
func (s *suite) removeAccess(ctx context.Context, d *driftVolume, node *localcluster.Node) error {
	if d.kind == "nas" {
		id, rule, err := s.nodeRule(ctx, d.vol, node.IP)
		if err != nil || rule == nil {
			return fmt.Errorf("nas: no export rule of %s for %s to remove (%v)", d.vol, node.IP, err)
		}
		return s.ontap.delete(ctx, fmt.Sprintf("/api/protocols/nfs/export-policies/%d/rules/%d", id, rule.Index))
	}
	m, err := s.nodeMap(ctx, d.vol, node.Name)
	if err != nil || m == nil {
		return fmt.Errorf("san: no LUN map of %s for %s to remove (%v)", d.vol, node.Name, err)
	}
	return s.ontap.delete(ctx, "/api/protocols/san/lun-maps/"+m.LUN.UUID+"/"+m.Igroup.UUID)
}

// expectDataPlane checks what the node gets from the simulator's data
// plane, which the NFS and iSCSI shims ask on every mount and scan: the
// NFS export admits the node's address, the iSCSI target shows the LUN to
// the node's initiator; or, with !want, neither.
func (s *suite) expectDataPlane(ctx context.Context, vols []*driftVolume, node *localcluster.Node, want bool) error {
	for _, d := range vols {
		va, err := s.cluster.Client.StorageV1().VolumeAttachments().Get(ctx, d.va, metav1.GetOptions{})
		if err != nil {
			return err
		}
		md := va.Status.AttachmentMetadata
		var got bool
		if d.kind == "nas" {
			q := url.Values{"server": {md["nfsServerIp"]}, "client": {node.IP}, "path": {md["nfsPath"]}}
			status, body, err := s.simGet(ctx, "/sim/nfs/export?"+q.Encode())
			if err != nil {
				return err
			}
			if status != http.StatusOK && status != http.StatusForbidden {
				return fmt.Errorf("nas: simulator: %d %s", status, body)
			}
			got = status == http.StatusOK
		} else {
			// Seen through any of the portals publish gave.
			for i := 1; md["p"+strconv.Itoa(i)] != ""; i++ {
				q := url.Values{"initiator": {nodeIQN(node.Name)}, "portal": {md["p"+strconv.Itoa(i)]}, "target": {md["iscsiTargetIqn"]}}
				status, body, err := s.simGet(ctx, "/sim/iscsi/luns?"+q.Encode())
				if err != nil {
					return err
				}
				if status != http.StatusOK {
					return fmt.Errorf("san: simulator: %d %s", status, body)
				}
				var sess struct {
					LUNs []struct {
						Path string `json:"path"`
					} `json:"luns"`
				}
				if err := json.Unmarshal(body, &sess); err != nil {
					return err
				}
				got = got || slices.ContainsFunc(sess.LUNs, func(l struct {
					Path string `json:"path"`
				}) bool {
					return strings.HasPrefix(l.Path, "/vol/"+d.vol+"/")
				})
			}
		}
		if got != want {
			return fmt.Errorf("%s: the data plane admits %s to %s: %v, want %v", d.kind, node.Name, d.vol, got, want)
		}
	}
	return nil
}

// simGet asks the simulator's data plane (not ONTAP's API: no auth).
func (s *suite) simGet(ctx context.Context, pathQuery string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, s.ontap.base+pathQuery, nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := s.ontap.http.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, body, err
}

// expectListed checks that ontap-csi's ListVolumes lists (or not) the node
// for every volume.
func (s *suite) expectListed(ctx context.Context, vols []*driftVolume, node string, want bool) error {
	listed, err := s.publishedNodes(ctx)
	if err != nil {
		return err
	}
	for _, d := range vols {
		if got := slices.Contains(listed[d.handle()], node); got != want {
			return fmt.Errorf("%s: ListVolumes lists %v for %s, want %s listed: %v", d.kind, listed[d.handle()], d.handle(), node, want)
		}
	}
	return nil
}

// publishedNodes calls ontap-csi's ListVolumes, as csi-attacher does,
// over every page: published node IDs by volume ID. It dials a controller
// pod's CSI socket (the emptyDir it shares with the sidecars) from the
// host through the node's root; a pod that does not answer (scenario 6
// kills one) is passed over.
func (s *suite) publishedNodes(ctx context.Context) (map[string][]string, error) {
	var out map[string][]string
	var last error
	err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		pods, err := s.controllerPods(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range pods {
			if out, last = s.listVolumesOf(ctx, p); last == nil {
				return true, "", nil
			}
		}
		return false, fmt.Sprintf("no controller answered ListVolumes (%v)", last), nil
	})
	if err != nil {
		return nil, fmt.Errorf("%w: %v", errUnreachable, err)
	}
	return out, nil
}

// errUnreachable: no controller pod's ListVolumes answered.
var errUnreachable = errors.New("no controller's ListVolumes reachable")

// controllerPods are the controller Deployment's running pods.
func (s *suite) controllerPods(ctx context.Context) ([]corev1.Pod, error) {
	sel := metav1.FormatLabelSelector(s.m.Controller.Spec.Selector)
	l, err := s.cluster.Client.CoreV1().Pods(s.m.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return nil, err
	}
	var out []corev1.Pod
	for _, p := range l.Items {
		if p.Status.Phase == corev1.PodRunning && p.DeletionTimestamp == nil && s.cluster.Node(p.Spec.NodeName) != nil {
			out = append(out, p)
		}
	}
	return out, nil
}

func (s *suite) listVolumesOf(ctx context.Context, p corev1.Pod) (map[string][]string, error) {
	sock := s.cluster.Node(p.Spec.NodeName).NodePath(filepath.Join("/var/lib/kubelet/pods", string(p.UID), "volumes/kubernetes.io~empty-dir/socket-dir/csi.sock"))
	// A unix socket's path may not exceed 107 bytes; a link's target may.
	dir, err := os.MkdirTemp("", "lv")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	link := filepath.Join(dir, "csi.sock")
	if err := os.Symlink(sock, link); err != nil {
		return nil, err
	}
	conn, err := grpc.NewClient("unix://"+link, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return nil, err
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	cc := csi.NewControllerClient(conn)
	out := map[string][]string{}
	tok := ""
	for {
		resp, err := cc.ListVolumes(ctx, &csi.ListVolumesRequest{StartingToken: tok})
		if err != nil {
			return nil, fmt.Errorf("ListVolumes on %s: %w", p.Name, err)
		}
		for _, e := range resp.GetEntries() {
			out[e.GetVolume().GetVolumeId()] = e.GetStatus().GetPublishedNodeIds()
		}
		if tok = resp.GetNextToken(); tok == "" {
			return out, nil
		}
	}
}

// reconcileSyncOf is csi-attacher's --reconcile-sync in the rendered
// controller Deployment, or its default.
func reconcileSyncOf(m *manifests) (time.Duration, error) {
	for _, c := range m.Controller.Spec.Template.Spec.Containers {
		if c.Name == "csi-attacher" {
			return flagDuration(c.Args, "--reconcile-sync", defaultReconcileSync)
		}
	}
	return 0, fmt.Errorf("the controller Deployment has no csi-attacher")
}

// flagDuration is the value of a duration flag in args (--name=value or
// --name value), or def.
func flagDuration(args []string, name string, def time.Duration) (time.Duration, error) {
	for i, a := range args {
		v, ok := strings.CutPrefix(a, name+"=")
		if !ok && a == name && i+1 < len(args) {
			v, ok = args[i+1], true
		}
		if ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				return 0, fmt.Errorf("%s %q: %w", name, v, err)
			}
			return d, nil
		}
	}
	return def, nil
}

// controllerLog returns the lines of a container of every controller pod
// (as kubelet wrote them on the pod's node) logged from since on that
// contain all the words, each as "<pod> <time> <message>".
func (s *suite) controllerLog(ctx context.Context, container string, since time.Time, words ...string) []string {
	sel := metav1.FormatLabelSelector(s.m.Controller.Spec.Selector)
	l, err := s.cluster.Client.CoreV1().Pods(s.m.Namespace).List(ctx, metav1.ListOptions{LabelSelector: sel})
	if err != nil {
		return []string{"listing controller pods: " + err.Error()}
	}
	var out []string
	for _, p := range l.Items {
		n := s.cluster.Node(p.Spec.NodeName)
		if n == nil {
			continue
		}
		dir := n.NodePath(filepath.Join("/var/log/pods", p.Namespace+"_"+p.Name+"_"+string(p.UID), container))
		files, _ := filepath.Glob(filepath.Join(dir, "*.log"))
		for _, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				continue
			}
			for _, line := range criLogLines(b, since, words...) {
				out = append(out, p.Name+" "+line)
			}
		}
	}
	slices.Sort(out)
	return out
}

// firstLines keeps the first n lines, and says how many more there were.
func firstLines(lines []string, n int) []string {
	if len(lines) <= n {
		return lines
	}
	return append(lines[:n:n], fmt.Sprintf("(%d more lines)", len(lines)-n))
}

// criLogLines picks the lines of a CRI log file ("<RFC 3339 time> <stream>
// <tag> <message>") logged from since on whose message contains all the
// words, as "<time of day> <message>" (long messages cut).
func criLogLines(b []byte, since time.Time, words ...string) []string {
	var out []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.SplitN(sc.Text(), " ", 4)
		if len(f) != 4 {
			continue
		}
		at, err := time.Parse(time.RFC3339Nano, f[0])
		if err != nil || at.Before(since) {
			continue
		}
		msg := f[3]
		if !slices.ContainsFunc(words, func(w string) bool { return !strings.Contains(msg, w) }) {
			out = append(out, at.UTC().Format("15:04:05.000")+" "+oneLine(msg))
		}
	}
	return out
}
