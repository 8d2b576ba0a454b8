package cluster_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

// outOfServiceTaint is what an admin puts on a node known to be down, for
// Kubernetes' non-graceful node shutdown (docs/design/fencing.md §1).
var outOfServiceTaint = corev1.Taint{Key: "node.kubernetes.io/out-of-service", Value: "nodeshutdown", Effect: corev1.TaintEffectNoExecute}

// nodeFailover (issue 21): a StatefulSet's pod writes to an iSCSI volume on
// node A; A's kubelet and node plugin are killed, its pod's container keeps
// writing (a hung or partitioned node, the case fencing exists for); A goes
// NotReady and the admin taints it out-of-service. Kubernetes force-deletes
// the pod and force-detaches the volume; ontap-csi's ControllerUnpublish
// fences A on ONTAP (its LUN map goes, and is read back) before the volume
// may attach to B; the pod starts on B with the data. A's writer goes on
// writing after the fence, and none of it reaches the LUN: the simulator's
// file data plane cuts a host off a LUN when its map goes (cut-on-unmap,
// test/ontapsim/cut.go), as a real array stops serving it. Then A comes
// back: its kubelet and plugin clean up the stale mounts and the iSCSI
// device, and the admin removes the taint.
func nodeFailover(ctx context.Context, s *suite, r *scenarioRun) error {
	ns, c := r.namespace, s.cluster.Client
	a, b := s.cluster.Node(s.lastNode()), s.cluster.Node(s.firstNode())
	if err := s.setCutOnUnmap(ctx, true); err != nil {
		return err
	}
	defer s.setCutOnUnmap(context.WithoutCancel(ctx), false)
	// A's workload goes down with A: its keepers would be evicted too.
	for _, w := range s.wl {
		if w.node.Name == a.Name {
			w.stop()
		}
	}
	if _, err := c.AppsV1().StatefulSets(ns).Create(ctx, failoverStatefulSet(ns, a.Name), metav1.CreateOptions{}); err != nil {
		return err
	}
	var first *corev1.Pod
	if err := pollUntil(ctx, podTimeout, func() (bool, string, error) {
		p, err := c.CoreV1().Pods(ns).Get(ctx, "db-0", metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		first = p
		return podReady(p), podState(p), nil
	}); err != nil {
		return fmt.Errorf("db-0 did not start: %w", err)
	}
	if first.Spec.NodeName != a.Name {
		return fmt.Errorf("db-0 started on %s, not on %s (its preferred node)", first.Spec.NodeName, a.Name)
	}
	pvc, err := c.CoreV1().PersistentVolumeClaims(ns).Get(ctx, "data-db-0", metav1.GetOptions{})
	if err != nil {
		return err
	}
	pv, vol := pvc.Spec.VolumeName, ontapVolume(pvc.Spec.VolumeName)
	aJournal := a.NodePath(filepath.Join(podVolumeMount(first, pv), "journal"))
	if err := pollUntil(ctx, 30*time.Second, func() (bool, string, error) {
		lines, err := readJournal(aJournal)
		return err == nil && len(lines) > 0, fmt.Sprint(err), nil
	}); err != nil {
		return fmt.Errorf("db-0's journal on %s: %w", a.Name, err)
	}
	r.note(s, "db-0 writes its journal on %s (PV %s, ONTAP volume %s)", a.Name, pv, vol)

	// A dies: its plugin and kubelet are killed, its containers run on.
	plugin, err := s.ds.pluginPod(ctx, a.Name)
	if err != nil {
		return err
	}
	cs, err := pluginContainer(plugin)
	if err != nil {
		return err
	}
	if _, err := a.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", strings.TrimPrefix(cs.ContainerID, "containerd://")); err != nil {
		return err
	}
	a.KillKubelet()
	killed := time.Now()
	r.note(s, "%s: node plugin and kubelet SIGKILLed; db-0's container keeps writing", a.Name)
	done := false
	defer func() {
		// Whatever happened, A gets its kubelet back and loses the taint,
		// so the scenarios after this one find two nodes; a scenario that
		// failed half-way takes its StatefulSet and claim with it.
		bg := context.WithoutCancel(ctx)
		if exited, _ := a.Kubelet.Exited(); exited {
			_ = a.StartKubelet()
		}
		_ = s.setTaint(bg, a.Name, false)
		if !done {
			_ = c.AppsV1().StatefulSets(ns).Delete(bg, "db", metav1.DeleteOptions{})
			_ = waitPodGone(bg, c, ns, "db-0", podTimeout)
			_ = s.deleteClaims(bg, ns, "data-db-0")
		}
	}()

	if err := pollUntil(ctx, 3*time.Minute, func() (bool, string, error) {
		n, err := c.CoreV1().Nodes().Get(ctx, a.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return !nodeReady(n), "still Ready", nil
	}); err != nil {
		return fmt.Errorf("%s never went NotReady: %w", a.Name, err)
	}
	r.note(s, "%s NotReady %s after the kill", a.Name, time.Since(killed).Round(time.Second))
	if err := s.setTaint(ctx, a.Name, true); err != nil {
		return err
	}
	tainted := time.Now()
	r.note(s, "%s tainted %s=%s:%s", a.Name, outOfServiceTaint.Key, outOfServiceTaint.Value, outOfServiceTaint.Effect)

	m, err := s.watchFailover(ctx, r, pv, first, a.Name, b.Name)
	if err != nil {
		return err
	}
	second := m.pod

	// The fence: A's map of the LUN cut before the volume attached to B.
	cut, err := s.cutOf(ctx, vol, a.Name)
	if err != nil {
		return err
	}
	r.note(s, "fence: the map of %s to %s went %s after the taint (cut on the data plane at %s)",
		cut.LUN, cut.Igroup, cut.At.Sub(tainted).Round(time.Millisecond), cut.At.Format("15:04:05.000"))
	if !cut.At.Before(m.vaB) {
		return fmt.Errorf("the VolumeAttachment to %s appeared at %s, before %s was fenced (%s)",
			b.Name, m.vaB.Format("15:04:05.000"), a.Name, cut.At.Format("15:04:05.000"))
	}
	if am, err := s.nodeMap(ctx, vol, a.Name); err != nil || am != nil {
		return fmt.Errorf("after the fence ONTAP still maps %s to %s: %v %v", vol, a.Name, am, err)
	}
	bm, err := s.nodeMap(ctx, vol, b.Name)
	if err != nil || bm == nil {
		return fmt.Errorf("ONTAP does not map %s to %s: %v", vol, b.Name, err)
	}
	r.note(s, "ONTAP: no map of the LUN to %s; %s -> %s (LUN %d)", a.Name, bm.LUN.Name, bm.Igroup.Name, bm.Number)

	// No write of A's after the fence reached the LUN, though A went on.
	bJournal := b.NodePath(filepath.Join(podVolumeMount(second, pv), "journal"))
	var onLUN []journalLine
	if err := pollUntil(ctx, 30*time.Second, func() (bool, string, error) {
		onLUN, err = readJournal(bJournal)
		return err == nil && len(onLUN) > 0 && onLUN[len(onLUN)-1].writer == "db-0@"+b.Name, fmt.Sprint(err), nil
	}); err != nil {
		return fmt.Errorf("db-0's journal on %s: %w; %d lines read; %s", b.Name, err, len(onLUN), s.workloadExit(ctx, ns, "db-0"))
	}
	lastA, fromA := lastOf(onLUN, "db-0@"+a.Name)
	if fromA == 0 {
		return fmt.Errorf("the LUN holds no line db-0 wrote on %s: the data did not move", a.Name)
	}
	if lastA.at.After(cut.At) {
		return fmt.Errorf("the LUN holds line %d written on %s at %s, after the fence at %s",
			lastA.seq, a.Name, lastA.at.Format("15:04:05.000"), cut.At.Format("15:04:05.000"))
	}
	zombie, err := readJournal(aJournal)
	if err != nil {
		return fmt.Errorf("db-0's journal through %s's stale mount: %w", a.Name, err)
	}
	lastZ, _ := lastOf(zombie, "db-0@"+a.Name)
	after := 0
	for _, l := range zombie {
		if l.writer == "db-0@"+a.Name && l.at.After(cut.At) {
			after++
		}
	}
	r.note(s, "the LUN holds %d lines written on %s, the last (%d) at %s, before the fence; %s's container wrote %d more after it (last %d at %s), none on the LUN; %s continues at %d",
		fromA, a.Name, lastA.seq, lastA.at.Format("15:04:05.000"), a.Name, after, lastZ.seq, lastZ.at.Format("15:04:05.000"),
		b.Name, onLUN[len(onLUN)-1].seq)

	// A comes back and cleans up before the taint goes.
	oldContainer := ""
	if len(first.Status.ContainerStatuses) > 0 {
		oldContainer = strings.TrimPrefix(first.Status.ContainerStatuses[0].ContainerID, "containerd://")
	}
	if oldContainer == "" {
		return fmt.Errorf("db-0 on %s had no container ID", a.Name)
	}
	if err := a.StartKubelet(); err != nil {
		return err
	}
	back := time.Now()
	if err := waitPod(ctx, c, s.ds.ns(), plugin.Name, rolloutTimeout, func(p *corev1.Pod) bool {
		pc, err := pluginContainer(p)
		return err == nil && pc.RestartCount > cs.RestartCount && podReady(p)
	}); err != nil {
		return fmt.Errorf("%s's node plugin did not come back: %w", a.Name, err)
	}
	r.markDown(a.Name, killed, time.Now())
	r.note(s, "%s: kubelet started; node plugin Ready %s later", a.Name, time.Since(back).Round(time.Second))
	// The plugin cleans what was fenced before it registers
	// (docs/design/fencing.md §4): its log says which volumes.
	line, err := s.pluginLogLine(ctx, plugin.Name, cs.Name, "cleaned the volumes no longer attached to this node before registering")
	if err != nil {
		return err
	}
	r.note(s, "%s's plugin, before registering: %s", a.Name, line)
	if !strings.Contains(line, pv) {
		// db-0's old container may still run on A and hold the volume:
		// kubelet kills it only once it has started, racing the
		// plugin's cleanup. The plugin then leaves the volume to
		// kubelet's unpublish and unstage rather than force it
		// (docs/design/fencing.md §4), and the checks below show they
		// finish it. Any other reason is a failure.
		left, err := s.pluginLogLine(ctx, plugin.Name, cs.Name, "stale volume not cleaned", "device is in use", pv)
		if err != nil {
			return fmt.Errorf("%s's plugin neither cleaned %s before registering (%s) nor left it, in use, to kubelet: %w", a.Name, pv, line, err)
		}
		r.note(s, "%s's plugin left %s to kubelet, its device still in use by db-0's old container: %s", a.Name, pv, left)
	}
	if err := pollUntil(ctx, 3*time.Minute, func() (bool, string, error) {
		left, err := s.leftOn(ctx, a, pv, bm.LUN.UUID)
		if err != nil {
			return false, err.Error(), nil
		}
		if tasks, err := a.Ctr(ctx, "tasks", "ls", "-q"); err != nil || strings.Contains(string(tasks), oldContainer) {
			left = strings.TrimPrefix(left+", db-0's old container still runs", ", ")
		}
		return left == "", left, nil
	}); err != nil {
		return fmt.Errorf("%s did not clean up: %w", a.Name, err)
	}
	r.note(s, "%s cleaned up %s after its kubelet started: no mount of the PV, no iSCSI device of the LUN, db-0's old container gone", a.Name, time.Since(back).Round(time.Second))
	if err := s.setTaint(ctx, a.Name, false); err != nil {
		return err
	}
	r.note(s, "%s untainted", a.Name)
	tail, err := readJournal(bJournal)
	if err != nil || len(tail) == 0 || tail[len(tail)-1].seq <= onLUN[len(onLUN)-1].seq {
		return fmt.Errorf("db-0 on %s stopped writing while %s came back (%v)", b.Name, a.Name, err)
	}
	done = true
	if err := c.AppsV1().StatefulSets(ns).Delete(ctx, "db", metav1.DeleteOptions{}); err != nil {
		return err
	}
	if err := waitPodGone(ctx, c, ns, "db-0", podTimeout); err != nil {
		return err
	}
	return s.deleteClaims(ctx, ns, "data-db-0")
}

// failoverStatefulSet is one replica that prefers node, writing a journal
// whose lines name the node they were written on.
func failoverStatefulSet(ns, node string) *appsv1.StatefulSet {
	labels := map[string]string{"app": "db"}
	pod := workloadPod(ns, "", "", "", "keep", "--dir=/data", "--interval=200ms")
	spec := pod.Spec
	spec.NodeName = ""
	spec.Volumes = nil
	spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "NODE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "POD_NAME", Value: "$(NAME)@$(NODE)"},
	}
	spec.Affinity = &corev1.Affinity{NodeAffinity: &corev1.NodeAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.PreferredSchedulingTerm{{Weight: 100, Preference: corev1.NodeSelectorTerm{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{node}}},
		}}},
	}}
	return &appsv1.StatefulSet{
		ObjectMeta: metav1.ObjectMeta{Name: "db", Namespace: ns},
		Spec: appsv1.StatefulSetSpec{
			Replicas:    ptr.To[int32](1),
			ServiceName: "db",
			Selector:    &metav1.LabelSelector{MatchLabels: labels},
			Template:    corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
			VolumeClaimTemplates: []corev1.PersistentVolumeClaim{{
				ObjectMeta: metav1.ObjectMeta{Name: "data"},
				Spec: corev1.PersistentVolumeClaimSpec{
					AccessModes:      []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
					StorageClassName: ptr.To(sanClass),
					Resources:        corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("1Gi")}},
				},
			}},
		},
	}
}

// failoverMoves is when the API showed each step of the move.
type failoverMoves struct {
	pod                    *corev1.Pod // db-0 on the other node, Ready
	oldGone, vaAGone, vaB  time.Time
	podScheduled, podReady time.Time
}

// watchFailover follows the move every 200 ms until db-0 is Ready on to:
// the old pod deleted, the VolumeAttachment to from gone, the one to to
// created, the new pod scheduled and Ready.
func (s *suite) watchFailover(ctx context.Context, r *scenarioRun, pv string, old *corev1.Pod, from, to string) (failoverMoves, error) {
	c := s.cluster.Client
	var m failoverMoves
	mark := func(at *time.Time, format string, args ...any) {
		if at.IsZero() {
			*at = time.Now()
			r.note(s, format, args...)
		}
	}
	ctx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	for {
		if p, err := c.CoreV1().Pods(r.namespace).Get(ctx, "db-0", metav1.GetOptions{}); err == nil {
			if p.UID != old.UID {
				mark(&m.oldGone, "db-0 of %s deleted", from)
				if p.Spec.NodeName != "" {
					mark(&m.podScheduled, "db-0 scheduled on %s", p.Spec.NodeName)
					if p.Spec.NodeName != to {
						return m, fmt.Errorf("db-0 scheduled on %s, not %s", p.Spec.NodeName, to)
					}
				}
				if podReady(p) {
					mark(&m.podReady, "db-0 Ready on %s", to)
					m.pod = p
				}
			}
		}
		if vas, err := c.StorageV1().VolumeAttachments().List(ctx, metav1.ListOptions{}); err == nil {
			onFrom := false
			for _, va := range vas.Items {
				if ptr.Deref(va.Spec.Source.PersistentVolumeName, "") != pv {
					continue
				}
				switch va.Spec.NodeName {
				case from:
					onFrom = true
				case to:
					mark(&m.vaB, "VolumeAttachment %s to %s created", va.Name, to)
				}
			}
			if !onFrom {
				mark(&m.vaAGone, "VolumeAttachment to %s gone (ControllerUnpublish done)", from)
			}
		}
		if m.pod != nil {
			return m, nil
		}
		select {
		case <-ctx.Done():
			return m, fmt.Errorf("db-0 not Ready on %s: %w", to, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// setCutOnUnmap turns the simulator's cut-on-unmap on or off.
func (s *suite) setCutOnUnmap(ctx context.Context, on bool) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.ontap.base+"/sim/dataplane", strings.NewReader(`{"cutOnUnmap":`+strconv.FormatBool(on)+`}`))
	if err != nil {
		return err
	}
	resp, err := s.ontap.http.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("PUT /sim/dataplane: %s", resp.Status)
	}
	return nil
}

// dataPlaneCut mirrors ontapsim.DataPlaneCut.
type dataPlaneCut struct {
	At     time.Time `json:"at"`
	LUN    string    `json:"lun"`
	Igroup string    `json:"igroup"`
	File   string    `json:"file"`
}

// cutOf is the first cut of the volume's LUN off the node's igroup.
func (s *suite) cutOf(ctx context.Context, vol, node string) (dataPlaneCut, error) {
	st, body, err := s.simGet(ctx, "/sim/dataplane")
	if err != nil || st != http.StatusOK {
		return dataPlaneCut{}, fmt.Errorf("GET /sim/dataplane: %d %v", st, err)
	}
	var dp struct {
		Cuts []dataPlaneCut `json:"cuts"`
	}
	if err := json.Unmarshal(body, &dp); err != nil {
		return dataPlaneCut{}, err
	}
	for _, cut := range dp.Cuts {
		if strings.HasPrefix(cut.LUN, "/vol/"+vol+"/") && strings.HasPrefix(cut.Igroup, node+"-") {
			return cut, nil
		}
	}
	return dataPlaneCut{}, fmt.Errorf("the LUN of %s was never cut off %s: %s", vol, node, body)
}

// setTaint puts the out-of-service taint on a node, or takes it off, as
// kubectl taint does: read, change, update, again on a conflict (the node
// lifecycle controller taints a node that goes NotReady at that moment).
func (s *suite) setTaint(ctx context.Context, node string, on bool) error {
	c := s.cluster.Client
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		n, err := c.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []corev1.Taint
		for _, t := range n.Spec.Taints {
			if t.Key != outOfServiceTaint.Key {
				taints = append(taints, t)
			}
		}
		if on {
			taints = append(taints, outOfServiceTaint)
		}
		n.Spec.Taints = taints
		_, err = c.CoreV1().Nodes().Update(ctx, n, metav1.UpdateOptions{})
		return err
	})
}

// leftOn says what of the volume is still on the node: a mount of the PV,
// an iSCSI session's device of the LUN (from the shim's state, which the
// node's iSCSI "kernel" keeps); "" when nothing.
func (s *suite) leftOn(ctx context.Context, n *localcluster.Node, pv, lunUUID string) (string, error) {
	mi, err := n.Exec(ctx, "cat", "/proc/self/mountinfo")
	if err != nil {
		return "", err
	}
	var left []string
	for _, line := range strings.Split(string(mi), "\n") {
		if f := strings.Fields(line); len(f) > 4 && strings.Contains(line, pv) {
			left = append(left, "mount "+f[4])
		}
	}
	b, err := os.ReadFile(filepath.Join(n.DirSource(iscsiShimDir), "state", "state.json"))
	if err != nil {
		return "", err
	}
	var st struct {
		Sessions []struct {
			SID     int `json:"sid"`
			Devices []struct {
				Loop string `json:"loop"`
				File string `json:"file"`
			} `json:"devices"`
		} `json:"sessions"`
	}
	if err := json.Unmarshal(b, &st); err != nil {
		return "", err
	}
	for _, se := range st.Sessions {
		for _, d := range se.Devices {
			if strings.Contains(filepath.Base(d.File), lunUUID) {
				left = append(left, fmt.Sprintf("session %d device %s", se.SID, d.Loop))
			}
		}
	}
	return strings.Join(left, ", "), nil
}

func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// journalLine is one complete line of a keeper's journal.
type journalLine struct {
	seq    int
	at     time.Time
	writer string
}

// readJournal parses every complete line of a journal.
func readJournal(path string) ([]journalLine, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	text := string(b)
	text = text[:strings.LastIndexByte(text, '\n')+1]
	var out []journalLine
	for _, line := range strings.Split(strings.TrimSuffix(text, "\n"), "\n") {
		if line == "" {
			continue
		}
		l, err := parseJournalLine(line)
		if err != nil {
			return nil, err
		}
		out = append(out, l)
	}
	return out, nil
}

// parseJournalLine parses one complete line of a keeper's journal.
func parseJournalLine(line string) (journalLine, error) {
	f := strings.Fields(line)
	if len(f) != 3 {
		return journalLine{}, fmt.Errorf("journal line %q", line)
	}
	seq, err := strconv.Atoi(f[0])
	if err != nil {
		return journalLine{}, fmt.Errorf("journal line %q: %w", line, err)
	}
	at, err := time.Parse(time.RFC3339Nano, f[1])
	if err != nil {
		return journalLine{}, fmt.Errorf("journal line %q: %w", line, err)
	}
	return journalLine{seq, at, f[2]}, nil
}

// lastOf is the last line by writer and how many lines it wrote.
func lastOf(lines []journalLine, writer string) (journalLine, int) {
	var last journalLine
	n := 0
	for _, l := range lines {
		if l.writer == writer {
			last, n = l, n+1
		}
	}
	return last, n
}

// workloadExit says why a pod's workload container last ended, from its
// previous run's log (the workload prints its error as its last line),
// for a failure message: a container in a crash loop is deleted with its
// pod before anyone reads its log (scenario 21, 2026-12-05: db-0 crashed
// on the second node and nothing said why).
func (s *suite) workloadExit(ctx context.Context, ns, pod string) string {
	b, err := s.cluster.Client.CoreV1().Pods(ns).GetLogs(pod, &corev1.PodLogOptions{Container: "workload", Previous: true}).DoRaw(ctx)
	if err != nil {
		return fmt.Sprintf("no earlier run of %s's workload to tell why (%v)", pod, err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return fmt.Sprintf("%s's workload last ended with: %q", pod, lines[len(lines)-1])
}

// pluginLogLine is the last line of the plugin container's current log
// that holds text.
func (s *suite) pluginLogLine(ctx context.Context, pod, container string, texts ...string) (string, error) {
	b, err := s.cluster.Client.CoreV1().Pods(s.ds.ns()).GetLogs(pod, &corev1.PodLogOptions{Container: container}).DoRaw(ctx)
	if err != nil {
		return "", fmt.Errorf("logs of %s/%s: %w", pod, container, err)
	}
	found := ""
	for _, l := range strings.Split(string(b), "\n") {
		if containsAll(l, texts) {
			found = l
		}
	}
	if found == "" {
		return "", fmt.Errorf("%s/%s never logged a line with %q", pod, container, texts)
	}
	return found, nil
}

// containsAll reports whether s contains every one of subs.
func containsAll(s string, subs []string) bool {
	for _, sub := range subs {
		if !strings.Contains(s, sub) {
			return false
		}
	}
	return true
}
