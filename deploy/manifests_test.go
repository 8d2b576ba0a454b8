package deploy

import (
	"fmt"
	"net"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/util/intstr"
)

const (
	driverName     = "csi.trident.netapp.io"
	namespace      = "ontap-csi"
	nodeDaemonSet  = "ontap-csi-node"
	controllerName = "ontap-csi-controller"
	deregisterDS   = "ontap-csi-deregister"
	mainContainer  = "ontap-csi"
	// drainTimeout is the binary's --drain-timeout default: after the
	// handover grace, calls in flight get this long to finish.
	drainTimeout = 10 * time.Second
)

// The chart with default values renders exactly the kustomize base, and with
// two replicas exactly the ha overlay. Hooks are compared separately.
func TestHelmRendersTheKustomizeObjects(t *testing.T) {
	for _, tc := range []struct {
		name, dir string
		sets      []string
	}{
		{"defaults", "kustomize/base", nil},
		{"ha", "kustomize/ha", []string{"controller.replicas=2"}},
		{"group-snapshots", "kustomize/group-snapshots", []string{"groupSnapshots=true"}},
		{"capacity", "kustomize/capacity", []string{"storageCapacity=true"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := kustomize(t, tc.dir)
			got, _ := splitHooks(helm(t, tc.sets...))
			assertSameObjects(t, want, got)
		})
	}
}

// helm uninstall's pre-delete DaemonSet is the one the kustomize uninstall
// path applies by hand.
func TestHelmUninstallHookIsTheKustomizeUninstallDaemonSet(t *testing.T) {
	_, hooks := splitHooks(helm(t))
	ds := get[*appsv1.DaemonSet](t, hooks, deregisterDS).DeepCopy()
	for k := range ds.Annotations {
		if strings.HasPrefix(k, "helm.sh/hook") {
			delete(ds.Annotations, k)
		}
	}
	if len(ds.Annotations) == 0 {
		ds.Annotations = nil
	}
	want := kustomize(t, "kustomize/uninstall")
	assertSameObjects(t, want, objects{"ds": {obj: ds, name: ds.Name, ns: ds.Namespace, gvk: appsv1.SchemeGroupVersion.WithKind("DaemonSet")}}.rekey())
}

// The hooks run in order: RBAC for the waiter, the deregister DaemonSet, then
// the Job that Helm waits for, which waits for the DaemonSet's rollout.
func TestHelmUninstallHookOrder(t *testing.T) {
	_, hooks := splitHooks(helm(t))
	weights := map[string]string{}
	for _, o := range hooks {
		m := metaOf(o)
		if got := m.Annotations["helm.sh/hook"]; got != "pre-delete" {
			t.Errorf("%s: helm.sh/hook %q, want pre-delete", o.key(), got)
		}
		weights[o.gvk.Kind+"/"+o.name] = m.Annotations["helm.sh/hook-weight"]
	}
	want := map[string]string{
		"ServiceAccount/ontap-csi-deregister-wait": "-10",
		"Role/ontap-csi-deregister-wait":           "-10",
		"RoleBinding/ontap-csi-deregister-wait":    "-10",
		"DaemonSet/" + deregisterDS:                "0",
		"Job/ontap-csi-deregister-wait":            "10",
	}
	if fmt.Sprint(weights) != fmt.Sprint(want) {
		t.Errorf("hook weights %v, want %v", weights, want)
	}
	job := get[*batchv1.Job](t, hooks, "ontap-csi-deregister-wait")
	args := strings.Join(job.Spec.Template.Spec.Containers[0].Args, " ")
	if !strings.HasPrefix(args, "rollout status daemonset/"+deregisterDS+" --namespace="+namespace+" ") {
		t.Errorf("the Job does not wait for the deregister DaemonSet: %q", args)
	}
	if sel := get[*appsv1.DaemonSet](t, hooks, deregisterDS).Spec.Selector.MatchLabels; labelsMatch(sel, job.Spec.Template.Labels) {
		t.Errorf("the Job's pod labels %v match the DaemonSet selector %v", job.Spec.Template.Labels, sel)
	}
	if _, hooks := splitHooks(helm(t, "uninstall.deregister=false")); len(hooks) != 0 {
		t.Errorf("uninstall.deregister=false still renders hooks: %v", hooks.keys())
	}
}

// The deregister pods run where the node plugin runs and see the plugin and
// registration dirs at their host paths, which `ontap-csi deregister
// --kubelet-dir` resolves.
func TestUninstallDaemonSetReachesEveryNodePlugin(t *testing.T) {
	base := kustomize(t, "kustomize/base")
	node := get[*appsv1.DaemonSet](t, base, nodeDaemonSet)
	dereg := get[*appsv1.DaemonSet](t, kustomize(t, "kustomize/uninstall"), deregisterDS)
	if !equality.Semantic.DeepEqual(node.Spec.Template.Spec.NodeSelector, dereg.Spec.Template.Spec.NodeSelector) ||
		!equality.Semantic.DeepEqual(node.Spec.Template.Spec.Tolerations, dereg.Spec.Template.Spec.Tolerations) {
		t.Errorf("deregister pods are not scheduled like the node plugin:\n%s\nvs\n%s",
			toYAML(dereg.Spec.Template.Spec), toYAML(node.Spec.Template.Spec))
	}
	init := dereg.Spec.Template.Spec.InitContainers
	if len(init) != 1 || len(init[0].Args) == 0 || init[0].Args[0] != "deregister" {
		t.Fatalf("the init container does not run `ontap-csi deregister`: %s", toYAML(init))
	}
	env := resolveEnv(t, init[0].Env, fakePod{})
	kubeletDir := expand(argValue(t, init[0].Args, "--kubelet-dir"), env)
	mounts := mountsByPath(t, &dereg.Spec.Template.Spec, &init[0])
	for _, p := range []string{path.Join(kubeletDir, "plugins", driverName), path.Join(kubeletDir, "plugins_registry")} {
		if mounts[p] == nil || mounts[p].HostPath == nil || mounts[p].HostPath.Path != p {
			t.Errorf("%s is not mounted from the host path %s", p, p)
		}
	}
}

// What the registration handover needs from the node DaemonSet, for the
// default kubelet dir and for a custom one.
func TestNodeDaemonSet(t *testing.T) {
	for _, tc := range []struct {
		name       string
		objs       func(t *testing.T) objects
		kubeletDir string
	}{
		{"kustomize", func(t *testing.T) objects { return kustomize(t, "kustomize/base") }, "/var/lib/kubelet"},
		{"helm-kubeletDir", func(t *testing.T) objects { return helm(t, "kubeletDir=/var/lib/k0s/kubelet") }, "/var/lib/k0s/kubelet"},
		{"trident-node", func(t *testing.T) objects { return kustomize(t, "kustomize/trident-node") }, "/var/lib/kubelet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.objs(t)
			ds := get[*appsv1.DaemonSet](t, objs, nodeDaemonSet)
			checkNodeDaemonSet(t, ds, tc.kubeletDir)
		})
	}
}

// node.maxVolumesPerNode becomes the node plugin's --max-volumes-per-node;
// unset, the flag is not given (no limit).
func TestHelmMaxVolumesPerNode(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want string
	}{
		{nil, ""},
		{[]string{"node.maxVolumesPerNode=32"}, "--max-volumes-per-node=32"},
	} {
		ds := get[*appsv1.DaemonSet](t, helm(t, tc.set...), nodeDaemonSet)
		var got string
		for _, a := range ds.Spec.Template.Spec.Containers[0].Args {
			if strings.HasPrefix(a, "--max-volumes-per-node") {
				got = a
			}
		}
		if got != tc.want {
			t.Errorf("%v: %q, want %q", tc.set, got, tc.want)
		}
	}
}

func checkNodeDaemonSet(t *testing.T, ds *appsv1.DaemonSet, kubeletDir string) {
	pod := &ds.Spec.Template.Spec
	checkNodeRollout(t, ds)
	c := nodeContainer(t, pod)
	args := checkNodeEnvAndArgs(t, c, kubeletDir)
	checkNodeGrace(t, pod, args)
	want := nodeHostMounts(kubeletDir)
	checkNodeMounts(t, pod, c, want)

	// The flags point into those mounts.
	if ep := argValue(t, args, "--csi_endpoint"); path.Dir(strings.TrimPrefix(ep, "unix://")) != want["plugin-dir"].mountPath {
		t.Errorf("--csi_endpoint=%s is not in the plugin dir %s", ep, want["plugin-dir"].mountPath)
	}
	if hr := argValue(t, args, "--host-root"); hr != want["host-dir"].mountPath {
		t.Errorf("--host-root=%s, want the host root mount %s", hr, want["host-dir"].mountPath)
	}
	checkProbes(t, c, args, true)
}

// checkNodeRollout checks what lets a new node pod overlap the old one on
// the node during an update, and the pod's place on the host.
func checkNodeRollout(t *testing.T, ds *appsv1.DaemonSet) {
	pod := &ds.Spec.Template.Spec
	// Surge: the new pod starts, registers and turns Ready before the old
	// one is stopped (docs/design/registration.md §5, S1).
	us := ds.Spec.UpdateStrategy
	if us.Type != appsv1.RollingUpdateDaemonSetStrategyType || us.RollingUpdate == nil ||
		!intOrStringIs(us.RollingUpdate.MaxSurge, 1) || !intOrStringIs(us.RollingUpdate.MaxUnavailable, 0) {
		t.Errorf("updateStrategy %s, want RollingUpdate with maxSurge 1, maxUnavailable 0", toYAML(us))
	}
	if ds.Spec.MinReadySeconds != 0 {
		t.Errorf("minReadySeconds %d: the readiness probe orders the handover; a delay only slows it (and can stall a surge rollout)", ds.Spec.MinReadySeconds)
	}
	// An anti-affinity would keep old and new pods apart: no overlap, no handover.
	if pod.Affinity != nil && pod.Affinity.PodAntiAffinity != nil {
		t.Errorf("pod anti-affinity forbids the surge overlap: %s", toYAML(pod.Affinity))
	}
	if pod.PriorityClassName != "system-node-critical" {
		t.Errorf("priorityClassName %q, want system-node-critical", pod.PriorityClassName)
	}
	if !pod.HostNetwork {
		t.Error("hostNetwork is off: NFS mounts and iscsid need the host's network namespace")
	}
}

// nodeContainer returns the node pod's only container: ours. No registrar,
// no livenessprobe sidecar.
func nodeContainer(t *testing.T, pod *corev1.PodSpec) *corev1.Container {
	if len(pod.Containers) != 1 || pod.Containers[0].Name != mainContainer || len(pod.InitContainers) != 0 {
		t.Fatalf("node pod containers: %v, init %v; want only %q", containerNames(pod.Containers), containerNames(pod.InitContainers), mainContainer)
	}
	c := &pod.Containers[0]
	if len(c.Ports) != 0 {
		t.Errorf("ports %v: with hostNetwork they become hostPorts and keep the surge pod off the node", c.Ports)
	}
	return c
}

// checkNodeEnvAndArgs checks the container's environment as a pod on
// node-1 resolves it, and its role and kubelet flags; it returns the
// arguments with the environment expanded.
func checkNodeEnvAndArgs(t *testing.T, c *corev1.Container, kubeletDir string) []string {
	env := resolveEnv(t, c.Env, fakePod{nodeName: "node-1", podName: "ontap-csi-node-x1", podUID: "uid-1"})
	for name, want := range map[string]string{
		"KUBE_NODE_NAME": "node-1", "POD_NAME": "ontap-csi-node-x1", "POD_UID": "uid-1", "KUBELET_DIR": kubeletDir,
	} {
		if env[name] != want {
			t.Errorf("env %s = %q, want %q (downward API or value)", name, env[name], want)
		}
	}
	args := expandAll(c.Args, env)
	if got := argValue(t, args, "--csi_role"); got != "node" {
		t.Errorf("--csi_role=%s", got)
	}
	if got := argValue(t, args, "--kubelet-dir"); got != kubeletDir {
		t.Errorf("--kubelet-dir=%s, want %s", got, kubeletDir)
	}
	return args
}

// checkNodeGrace checks the pod's termination grace: SIGTERM → wait up to
// --handover-grace for a successor → drain → exit, all before kubelet's
// SIGKILL.
func checkNodeGrace(t *testing.T, pod *corev1.PodSpec, args []string) {
	grace, err := time.ParseDuration(argValue(t, args, "--handover-grace"))
	if err != nil {
		t.Fatal(err)
	}
	if pod.TerminationGracePeriodSeconds == nil ||
		time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= grace+drainTimeout {
		t.Errorf("terminationGracePeriodSeconds %v must exceed --handover-grace %s + drain %s", pod.TerminationGracePeriodSeconds, grace, drainTimeout)
	}
}

// hostMount is a hostPath volume as the node container mounts it.
type hostMount struct {
	hostPath, mountPath string
	typ                 corev1.HostPathType
	prop                corev1.MountPropagationMode
}

// nodeHostMounts are Trident 26.06's host paths and propagation
// (docs/design/trident-compat.md §2.2), with plugins_registry mounted at its
// host path for --registration-dir.
func nodeHostMounts(kubeletDir string) map[string]hostMount {
	k := kubeletDir
	return map[string]hostMount{
		"plugin-dir":        {k + "/plugins/" + driverName, "/plugin", corev1.HostPathDirectoryOrCreate, corev1.MountPropagationNone},
		"registration-dir":  {k + "/plugins_registry", k + "/plugins_registry", corev1.HostPathDirectory, corev1.MountPropagationNone},
		"plugins-mount-dir": {k + "/plugins", k + "/plugins", corev1.HostPathDirectoryOrCreate, corev1.MountPropagationBidirectional},
		"pods-mount-dir":    {k + "/pods", k + "/pods", corev1.HostPathDirectoryOrCreate, corev1.MountPropagationBidirectional},
		"dev-dir":           {"/dev", "/dev", corev1.HostPathDirectory, corev1.MountPropagationNone},
		"sys-dir":           {"/sys", "/sys", corev1.HostPathDirectory, corev1.MountPropagationNone},
		"host-dir":          {"/", "/host", corev1.HostPathDirectory, corev1.MountPropagationBidirectional},
		"tracking-dir":      {"/var/lib/trident/tracking", "/var/lib/trident/tracking", corev1.HostPathDirectoryOrCreate, corev1.MountPropagationBidirectional},
	}
}

// checkNodeMounts checks that c mounts exactly the want host paths (plus
// Trident's client certificates), and is privileged for the Bidirectional
// ones.
func checkNodeMounts(t *testing.T, pod *corev1.PodSpec, c *corev1.Container, want map[string]hostMount) {
	volumes := map[string]*corev1.Volume{}
	for i := range pod.Volumes {
		volumes[pod.Volumes[i].Name] = &pod.Volumes[i]
	}
	seen := map[string]bool{}
	for _, m := range c.VolumeMounts {
		seen[m.Name] = true
		w, ok := want[m.Name]
		if !ok {
			if m.Name == "certs" && m.MountPath == "/certs" && m.ReadOnly && volumes[m.Name].Secret != nil {
				continue // trident-node: Trident's client certificates
			}
			t.Errorf("unexpected mount %s at %s", m.Name, m.MountPath)
			continue
		}
		v := volumes[m.Name]
		if v == nil || v.HostPath == nil {
			t.Errorf("volume %s is not a hostPath", m.Name)
			continue
		}
		prop := corev1.MountPropagationNone
		if m.MountPropagation != nil {
			prop = *m.MountPropagation
		}
		typ := corev1.HostPathUnset
		if v.HostPath.Type != nil {
			typ = *v.HostPath.Type
		}
		got := hostMount{path.Clean(v.HostPath.Path), m.MountPath, typ, prop}
		if got != w {
			t.Errorf("volume %s: %+v, want %+v", m.Name, got, w)
		}
	}
	for name := range want {
		if !seen[name] {
			t.Errorf("volume %s is not mounted", name)
		}
	}
	if prop := c.SecurityContext; prop == nil || prop.Privileged == nil || !*prop.Privileged {
		t.Error("Bidirectional propagation needs a privileged container")
	}
}

// Liveness on /healthz and readiness on /readyz, both served by
// --metrics-address; in a pod on the host network (hostNetwork), asked of
// the pod's own process with `ontap-csi probe`, which needs POD_UID.
func checkProbes(t *testing.T, c *corev1.Container, args []string, hostNetwork bool) {
	t.Helper()
	_, port, err := net.SplitHostPort(argValue(t, args, "--metrics-address"))
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"liveness", c.LivenessProbe, "/healthz"}, {"readiness", c.ReadinessProbe, "/readyz"}} {
		if hostNetwork {
			want := []string{c.Command[0], "probe", strings.TrimPrefix(p.path, "/")}
			if p.probe == nil || p.probe.Exec == nil || !slices.Equal(p.probe.Exec.Command, want) {
				t.Errorf("%s: %s probe %+v, want exec %v", c.Name, p.what, p.probe, want)
			}
			uid := false
			for _, e := range c.Env {
				uid = uid || e.Name == "POD_UID" && e.ValueFrom != nil && e.ValueFrom.FieldRef != nil && e.ValueFrom.FieldRef.FieldPath == "metadata.uid"
			}
			if !uid {
				t.Errorf("%s: no POD_UID from metadata.uid for the probes", c.Name)
			}
			continue
		}
		if p.probe == nil || p.probe.HTTPGet == nil {
			t.Errorf("%s: no %s httpGet probe", c.Name, p.what)
			continue
		}
		g := p.probe.HTTPGet
		if g.Path != p.path || probePort(c, g.Port) != port {
			t.Errorf("%s: %s probe %s on port %s, want %s on %s", c.Name, p.what, g.Path, probePort(c, g.Port), p.path, port)
		}
	}
	if c.StartupProbe != nil {
		t.Errorf("%s: unexpected startup probe", c.Name)
	}
}

func probePort(c *corev1.Container, p intstr.IntOrString) string {
	if p.Type == intstr.Int {
		return p.String()
	}
	for _, cp := range c.Ports {
		if cp.Name == p.StrVal {
			return fmt.Sprint(cp.ContainerPort)
		}
	}
	return "<unknown port " + p.StrVal + ">"
}

// The controller: ontap-csi plus Trident 26.06's four sidecars and their
// arguments; leader election exactly when there is more than one replica.
func TestControllerDeployment(t *testing.T) {
	for _, tc := range []struct {
		name     string
		objs     func(t *testing.T) objects
		replicas int32
	}{
		{"single", func(t *testing.T) objects { return kustomize(t, "kustomize/base") }, 1},
		{"ha", func(t *testing.T) objects { return kustomize(t, "kustomize/ha") }, 2},
		{"helm-3", func(t *testing.T) objects { return helm(t, "controller.replicas=3") }, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			objs := tc.objs(t)
			d := get[*appsv1.Deployment](t, objs, controllerName)
			if d.Spec.Replicas == nil || *d.Spec.Replicas != tc.replicas {
				t.Fatalf("replicas %v, want %d", d.Spec.Replicas, tc.replicas)
			}
			ha := tc.replicas > 1
			wantStrategy := appsv1.RecreateDeploymentStrategyType
			if ha {
				wantStrategy = appsv1.RollingUpdateDeploymentStrategyType
			}
			if d.Spec.Strategy.Type != wantStrategy {
				t.Errorf("strategy %s, want %s", d.Spec.Strategy.Type, wantStrategy)
			}
			pod := &d.Spec.Template.Spec
			if pod.PriorityClassName != "system-cluster-critical" {
				t.Errorf("priorityClassName %q", pod.PriorityClassName)
			}
			if pod.HostNetwork {
				t.Error("the controller needs no host network")
			}
			if got := containerNames(pod.Containers); got != "ontap-csi csi-provisioner csi-attacher csi-resizer csi-snapshotter" {
				t.Fatalf("containers %q", got)
			}
			main := &pod.Containers[0]
			env := resolveEnv(t, main.Env, fakePod{})
			args := expandAll(main.Args, env)
			if argValue(t, args, "--csi_role") != "controller" {
				t.Errorf("--csi_role in %v", args)
			}
			checkProbes(t, main, args, false)
			socketDir := path.Dir(strings.TrimPrefix(argValue(t, args, "--csi_endpoint"), "unix://"))
			mounts := mountsByPath(t, pod, main)
			if v := mounts[socketDir]; v == nil || v.EmptyDir == nil {
				t.Errorf("the CSI socket dir %s is not an emptyDir shared with the sidecars", socketDir)
			}

			// Trident 26.06: config/config.go image tags and
			// csiDeployment120YAMLTemplate arguments.
			sidecars := map[string]struct{ image, workers string }{
				"csi-provisioner": {"registry.k8s.io/sig-storage/csi-provisioner:v6.3.0", "--worker-threads=25"},
				"csi-attacher":    {"registry.k8s.io/sig-storage/csi-attacher:v4.11.0", "--worker-threads=25"},
				"csi-resizer":     {"registry.k8s.io/sig-storage/csi-resizer:v2.1.0", "--workers=25"},
				"csi-snapshotter": {"registry.k8s.io/sig-storage/csi-snapshotter:v8.6.0", "--worker-threads=25"},
			}
			for i := range pod.Containers[1:] {
				c := &pod.Containers[1+i]
				w := sidecars[c.Name]
				if c.Image != w.image {
					t.Errorf("%s image %s, want %s", c.Name, c.Image, w.image)
				}
				want := []string{"--v=2", "--csi-address=$(ADDRESS)", w.workers, "--timeout=600s",
					"--retry-interval-start=10s", "--retry-interval-max=300s", "--kube-api-qps=25.0", "--kube-api-burst=50"}
				if c.Name == "csi-provisioner" {
					// The claim a CreateVolume is for, for its
					// trident.netapp.io annotations.
					want = append(want, "--extra-create-metadata")
				}
				if ha {
					want = append(want, "--leader-election")
				}
				if strings.Join(c.Args, " ") != strings.Join(want, " ") {
					t.Errorf("%s args\n got %v\nwant %v", c.Name, c.Args, want)
				}
				senv := resolveEnv(t, c.Env, fakePod{})
				addr := expand("$(ADDRESS)", senv)
				if m := mountsByPath(t, pod, c)[path.Dir(addr)]; m == nil || m.Name != mounts[socketDir].Name {
					t.Errorf("%s: --csi-address %s is not in the shared socket dir", c.Name, addr)
				}
			}
			_, hasLeaseRole := objs[fmt.Sprintf("rbac.authorization.k8s.io/v1/Role %s/ontap-csi-leader-election", namespace)]
			if hasLeaseRole != ha {
				t.Errorf("leader-election Role rendered: %v, want %v", hasLeaseRole, ha)
			}
		})
	}
}

// Nothing in any rendering carries a registrar or livenessprobe sidecar, and
// every image is pinned to a version.
func TestNoRegistrarAndPinnedImages(t *testing.T) {
	sets := map[string]objects{
		"kustomize/base":         kustomize(t, "kustomize/base"),
		"kustomize/ha":           kustomize(t, "kustomize/ha"),
		"kustomize/uninstall":    kustomize(t, "kustomize/uninstall"),
		"kustomize/trident-node": kustomize(t, "kustomize/trident-node"),
		"helm":                   helm(t),
		"helm-ha":                helm(t, "controller.replicas=2"),
		"kustomize/capacity":     kustomize(t, "kustomize/capacity"),
	}
	for what, objs := range sets {
		n := 0
		for _, o := range objs {
			spec := podSpecOf(o)
			if spec == nil {
				continue
			}
			for _, c := range append(append([]corev1.Container{}, spec.InitContainers...), spec.Containers...) {
				n++
				text := strings.ToLower(c.Name + " " + c.Image + " " + strings.Join(c.Args, " "))
				for _, banned := range []string{"registrar", "livenessprobe", "kubelet-registration-path"} {
					if strings.Contains(text, banned) {
						t.Errorf("%s: %s container %s: %q", what, o.key(), c.Name, banned)
					}
				}
				if !pinned(c.Image) {
					t.Errorf("%s: %s container %s: image %q is not pinned to a version", what, o.key(), c.Name, c.Image)
				}
			}
		}
		if n == 0 {
			t.Errorf("%s: no containers found", what)
		}
	}
}

func TestCSIDriver(t *testing.T) {
	for what, objs := range map[string]objects{"kustomize": kustomize(t, "kustomize/base"), "helm": helm(t)} {
		d := get[*storagev1.CSIDriver](t, objs, driverName)
		s := d.Spec
		if s.AttachRequired == nil || !*s.AttachRequired {
			t.Errorf("%s: attachRequired must be true (ControllerPublishVolume maps LUNs and export rules)", what)
		}
		if s.FSGroupPolicy == nil || *s.FSGroupPolicy != storagev1.ReadWriteOnceWithFSTypeFSGroupPolicy {
			t.Errorf("%s: fsGroupPolicy %v, want ReadWriteOnceWithFSType (Trident 26.06)", what, s.FSGroupPolicy)
		}
		if s.PodInfoOnMount != nil && *s.PodInfoOnMount {
			t.Errorf("%s: podInfoOnMount: Trident does not set it", what)
		}
	}
}

// Storage capacity tracking is opt-in (kustomize/capacity, Helm
// storageCapacity=true), and where it is on, every piece csi-provisioner
// v6.3.0 needs for it is there: --enable-capacity; NAMESPACE and POD_NAME
// from the downward API, which it needs to start (the objects' namespace)
// and to find their owner; --capacity-ownerref-level=2, because its pod
// belongs to a ReplicaSet of a Deployment and the objects should outlive
// the pod; the Role for its objects in that same namespace; and the
// CSIDriver's storageCapacity, without which the scheduler ignores them.
// Off, none of it is rendered.
func TestStorageCapacity(t *testing.T) {
	for _, tc := range []struct {
		what string
		objs objects
		on   bool
	}{
		{"kustomize/base", kustomize(t, "kustomize/base"), false},
		{"kustomize/ha", kustomize(t, "kustomize/ha"), false},
		{"helm", helm(t), false},
		{"kustomize/capacity", kustomize(t, "kustomize/capacity"), true},
		{"helm-capacity", helm(t, "storageCapacity=true"), true},
		{"helm-capacity-ha", helm(t, "storageCapacity=true", "controller.replicas=2"), true},
	} {
		t.Run(strings.ReplaceAll(tc.what, "/", "-"), func(t *testing.T) {
			d := get[*appsv1.Deployment](t, tc.objs, controllerName)
			var prov *corev1.Container
			for i, c := range d.Spec.Template.Spec.Containers {
				if c.Name == "csi-provisioner" {
					prov = &d.Spec.Template.Spec.Containers[i]
				}
			}
			if prov == nil {
				t.Fatal("no csi-provisioner container")
			}
			enabled := slices.Contains(prov.Args, "--enable-capacity")
			driver := get[*storagev1.CSIDriver](t, tc.objs, driverName)
			scheduled := driver.Spec.StorageCapacity != nil && *driver.Spec.StorageCapacity
			_, hasRole := tc.objs[fmt.Sprintf("rbac.authorization.k8s.io/v1/Role %s/ontap-csi-provisioner-capacity", namespace)]
			if enabled != tc.on || scheduled != tc.on || hasRole != tc.on {
				t.Fatalf("--enable-capacity %v, CSIDriver storageCapacity %v, capacity Role %v; want all %v", enabled, scheduled, hasRole, tc.on)
			}
			env := resolveEnv(t, prov.Env, fakePod{podName: "ontap-csi-controller-5d8f-x1", namespace: d.Namespace})
			if !tc.on {
				if _, ok := env["POD_NAME"]; ok || slices.ContainsFunc(prov.Args, func(a string) bool { return strings.HasPrefix(a, "--capacity") }) {
					t.Errorf("capacity off, yet env %v args %v", env, prov.Args)
				}
				return
			}
			if env["NAMESPACE"] != namespace || env["POD_NAME"] != "ontap-csi-controller-5d8f-x1" {
				t.Errorf("NAMESPACE %q, POD_NAME %q: want the pod's own namespace and name", env["NAMESPACE"], env["POD_NAME"])
			}
			// pod (0) -> ReplicaSet (1) -> Deployment (2).
			if lvl := argValue(t, prov.Args, "--capacity-ownerref-level"); lvl != "2" {
				t.Errorf("--capacity-ownerref-level=%s, want 2: the provisioner runs in a Deployment", lvl)
			}
			b := get[*rbacv1.RoleBinding](t, tc.objs, "ontap-csi-provisioner-capacity")
			if b.Namespace != env["NAMESPACE"] || len(b.Subjects) != 1 || b.Subjects[0].Name != d.Spec.Template.Spec.ServiceAccountName {
				t.Errorf("the capacity RoleBinding in %s grants to %v; want the namespace the objects go to (%s) and the controller's ServiceAccount %s",
					b.Namespace, b.Subjects, env["NAMESPACE"], d.Spec.Template.Spec.ServiceAccountName)
			}
		})
	}
}

// A grace period that leaves no room for the handover is refused at render
// time.
func TestHelmRefusesShortGracePeriod(t *testing.T) {
	out, err := toolErr(t, "helm", helmArgs(t, "node.handoverGraceSeconds=30", "node.terminationGracePeriodSeconds=40")...)
	if err == nil || !strings.Contains(out, "terminationGracePeriodSeconds must exceed") {
		t.Fatalf("helm template accepted a 40 s grace period for a 30 s handover: %v\n%s", err, out)
	}
	ds := get[*appsv1.DaemonSet](t, helm(t, "node.handoverGraceSeconds=30", "node.terminationGracePeriodSeconds=50"), nodeDaemonSet)
	if a := strings.Join(ds.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(a, "--handover-grace=30s") {
		t.Errorf("args %q lack --handover-grace=30s", a)
	}
}

// trident-node puts the node plugin alone into Trident's namespace.
func TestTridentNodeOverlay(t *testing.T) {
	objs := kustomize(t, "kustomize/trident-node")
	var kinds []string
	for _, k := range objs.keys() {
		o := objs[k]
		kinds = append(kinds, o.gvk.Kind+"/"+o.name)
		if m := metaOf(o); o.gvk.Kind != "ClusterRole" && o.gvk.Kind != "ClusterRoleBinding" && m.Namespace != "trident" {
			t.Errorf("%s is not in namespace trident", k)
		}
	}
	if got := strings.Join(kinds, " "); got != "DaemonSet/ontap-csi-node ClusterRole/ontap-csi-node ClusterRoleBinding/ontap-csi-node ServiceAccount/ontap-csi-node" {
		t.Errorf("objects: %s", got)
	}
	crb := get[*rbacv1.ClusterRoleBinding](t, objs, "ontap-csi-node")
	if len(crb.Subjects) != 1 || crb.Subjects[0].Namespace != "trident" {
		t.Errorf("binding subjects %v, want the ServiceAccount in trident", crb.Subjects)
	}
}

// ---- helpers ----

// splitHooks separates Helm hooks from the release's objects.
func splitHooks(objs objects) (release, hooks objects) {
	release, hooks = objects{}, objects{}
	for k, o := range objs {
		if _, ok := metaOf(o).Annotations["helm.sh/hook"]; ok {
			hooks[k] = o
		} else {
			release[k] = o
		}
	}
	return release, hooks
}

func (objs objects) rekey() objects {
	out := objects{}
	for _, o := range objs {
		out[o.key()] = o
	}
	return out
}

func assertSameObjects(t *testing.T, want, got objects) {
	t.Helper()
	if w, g := strings.Join(want.keys(), "\n"), strings.Join(got.keys(), "\n"); w != g {
		t.Fatalf("different objects\nwant:\n%s\n got:\n%s", w, g)
	}
	for k, w := range want {
		g := got[k]
		if !equality.Semantic.DeepEqual(w.obj, g.obj) {
			t.Errorf("%s differs:\n%s", k, lineDiff(toYAML(w.obj), toYAML(g.obj)))
		}
	}
}

// lineDiff shows the lines that differ, with the line numbers of each side.
func lineDiff(want, got string) string {
	wl, gl := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < len(wl) || i < len(gl); i++ {
		var w, g string
		if i < len(wl) {
			w = wl[i]
		}
		if i < len(gl) {
			g = gl[i]
		}
		if w != g {
			fmt.Fprintf(&b, "%4d want: %s\n%4d  got: %s\n", i+1, w, i+1, g)
		}
	}
	return b.String()
}

type objectMeta struct {
	Namespace   string
	Annotations map[string]string
}

func metaOf(o object) objectMeta {
	m := o.obj.(interface {
		GetNamespace() string
		GetAnnotations() map[string]string
	})
	return objectMeta{Namespace: m.GetNamespace(), Annotations: m.GetAnnotations()}
}

func podSpecOf(o object) *corev1.PodSpec {
	switch v := o.obj.(type) {
	case *appsv1.DaemonSet:
		return &v.Spec.Template.Spec
	case *appsv1.Deployment:
		return &v.Spec.Template.Spec
	case *batchv1.Job:
		return &v.Spec.Template.Spec
	case *corev1.Pod:
		return &v.Spec
	}
	return nil
}

func containerNames(cs []corev1.Container) string {
	names := make([]string, len(cs))
	for i, c := range cs {
		names[i] = c.Name
	}
	return strings.Join(names, " ")
}

func intOrStringIs(v *intstr.IntOrString, n int) bool {
	return v != nil && v.Type == intstr.Int && v.IntValue() == n
}

func labelsMatch(selector, labels map[string]string) bool {
	for k, v := range selector {
		if labels[k] != v {
			return false
		}
	}
	return true
}

// pinned: a tag that starts with a version number, or a digest.
func pinned(image string) bool {
	if strings.Contains(image, "@sha256:") {
		return true
	}
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		return false
	}
	tag := strings.TrimPrefix(image[i+1:], "v")
	return tag != "" && tag[0] >= '0' && tag[0] <= '9'
}

// mountsByPath maps each mount path of c to its pod volume.
func mountsByPath(t *testing.T, pod *corev1.PodSpec, c *corev1.Container) map[string]*corev1.Volume {
	t.Helper()
	out := map[string]*corev1.Volume{}
	for _, m := range c.VolumeMounts {
		found := false
		for i := range pod.Volumes {
			if pod.Volumes[i].Name == m.Name {
				out[path.Clean(m.MountPath)] = &pod.Volumes[i]
				found = true
			}
		}
		if !found {
			t.Errorf("%s mounts undefined volume %s", c.Name, m.Name)
		}
	}
	return out
}

// argValue returns the value of --name=value in args; it fails the test
// when the flag is missing or given twice.
func argValue(t *testing.T, args []string, name string) string {
	t.Helper()
	var val string
	n := 0
	for _, a := range args {
		if v, ok := strings.CutPrefix(a, name+"="); ok {
			val = v
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%s given %d times in %v", name, n, args)
	}
	return val
}

// fakePod supplies the downward API fields a pod would have.
type fakePod struct{ nodeName, podName, podUID, namespace string }

// resolveEnv computes a container's environment as kubelet does: values
// (with $(VAR) references to earlier variables) and downward API fields.
func resolveEnv(t *testing.T, vars []corev1.EnvVar, p fakePod) map[string]string {
	t.Helper()
	env := map[string]string{}
	for _, v := range vars {
		switch {
		case v.ValueFrom == nil:
			env[v.Name] = expand(v.Value, env)
		case v.ValueFrom.FieldRef != nil:
			switch v.ValueFrom.FieldRef.FieldPath {
			case "spec.nodeName":
				env[v.Name] = p.nodeName
			case "metadata.name":
				env[v.Name] = p.podName
			case "metadata.uid":
				env[v.Name] = p.podUID
			case "metadata.namespace":
				env[v.Name] = p.namespace
			default:
				t.Fatalf("env %s: unexpected fieldRef %s", v.Name, v.ValueFrom.FieldRef.FieldPath)
			}
		default:
			t.Fatalf("env %s: unexpected valueFrom %s", v.Name, toYAML(v.ValueFrom))
		}
	}
	return env
}

// expand replaces $(VAR) with the variable's value as kubelet does: an
// undefined reference stays as written and $$ is a literal $.
func expand(s string, env map[string]string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := env[name]; ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}

func expandAll(args []string, env map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = expand(a, env)
	}
	return out
}
