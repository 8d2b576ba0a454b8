package cluster_test

import (
	"context"
	"fmt"
	"sort"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// The Trident 20.10-style node DaemonSet of the baseline: a node plugin
// without registration of its own (test/kubelet/cmd/tridentmain) and
// node-driver-registrar beside it (the legacy registrar emulation), sharing
// the plugin directory and endpoint csi.sock with ontap-csi, as the
// drop-in migration finds them.
const (
	legacyNS   = "trident"
	legacyName = "trident-node-linux"
)

// legacyDaemonSet is the old DaemonSet. Both containers wait 15 s in a
// preStop hook, as a node plugin draining its calls does: the seed needs
// the new pod's registrar to register before the old one's gets SIGTERM
// and unlinks the socket (docs/design/registration.md §1), which on an idle machine
// the old pod would otherwise win.
func legacyDaemonSet() *appsv1.DaemonSet {
	labels := map[string]string{"app": "node.csi.trident.netapp.io"}
	preStop := &corev1.Lifecycle{PreStop: &corev1.LifecycleHandler{Sleep: &corev1.SleepAction{Seconds: 15}}}
	mounts := []corev1.VolumeMount{{Name: "plugin-dir", MountPath: "/plugin"}}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: legacyName, Namespace: legacyNS},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					AutomountServiceAccountToken:  ptr.To(false),
					Containers: []corev1.Container{
						{
							Name: "trident-main", Image: toolsImage, ImagePullPolicy: corev1.PullNever,
							Command: []string{"/tridentmain", "--csi_endpoint=unix:///plugin/csi.sock", "--csi_node_name=$(KUBE_NODE_NAME)"},
							Env: []corev1.EnvVar{{Name: "KUBE_NODE_NAME", ValueFrom: &corev1.EnvVarSource{
								FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}}},
							VolumeMounts: mounts, Lifecycle: preStop,
						},
						{
							Name: legacyContainer, Image: toolsImage, ImagePullPolicy: corev1.PullNever,
							Command: []string{"/legacyregistrar", "--registration-dir=/registration", "--driver=" + driverName,
								"--kubelet-registration-path=/var/lib/kubelet/plugins/" + driverName + "/csi.sock",
								"--csi-address=/plugin/csi.sock"},
							VolumeMounts: append([]corev1.VolumeMount{{Name: "registration-dir", MountPath: "/registration"}}, mounts...),
							Lifecycle:    preStop,
						},
					},
					Volumes: []corev1.Volume{
						{Name: "plugin-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
							Path: "/var/lib/kubelet/plugins/" + driverName, Type: ptr.To(corev1.HostPathDirectoryOrCreate)}}},
						{Name: "registration-dir", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{
							Path: "/var/lib/kubelet/plugins_registry", Type: ptr.To(corev1.HostPathDirectory)}}},
					},
				},
			},
		},
	}
}

func (s *suite) legacyPods(ctx context.Context) ([]corev1.Pod, error) {
	l, err := s.cluster.Client.CoreV1().Pods(legacyNS).List(ctx, metav1.ListOptions{LabelSelector: "app=node.csi.trident.netapp.io"})
	if err != nil {
		return nil, err
	}
	return l.Items, nil
}

// waitLegacyRunning waits until every node runs a Ready legacy pod not in
// exclude, and returns their names.
func (s *suite) waitLegacyRunning(ctx context.Context, exclude map[string]bool) (map[string]bool, error) {
	names := map[string]bool{}
	err := pollUntil(ctx, rolloutTimeout, func() (bool, string, error) {
		pods, err := s.legacyPods(ctx)
		if err != nil {
			return false, err.Error(), nil
		}
		names = map[string]bool{}
		nodes := map[string]bool{}
		for _, p := range pods {
			if !exclude[p.Name] && podReady(&p) {
				names[p.Name], nodes[p.Spec.NodeName] = true, true
			}
		}
		return len(nodes) == len(s.liveNodes()), fmt.Sprintf("new Ready legacy pods on %d of %d nodes", len(nodes), len(s.liveNodes())), nil
	})
	return names, err
}

func (s *suite) driverRegistered(ctx context.Context, node string) (bool, error) {
	n, err := s.cluster.Client.StorageV1().CSINodes().Get(ctx, node, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return s.obs.driverIn(n), nil
}

// seedBaseline reproduces the seed with the legacy DaemonSet alone: after a
// delete and immediate re-create the old registrar unlinks the new one's
// socket, and the driver stays out of CSINode for good, on every node. It
// is the control that shows this suite sees the bug the other scenarios
// must not have.
func seedBaseline(ctx context.Context, s *suite, _ *scenarioRun) error {
	c := s.cluster.Client
	if _, err := c.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: legacyNS}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if _, err := c.AppsV1().DaemonSets(legacyNS).Create(ctx, legacyDaemonSet(), metav1.CreateOptions{}); err != nil {
		return err
	}
	s.obs.add("test", "created legacy DaemonSet %s/%s (tridentmain + registrar)", legacyNS, legacyName)
	first, err := s.waitLegacyRunning(ctx, nil)
	if err != nil {
		return err
	}
	if err := s.waitRegistered(ctx, 2*time.Minute); err != nil {
		return fmt.Errorf("the legacy registrars never registered: %w", err)
	}
	s.obs.add("test", "legacy pods %v registered the driver", keysOf(first))

	bg := metav1.DeletePropagationBackground
	if err := c.AppsV1().DaemonSets(legacyNS).Delete(ctx, legacyName, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return err
	}
	if _, err := c.AppsV1().DaemonSets(legacyNS).Create(ctx, legacyDaemonSet(), metav1.CreateOptions{}); err != nil {
		return err
	}
	s.obs.add("test", "deleted and re-created the legacy DaemonSet")
	second, err := s.waitLegacyRunning(ctx, first)
	if err != nil {
		return err
	}
	if err := pollUntil(ctx, 2*time.Minute, func() (bool, string, error) {
		pods, err := s.legacyPods(ctx)
		left := 0
		for _, p := range pods {
			if first[p.Name] {
				left++
			}
		}
		return err == nil && left == 0, fmt.Sprintf("%d old legacy pods left", left), nil
	}); err != nil {
		return err
	}
	s.obs.add("test", "old legacy pods gone, new %v running", keysOf(second))
	// Permanent: nothing re-creates the socket.
	time.Sleep(15 * time.Second)
	for _, n := range s.liveNodes() {
		ok, err := s.driverRegistered(ctx, n.Name)
		if err != nil {
			return err
		}
		if ok {
			return fmt.Errorf("the seed did not reproduce on %s: the driver is registered 15 s after the old legacy pod left", n.Name)
		}
	}
	s.obs.add("test", "driver still missing from every CSINode 15 s later: the seed bug, reproduced")
	return nil
}

// migrateFromLegacy installs ontap-csi's DaemonSet beside the broken legacy
// one (the drop-in path: new pods start before the old ones stop), and then
// deletes the legacy DaemonSet, whose plugins unlink csi.sock and whose
// registrars unlink their sockets on the way out. Judged from the moment
// ontap-csi has registered on every node.
func migrateFromLegacy(ctx context.Context, s *suite, r *scenarioRun) error {
	if err := s.ds.create(ctx, nodeVariant{Image: pluginImageA}); err != nil {
		return err
	}
	if err := s.ds.waitRollout(ctx, rolloutTimeout); err != nil {
		return err
	}
	if err := s.waitRegistered(ctx, time.Minute); err != nil {
		return fmt.Errorf("ontap-csi never registered beside the legacy pods: %w", err)
	}
	r.from = time.Now()
	s.obs.add("test", "ontap-csi registered on every node; judging from here")
	bg := metav1.DeletePropagationBackground
	if err := s.cluster.Client.AppsV1().DaemonSets(legacyNS).Delete(ctx, legacyName, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil {
		return err
	}
	s.obs.add("test", "deleted the legacy DaemonSet")
	return pollUntil(ctx, rolloutTimeout, func() (bool, string, error) {
		left, err := s.legacyPods(ctx)
		return err == nil && len(left) == 0, fmt.Sprintf("%d legacy pods left", len(left)), nil
	})
}

func keysOf(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
