package cluster_test

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

// scenario is one disruption of the node plugin.
type scenario struct {
	name  string
	title string
	// control marks a negative control: it deregisters on purpose, and
	// passes only if the observer sees the driver leave CSINode.
	control bool
	// beforeWorkload scenarios run before the workload exists (the legacy
	// baseline and the migration that installs ontap-csi).
	beforeWorkload bool
	// run disrupts; it may move *from, the start of the judged window.
	run func(ctx context.Context, s *suite, from *time.Time) error
}

var scenarios = []scenario{
	{name: "0a-seed-baseline", title: "control: legacy DaemonSet (plugin + registrar sidecar) deleted and re-created reproduces the seed", control: true, beforeWorkload: true, run: seedBaseline},
	{name: "0b-migrate-from-legacy", title: "ontap-csi installed beside the legacy DaemonSet, then the legacy DaemonSet deleted", beforeWorkload: true, run: migrateFromLegacy},
	{name: "1-rolling-update", title: "node DaemonSet image change, RollingUpdate maxSurge 1", run: rollingUpdate},
	{name: "2a-recreate-old-terminating", title: "kubectl delete ds, immediate re-create while the old pod terminates", run: recreate(false, false)},
	{name: "2b-recreate-old-gone", title: "kubectl delete ds, old pod gone, then re-create", run: recreate(true, false)},
	{name: "2c-legacy-recreate-old-terminating", title: "as 2a, old pods with a legacy registrar sidecar", run: recreate(false, true)},
	{name: "2d-legacy-recreate-old-gone", title: "as 2b, old pods with a legacy registrar sidecar", run: recreate(true, true)},
	{name: "3-sigkill", title: "node plugin container SIGKILLed by the runtime", run: sigkill},
	{name: "4-kubelet-restart-mid-rollout", title: "kubelet restarted during a rolling update", run: kubeletRestart},
	{name: "5-control-deregister", title: "control: `ontap-csi deregister` (uninstall path) must show as a gap", control: true, run: deregisterControl},
}

const rolloutTimeout = 5 * time.Minute

func (s *suite) otherImage() string {
	if s.ds.current.Image == pluginImageA {
		return pluginImageB
	}
	return pluginImageA
}

func rollingUpdate(ctx context.Context, s *suite, _ *time.Time) error {
	if err := s.ds.update(ctx, nodeVariant{Image: s.otherImage()}); err != nil {
		return err
	}
	return s.ds.waitRollout(ctx, rolloutTimeout)
}

// recreate deletes the DaemonSet as `kubectl delete ds` does and creates it
// again (what Trident's operator did on upgrade: the seed). oldGone waits
// for the old pod to be gone first; legacy first rolls the DaemonSet to a
// variant with a node-driver-registrar emulation sidecar, so the old pods
// carry one.
func recreate(oldGone, legacy bool) func(context.Context, *suite, *time.Time) error {
	return func(ctx context.Context, s *suite, _ *time.Time) error {
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

func sigkill(ctx context.Context, s *suite, _ *time.Time) error {
	pod, err := s.ds.pluginPod(ctx)
	if err != nil {
		return err
	}
	cs, err := pluginContainer(pod)
	if err != nil {
		return err
	}
	id := strings.TrimPrefix(cs.ContainerID, "containerd://")
	if _, err := s.cluster.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id); err != nil {
		return err
	}
	s.obs.add("test", "SIGKILLed container %s of %s (restarts %d)", cs.Name, pod.Name, cs.RestartCount)
	before := cs.RestartCount
	if err := waitPod(ctx, s.cluster.Client, pod.Namespace, pod.Name, rolloutTimeout, func(p *corev1.Pod) bool {
		c, err := pluginContainer(p)
		return err == nil && c.RestartCount > before && podReady(p)
	}); err != nil {
		return err
	}
	s.obs.add("test", "%s restarted and Ready", pod.Name)
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

func kubeletRestart(ctx context.Context, s *suite, _ *time.Time) error {
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
	// Restart the kubelet once the surge pod's plugin runs beside the old
	// one: both generations are alive, the handover is under way.
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
				surge = p.Name
				return true, "", nil
			}
		}
		return false, "no running surge pod yet", nil
	}); err != nil {
		return err
	}
	s.obs.add("test", "surge pod %s running; restarting the kubelet", surge)
	if err := s.cluster.RestartKubelet(); err != nil {
		return err
	}
	s.obs.add("test", "kubelet restarted (pid %d)", s.cluster.Kubelet.PID())
	return s.ds.waitRollout(ctx, rolloutTimeout)
}

// deregisterControl proves the observer can see the failure this suite
// guards against: the uninstall path deregisters on purpose (kubelet
// removes the driver from CSINode), and a new pod brings it back.
func deregisterControl(ctx context.Context, s *suite, _ *time.Time) error {
	out, err := s.cluster.Exec(ctx, filepath.Join(s.bin, "ontap-csi"), "deregister", "--kubelet-dir=/var/lib/kubelet")
	s.obs.add("test", "ontap-csi deregister: %s", oneLine(string(out)))
	if err != nil {
		return err
	}
	if err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		n, err := s.cluster.Client.StorageV1().CSINodes().Get(ctx, localcluster.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		return !s.obs.driverIn(n), "driver still in CSINode", nil
	}); err != nil {
		return fmt.Errorf("kubelet never dropped the driver after deregister: %w", err)
	}
	// A process that starts later clears the uninstall mark.
	pod, err := s.ds.pluginPod(ctx)
	if err != nil {
		return err
	}
	if err := s.cluster.Client.CoreV1().Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	s.obs.add("test", "deleted %s so that a new pod registers again", pod.Name)
	if err := s.ds.waitPodsGone(ctx, []string{pod.Name}, rolloutTimeout); err != nil {
		return err
	}
	return s.ds.waitRollout(ctx, rolloutTimeout)
}

// steady waits for the state every scenario starts and ends in, as far as
// the suite has got: the DaemonSet rolled out and the driver in CSINode once
// ontap-csi is installed, the keeper Ready once the workload runs.
func (s *suite) steady(ctx context.Context) error {
	installed, err := s.ds.exists(ctx)
	if err != nil || !installed {
		return err
	}
	if err := s.ds.waitRollout(ctx, rolloutTimeout); err != nil {
		return err
	}
	return pollUntil(ctx, time.Minute, func() (bool, string, error) {
		n, err := s.cluster.Client.StorageV1().CSINodes().Get(ctx, localcluster.NodeName, metav1.GetOptions{})
		if err != nil || !s.obs.driverIn(n) {
			return false, fmt.Sprintf("driver not in CSINode (%v)", err), nil
		}
		if s.wl == nil {
			return true, "", nil
		}
		p, err := s.cluster.Client.CoreV1().Pods(workloadNS).Get(ctx, keeperPod, metav1.GetOptions{})
		if err != nil || !podReady(p) {
			return false, fmt.Sprintf("keeper not Ready (%v)", err), nil
		}
		return true, "", nil
	})
}

// settleTime lets late kubelet retries and events land in the window.
const settleTime = 5 * time.Second

func (s *suite) run(ctx context.Context, t *testing.T, sc scenario) {
	if err := s.steady(ctx); err != nil {
		t.Fatalf("not in a steady state before the scenario: %v", err)
	}
	from := time.Now()
	s.obs.add("test", "scenario %s begins", sc.name)
	runErr := sc.run(ctx, s, &from)
	if runErr == nil {
		runErr = s.steady(ctx)
	}
	time.Sleep(settleTime)
	to := time.Now()
	s.obs.add("test", "scenario %s ends", sc.name)

	res := scenarioResult{scenario: sc, From: from, To: to, Window: s.obs.window(from, to)}
	if s.wl != nil {
		res.Cycles = s.wl.cyclesIn(from, to)
	}
	if runErr != nil {
		res.Problems = append(res.Problems, "scenario: "+runErr.Error())
	}
	if s.wl != nil {
		keeper, err := s.wl.checkKeeper(ctx)
		res.Keeper = &keeper
		if err != nil {
			res.Problems = append(res.Problems, "keeper data: "+err.Error())
		}
		res.Problems = append(res.Problems, keeper.Problems...)
		if keeper.LastWrite.Before(to.Add(-10 * time.Second)) {
			res.Problems = append(res.Problems, fmt.Sprintf("keeper's last journal write was at %s", keeper.LastWrite.Format(time.RFC3339Nano)))
		}
	}
	if res.Window.Samples == 0 || res.Window.MaxSampleInterval > maxSampleInterval {
		res.Problems = append(res.Problems, fmt.Sprintf("CSINode sampled %d times, longest interval %s (allowed %s)",
			res.Window.Samples, res.Window.MaxSampleInterval.Round(time.Millisecond), maxSampleInterval))
	}
	for _, c := range res.Cycles {
		// After a deliberate deregistration kubelet's mount retries back
		// off for up to two minutes; the control expects that.
		if c.Timeout && !sc.control {
			res.Problems = append(res.Problems, fmt.Sprintf("churn %s: %s", c.Pod, c.Err))
		}
	}
	if sc.control {
		if len(res.Window.Gaps) == 0 {
			res.Problems = append(res.Problems, "control: the observer saw no CSINode gap after a deliberate deregistration; it could not see the seed bug either")
		}
	} else {
		for _, g := range res.Window.Gaps {
			res.Problems = append(res.Problems, fmt.Sprintf("driver missing from CSINode for %s from %s (%s)",
				g.To.Sub(g.From).Round(time.Millisecond), g.From.Format("15:04:05.000"), g.By))
		}
		if n := res.Window.Failures[classUnregistered]; n > 0 {
			res.Problems = append(res.Problems, fmt.Sprintf("%d failed kubelet volume operations with the driver unregistered", n))
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
