package cluster_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

// scenario is one thing done to the cluster, judged by what the observer
// saw in its window.
type scenario struct {
	name  string
	title string
	// control marks a negative control: it deregisters on purpose, and
	// passes only if the observer sees the driver leave CSINode.
	control bool
	// beforeWorkload scenarios run before the workload exists (the legacy
	// baseline and the migration that installs ontap-csi).
	beforeWorkload bool
	// group: consecutive scenarios of one group run at the same time.
	group string
	// namespace, if set, is the scenario's own: it is created before and
	// deleted after, and its timeline leaves out other namespaces' pods
	// and events (scenarios of a group run side by side).
	namespace string
	// run does the scenario; it may move *from, the start of the judged
	// window.
	run func(ctx context.Context, s *suite, sc *scenarioRun) error
}

// scenarioRun is one scenario as it runs: where it records what it found.
type scenarioRun struct {
	scenario
	from  time.Time
	mu    sync.Mutex
	notes []string // facts the scenario established, for the report
	// down are spans in which a scenario stopped a node's plugin (and
	// kubelet) on purpose: kubelet's failures there for want of a
	// registered driver are the scenario's doing, not a lost registration.
	down []nodeDown
}

type nodeDown struct {
	node     string
	from, to time.Time
}

// markDown records that the node's plugin was down on purpose from from to to.
func (r *scenarioRun) markDown(node string, from, to time.Time) {
	r.mu.Lock()
	r.down = append(r.down, nodeDown{node, from, to})
	r.mu.Unlock()
}

// excused counts the failed kubelet volume operations for want of a
// registered driver that a node's kubelet logged while its plugin was down
// on purpose.
func (r *scenarioRun) excused(records []record) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for _, rec := range records {
		if rec.Class != classUnregistered || rec.Source != "kubelet" {
			continue
		}
		for _, d := range r.down {
			if strings.HasPrefix(rec.Text, d.node+":") && !rec.At.Before(d.from) && !rec.At.After(d.to) {
				n++
				break
			}
		}
	}
	return n
}

// note records a fact for the report and the timeline.
func (r *scenarioRun) note(s *suite, format string, args ...any) {
	text := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.notes = append(r.notes, text)
	r.mu.Unlock()
	s.obs.addRecord(record{At: time.Now(), Source: "test", Namespace: r.namespace, Text: text})
}

// scenarios in the order they run. The numbers are issue 20's; 7.x are the
// node plugin's rollouts of wave 1, run on every node at once.
var scenarios = []scenario{
	{name: "7.0a-seed-baseline", title: "control: legacy DaemonSet (plugin + registrar sidecar) deleted and re-created reproduces the seed", control: true, beforeWorkload: true, run: seedBaseline},
	{name: "7.0b-migrate-from-legacy", title: "ontap-csi installed beside the legacy DaemonSet, then the legacy DaemonSet deleted", beforeWorkload: true, run: migrateFromLegacy},
	{name: "rbac-node-info-policy", title: "a node pod may change its own Node's node-info annotation and nothing else (issue 17)", namespace: "s-rbac", group: "storage", run: nodeRBAC},
	{name: "drift-attachment-repair", title: "an export rule and a LUN map removed on ONTAP by hand come back through csi-attacher's reconcile (issue 19)", namespace: "s-drift", group: "storage", run: attachmentDrift},
	{name: "1-dynamic-provisioning", title: "dynamic provisioning, nas and san, WaitForFirstConsumer with topology", namespace: "s1", group: "storage", run: dynamicProvisioning},
	{name: "2-rwx-two-nodes", title: "a ReadWriteMany NFS volume used on two nodes at once", namespace: "s2", group: "storage", run: rwxTwoNodes},
	{name: "3-iscsi-moves-node", title: "an iSCSI ReadWriteOnce volume whose pod moves to the other node", namespace: "s3", group: "storage", run: iscsiMovesNode},
	{name: "4-snapshot-restore-clone", title: "VolumeSnapshot, restore into a new claim, clone from a claim", namespace: "s4", group: "storage", run: snapshotRestoreClone},
	{name: "5-online-expansion", title: "PVC expansion with its pod running (iSCSI, xfs)", namespace: "s5", group: "storage", run: onlineExpansion},
	{name: "6-controller-failover", title: "2 controller replicas; the provisioning leader killed while 20 claims are provisioned", namespace: "s6", group: "storage", run: controllerFailover},
	{name: "7.1-rolling-update", title: "node DaemonSet image change, RollingUpdate maxSurge 1", run: rollingUpdate},
	{name: "7.2a-recreate-old-terminating", title: "kubectl delete ds, immediate re-create while the old pods terminate", run: recreate(false, false)},
	{name: "7.2b-recreate-old-gone", title: "kubectl delete ds, old pods gone, then re-create", run: recreate(true, false)},
	{name: "7.2c-legacy-recreate-old-terminating", title: "as 7.2a, old pods with a legacy registrar sidecar", run: recreate(false, true)},
	{name: "7.2d-legacy-recreate-old-gone", title: "as 7.2b, old pods with a legacy registrar sidecar", run: recreate(true, true)},
	{name: "7.3-sigkill", title: "every node plugin container SIGKILLed by the runtime", run: sigkill},
	{name: "7.4-kubelet-restart-mid-rollout", title: "every kubelet restarted during a rolling update", run: kubeletRestart},
	{name: "7.5-control-deregister", title: "control: `ontap-csi deregister` (uninstall path) on every node must show as a gap", control: true, run: deregisterControl},
	{name: "9a-trident-26.06-operator-objects", title: "Trident's own node DaemonSet and controller Deployment as trident-operator 26.06 renders them, image swapped for ontap-csi's, in place of the suite's install; then a rolling update and the operator's delete and re-create (at once, and once the old pods are gone); then back (issue 20)", run: tridentDropIn("26.06")},
	{name: "9b-trident-20.10-tridentctl-objects", title: "as 9a with the objects of `tridentctl install` 20.10 (no anti-affinity, no probes: the re-create at once overlaps old and new pods, the seed's case)", run: tridentDropIn("20.10")},
	{name: "21-non-graceful-failover", title: "a node dies under a StatefulSet writing to iSCSI; tainted out-of-service, fenced on ONTAP, the pod moves with its data; the node comes back and cleans up (issue 21)", namespace: "s21", run: nodeFailover},
	{name: "8-node-drained-deleted", title: "a node drained and deleted: its igroup and export rules go once nothing uses them", namespace: "s8", run: drainAndDelete},
}

const rolloutTimeout = 5 * time.Minute

// runAll runs the scenarios in order, a group's at once, and starts the
// workload before the first scenario that needs it.
func (s *suite) runAll(ctx context.Context, t *testing.T) {
	scenarios, err := selected(os.Getenv("E2E_SCENARIOS"))
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(scenarios); {
		sc := scenarios[i]
		if !sc.beforeWorkload && s.wl == nil {
			if err := s.startWorkload(ctx); err != nil {
				t.Fatalf("workload: %v", err)
			}
			t.Logf("workload running after %s", time.Since(s.report.started).Round(time.Second))
		}
		j := i + 1
		for sc.group != "" && j < len(scenarios) && scenarios[j].group == sc.group {
			j++
		}
		batch := scenarios[i:j]
		i = j
		if err := s.steady(ctx); err != nil {
			t.Fatalf("not in a steady state before %s: %v", sc.name, err)
		}
		t.Logf("%s begins after %s", groupName(batch), time.Since(s.report.started).Round(time.Second))
		ok := t.Run(groupName(batch), func(t *testing.T) {
			// All of a group at once: t.Run from goroutines, not t.Parallel,
			// which runs only GOMAXPROCS (two here) at a time.
			var wg sync.WaitGroup
			for _, sc := range batch {
				wg.Add(1)
				go func() {
					defer wg.Done()
					t.Run(sc.name, func(t *testing.T) { s.run(ctx, t, sc) })
				}()
			}
			wg.Wait()
		})
		if !ok && ctx.Err() != nil {
			return
		}
	}
}

func groupName(batch []scenario) string {
	if len(batch) == 1 {
		return batch[0].name
	}
	return batch[0].group
}

// startWorkload starts the keeper and the churn on every node; ontap-csi
// must be installed and registered.
func (s *suite) startWorkload(ctx context.Context) error {
	if err := s.waitRegistered(ctx, time.Minute); err != nil {
		return err
	}
	var wls []*workload
	errs := make(chan error, len(s.cluster.Nodes))
	for _, n := range s.cluster.Nodes {
		w := &workload{client: s.cluster.Client, obs: s.obs, sim: s.ontap.http, node: n}
		wls = append(wls, w)
		go func() { errs <- w.start(ctx) }()
	}
	for range s.cluster.Nodes {
		if err := <-errs; err != nil {
			return err
		}
	}
	s.wl = wls
	s.obs.add("test", "workload running: a keeper and a churn on every node")
	return nil
}

// liveNodes are the nodes still in the cluster.
func (s *suite) liveNodes() []*localcluster.Node {
	var out []*localcluster.Node
	for _, n := range s.cluster.Nodes {
		s.obs.mu.Lock()
		_, gone := s.obs.gone[n.Name]
		s.obs.mu.Unlock()
		if !gone {
			out = append(out, n)
		}
	}
	return out
}

// waitRegistered waits until every live node's CSINode lists the driver.
func (s *suite) waitRegistered(ctx context.Context, timeout time.Duration) error {
	return pollUntil(ctx, timeout, func() (bool, string, error) {
		for _, n := range s.liveNodes() {
			ok, err := s.driverRegistered(ctx, n.Name)
			if err != nil || !ok {
				return false, fmt.Sprintf("driver not in CSINode %s (%v)", n.Name, err), nil
			}
		}
		return true, "", nil
	})
}

// steady waits for the state every scenario starts and ends in, as far as
// the suite has got: the DaemonSet rolled out and the driver in every
// node's CSINode once ontap-csi is installed, every keeper (NFS and iSCSI)
// Ready once the workload runs.
func (s *suite) steady(ctx context.Context) error {
	installed, err := s.ds.exists(ctx)
	if err != nil || !installed {
		return err
	}
	if err := s.ds.waitRollout(ctx, rolloutTimeout); err != nil {
		return err
	}
	if err := s.waitRegistered(ctx, time.Minute); err != nil {
		return err
	}
	return pollUntil(ctx, time.Minute, func() (bool, string, error) {
		for _, w := range s.wl {
			if w.isStopped() {
				continue
			}
			for _, name := range []string{w.keeperPod(), w.iscsiKeeper()} {
				p, err := s.cluster.Client.CoreV1().Pods(workloadNS).Get(ctx, name, metav1.GetOptions{})
				if err != nil || !podReady(p) {
					return false, fmt.Sprintf("keeper %s not Ready (%v)", name, err), nil
				}
			}
		}
		return true, "", nil
	})
}

// settleTime lets late kubelet retries and events land in the window.
const settleTime = 3 * time.Second

func (s *suite) run(ctx context.Context, t *testing.T, sc scenario) {
	r := &scenarioRun{scenario: sc, from: time.Now()}
	if sc.namespace != "" {
		if _, err := s.cluster.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: sc.namespace}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	before, err := s.ontap.objects(ctx)
	if err != nil {
		t.Fatalf("ONTAP objects: %v", err)
	}
	s.obs.addRecord(record{At: time.Now(), Source: "test", Namespace: sc.namespace, Text: "scenario " + sc.name + " begins"})
	runErr := sc.run(ctx, s, r)
	if runErr == nil && sc.group == "" {
		runErr = s.steady(ctx)
	}
	time.Sleep(settleTime)
	to := time.Now()
	s.obs.addRecord(record{At: to, Source: "test", Namespace: sc.namespace, Text: "scenario " + sc.name + " ends"})
	after, err := s.ontap.objects(ctx)
	if err != nil {
		t.Errorf("ONTAP objects: %v", err)
	}
	res := s.judge(ctx, r, to, runErr)
	res.OntapBefore, res.OntapAfter = before, after
	if sc.namespace != "" {
		res.OntapVolumes = s.ontapVolumesOf(sc.namespace)
		res.OntapSeen = s.ontap.seenDuring(r.from, to, res.OntapVolumes)
		if left := after.about(res.OntapVolumes); len(left) > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("ONTAP objects of the scenario's volumes left after it: %v", left))
		}
	}
	s.report.add(res)
	for _, p := range res.Problems {
		t.Error(p)
	}
	t.Logf("%s: %d CSINode samples (longest interval %s), %d gaps, failures %v, %d churn cycles",
		sc.name, res.Window.Samples, res.Window.MaxSampleInterval.Round(time.Millisecond), len(res.Window.Gaps),
		res.Window.Failures, len(res.Cycles))
}

// judge collects what the observer saw in the scenario's window and the
// problems it shows.
func (s *suite) judge(ctx context.Context, r *scenarioRun, to time.Time, runErr error) scenarioResult {
	res := scenarioResult{scenario: r.scenario, From: r.from, To: to, Window: s.obs.window(r.from, to, r.namespace), Notes: r.notes}
	for _, w := range s.wl {
		res.Cycles = append(res.Cycles, w.cyclesIn(r.from, to)...)
	}
	if runErr != nil {
		res.Problems = append(res.Problems, "scenario: "+runErr.Error())
	}
	for _, w := range s.wl {
		if w.isStopped() {
			continue
		}
		keeper, err := w.checkKeeper(ctx)
		res.Keepers = append(res.Keepers, keeper)
		if err != nil {
			res.Problems = append(res.Problems, w.node.Name+" keeper data: "+err.Error())
		}
		res.Problems = append(res.Problems, keeper.Problems...)
		res.Problems = append(res.Problems, w.checkISCSIKeeper(ctx)...)
		if keeper.LastWrite.Before(to.Add(-10 * time.Second)) {
			res.Problems = append(res.Problems, fmt.Sprintf("%s keeper's last journal write was at %s", w.node.Name, keeper.LastWrite.Format(time.RFC3339Nano)))
		}
	}
	if res.Window.Samples == 0 {
		res.Problems = append(res.Problems, "CSINode was never sampled")
	}
	for _, sp := range res.Window.Unwatched {
		res.Problems = append(res.Problems, fmt.Sprintf("CSINode unobserved for %s from %s: no sample, and the watch was down (allowed %s)",
			sp.To.Sub(sp.From).Round(time.Millisecond), sp.From.Format("15:04:05.000"), maxSampleInterval))
	}
	for _, c := range res.Cycles {
		// After a deliberate deregistration kubelet's mount retries back
		// off for up to two minutes; the control expects that.
		if c.Timeout && !r.control {
			res.Problems = append(res.Problems, fmt.Sprintf("churn %s: %s", c.Pod, c.Err))
		}
	}
	if r.control {
		if len(res.Window.Gaps) == 0 {
			res.Problems = append(res.Problems, "control: the observer saw no CSINode gap after a deliberate deregistration; it could not see the seed bug either")
		}
		return res
	}
	for _, g := range res.Window.Gaps {
		res.Problems = append(res.Problems, fmt.Sprintf("driver missing from CSINode %s for %s from %s (%s)",
			g.Node, g.To.Sub(g.From).Round(time.Millisecond), g.From.Format("15:04:05.000"), g.By))
	}
	n := res.Window.Failures[classUnregistered]
	if e := r.excused(res.Window.Records); e > 0 {
		n -= e
		res.Notes = append(res.Notes, fmt.Sprintf("%d failed kubelet volume operations with the driver unregistered on a node whose plugin the scenario had killed, before it was back (not counted)", e))
	}
	if n > 0 {
		res.Problems = append(res.Problems, fmt.Sprintf("%d failed kubelet volume operations with the driver unregistered", n))
	}
	return res
}

func (s *suite) otherImage() string {
	if s.ds.current.Image == pluginImageA {
		return pluginImageB
	}
	return pluginImageA
}

func rollingUpdate(ctx context.Context, s *suite, _ *scenarioRun) error {
	if err := s.ds.update(ctx, nodeVariant{Image: s.otherImage()}); err != nil {
		return err
	}
	return s.ds.waitRollout(ctx, rolloutTimeout)
}

// recreate deletes the DaemonSet as `kubectl delete ds` does and creates it
// again (what Trident's operator did on upgrade: the seed). oldGone waits
// for the old pods to be gone first; legacy first rolls the DaemonSet to a
// variant with a node-driver-registrar emulation sidecar, so the old pods
// carry one.
func recreate(oldGone, legacy bool) func(context.Context, *suite, *scenarioRun) error {
	return func(ctx context.Context, s *suite, _ *scenarioRun) error {
		if legacy {
			if err := s.ds.update(ctx, nodeVariant{Image: s.otherImage(), LegacyRegistrar: true}); err != nil {
				return err
			}
			if err := s.ds.waitRollout(ctx, rolloutTimeout); err != nil {
				return err
			}
		}
		pods, err := s.ds.pods(ctx)
		if err != nil {
			return err
		}
		var old []string
		for _, p := range pods {
			old = append(old, p.Name)
		}
		next := nodeVariant{Image: s.otherImage()}
		if err := s.ds.delete(ctx); err != nil {
			return err
		}
		if oldGone {
			if err := s.ds.waitPodsGone(ctx, old, rolloutTimeout); err != nil {
				return err
			}
			s.obs.add("test", "old pods %v gone", old)
		}
		if err := s.ds.create(ctx, next); err != nil {
			return err
		}
		if err := s.ds.waitPodsGone(ctx, old, rolloutTimeout); err != nil {
			return err
		}
		return s.ds.waitRollout(ctx, rolloutTimeout)
	}
}

// sigkill kills the plugin container on every node at once.
func sigkill(ctx context.Context, s *suite, _ *scenarioRun) error {
	restarts := map[string]int32{}
	for _, n := range s.liveNodes() {
		pod, err := s.ds.pluginPod(ctx, n.Name)
		if err != nil {
			return err
		}
		cs, err := pluginContainer(pod)
		if err != nil {
			return err
		}
		id := strings.TrimPrefix(cs.ContainerID, "containerd://")
		if _, err := n.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id); err != nil {
			return err
		}
		s.obs.add("test", "SIGKILLed container %s of %s on %s (restarts %d)", cs.Name, pod.Name, n.Name, cs.RestartCount)
		restarts[pod.Name] = cs.RestartCount
	}
	for name, before := range restarts {
		if err := waitPod(ctx, s.cluster.Client, s.ds.ns(), name, rolloutTimeout, func(p *corev1.Pod) bool {
			c, err := pluginContainer(p)
			return err == nil && c.RestartCount > before && podReady(p)
		}); err != nil {
			return err
		}
		s.obs.add("test", "%s restarted and Ready", name)
	}
	return nil
}

func pluginContainer(p *corev1.Pod) (*corev1.ContainerStatus, error) {
	for i := range p.Status.ContainerStatuses {
		if p.Status.ContainerStatuses[i].Name != legacyContainer {
			return &p.Status.ContainerStatuses[i], nil
		}
	}
	return nil, fmt.Errorf("pod %s has no plugin container status", p.Name)
}

// kubeletRestart starts a rolling update and, once the first surge pod's
// plugin runs beside its node's old one (both generations alive, the
// handover under way), restarts every kubelet at once.
func kubeletRestart(ctx context.Context, s *suite, _ *scenarioRun) error {
	pods, err := s.ds.pods(ctx)
	if err != nil {
		return err
	}
	old := map[string]bool{}
	for _, p := range pods {
		old[p.Name] = true
	}
	if err := s.ds.update(ctx, nodeVariant{Image: s.otherImage()}); err != nil {
		return err
	}
	var surge string
	if err := pollUntil(ctx, rolloutTimeout, func() (bool, string, error) {
		pods, err := s.ds.pods(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		for _, p := range pods {
			if old[p.Name] {
				continue
			}
			if c, err := pluginContainer(&p); err == nil && c.State.Running != nil {
				surge = p.Name + " on " + p.Spec.NodeName
				return true, "", nil
			}
		}
		return false, "no running surge pod yet", nil
	}); err != nil {
		return err
	}
	s.obs.add("test", "surge pod %s running; restarting every kubelet", surge)
	for _, n := range s.liveNodes() {
		if err := n.RestartKubelet(); err != nil {
			return err
		}
		s.obs.add("test", "kubelet of %s restarted (pid %d)", n.Name, n.Kubelet.PID())
	}
	return s.ds.waitRollout(ctx, rolloutTimeout)
}

// deregisterControl proves the observer can see the failure this suite
// guards against: the uninstall path deregisters on purpose on every node
// (kubelet removes the driver from CSINode), and new pods bring it back.
func deregisterControl(ctx context.Context, s *suite, _ *scenarioRun) error {
	for _, n := range s.liveNodes() {
		out, err := n.Exec(ctx, filepath.Join(s.bin, "ontap-csi"), "deregister", "--kubelet-dir=/var/lib/kubelet")
		s.obs.add("test", "%s: ontap-csi deregister: %s", n.Name, oneLine(string(out)))
		if err != nil {
			return err
		}
	}
	if err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		for _, n := range s.liveNodes() {
			if ok, err := s.driverRegistered(ctx, n.Name); err != nil || ok {
				return false, "driver still in CSINode " + n.Name, nil
			}
		}
		return true, "", nil
	}); err != nil {
		return fmt.Errorf("kubelet never dropped the driver after deregister: %w", err)
	}
	// A process that starts later clears the uninstall mark.
	var deleted []string
	for _, n := range s.liveNodes() {
		pod, err := s.ds.pluginPod(ctx, n.Name)
		if err != nil {
			return err
		}
		if err := s.cluster.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
			return err
		}
		deleted = append(deleted, pod.Name)
	}
	s.obs.add("test", "deleted %v so that new pods register again", deleted)
	if err := s.ds.waitPodsGone(ctx, deleted, rolloutTimeout); err != nil {
		return err
	}
	return s.ds.waitRollout(ctx, rolloutTimeout)
}

// selected are the scenarios to run: all, or with E2E_SCENARIOS (a regular
// expression, for working on one) those whose name matches and the ones that
// run before the workload, which install ontap-csi.
func selected(expr string) ([]scenario, error) {
	if expr == "" {
		return scenarios, nil
	}
	re, err := regexp.Compile(expr)
	if err != nil {
		return nil, fmt.Errorf("E2E_SCENARIOS: %w", err)
	}
	var out []scenario
	for _, sc := range scenarios {
		if sc.beforeWorkload || re.MatchString(sc.name) {
			out = append(out, sc)
		}
	}
	return out, nil
}
