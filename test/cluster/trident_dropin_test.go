package cluster_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

// Scenario 9 (issue 20): the drop-in users do. Trident's own node
// DaemonSet and controller Deployment, as trident-operator 26.06 and
// `tridentctl install` 20.10 render them (docs/design/trident-compat.md §2),
// with only Trident's image swapped for ontap-csi's, run in place of the
// suite's deploy/ install, and put through the rollouts Trident's
// installers do. node-driver-registrar is not served by the module proxy,
// so its container runs the legacy registrar emulation (/legacyregistrar
// of the tools image, docs/design/registration.md §7.6) with the
// registrar's own arguments.
//
// What the suite changes in Trident's objects, and nothing else (the same
// swaps as in deploy/'s objects, swaps_test.go, and the ones a cluster
// without kube-proxy needs):
//   - images: ontap-csi's local tags for trident-main, the tools image for
//     the registrar, the suite's sidecar images (the stand-ins for
//     csi-provisioner and csi-resizer) with the arguments deploy/ gives
//     them, which are Trident 26.06's, for both releases;
//   - the shims' environment and arguments on trident-main (shimEnv,
//     shimArgs);
//   - TRIDENT_CSI_SERVICE_HOST/PORT on the node's trident-main: the
//     controller pod's address and port, as kube-proxy would forward the
//     trident-csi Service's ClusterIP (the local cluster has none,
//     docs/design/local-cluster.md §8);
//   - no trident-autosupport container, no trident-encryption-keys in the
//     certs volume (ontap-csi reads neither).
// Trident's ClusterRoles are not in the repository: the controller's is
// deploy/'s controller grants (which cover Trident's CRDs) plus every verb
// on trident.netapp.io, Secrets and Leases, as Trident's is broad; 26.06's
// node role grants get on Nodes (docs/design/trident-compat.md §3.1), and
// 20.10's node pods run with the controller's account, as 20.10 did.

const (
	tridentNS          = legacyNS // "trident", where 7.0a's legacy DaemonSet ran
	tridentServiceName = "trident-csi"
	tridentCertsSecret = "trident-csi"
	tridentCredsSecret = "e2e-ontap-credentials"
	tridentNodeLabel   = "node.csi.trident.netapp.io"
	tridentCtrlLabel   = "controller.csi.trident.netapp.io"
	tridentHTTPSPort   = 8443  // the controller's node API behind trident-csi
	tridentProbePort   = 17546 // 26.06 node probes (--https_port)
	tridentRegPath     = "/var/lib/kubelet/plugins/" + driverName + "/csi.sock"
)

// tridentRelease is one release's shape of Trident's objects.
type tridentRelease struct {
	version        string
	node, ctrl     string // DaemonSet and Deployment names
	registrar      string // the registrar container's name
	ctrlSA, nodeSA string
	nodeArgs       []string
	ctrlArgs       []string
	// v2606: 26.06's additions (docs/design/trident-compat.md §2.2, §2.3):
	// anti-affinity, priority classes, read-only roots, probes, KUBELET_DIR,
	// POD_NAMESPACE, Bidirectional plugins and tracking mounts.
	v2606 bool
}

// tridentReleases: arguments as cmd/ontap-csi/trident_args_test.go has
// them (the operator's defaults filled in).
var tridentReleases = map[string]tridentRelease{
	"26.06": {
		version: "26.06", node: "trident-node-linux", ctrl: "trident-controller", registrar: "node-driver-registrar",
		ctrlSA: "trident-controller", nodeSA: "trident-node-linux", v2606: true,
		nodeArgs: []string{"--no_persistence", "--k8s_pod", "--rest=false", "--csi_node_name=$(KUBE_NODE_NAME)",
			"--csi_endpoint=$(CSI_ENDPOINT)", "--csi_role=node", "--log_format=text", "--log_level=info",
			"--log_workflows=", "--log_layers=", "--disable_audit_log=true", "--http_request_timeout=1m30s",
			"--https_rest", fmt.Sprintf("--https_port=%d", tridentProbePort), "--enable_force_detach=false",
			"--iscsi_self_healing_interval=5m0s", "--iscsi_self_healing_wait_time=7m0s", "-debug",
			"--k8s_api_qps=100.0", "--k8s_api_burst=200"},
		ctrlArgs: []string{"--crd_persistence", "--k8s_pod", "--https_rest", "--https_port=8443",
			"--csi_node_name=$(KUBE_NODE_NAME)", "--csi_endpoint=$(CSI_ENDPOINT)", "--csi_role=controller",
			"--log_format=text", "--log_level=info", "--log_workflows=", "--log_layers=", "--disable_audit_log=true",
			"--address=127.0.0.1", "--http_request_timeout=1m30s", "--enable_force_detach=false",
			"--enable_concurrency=false", "--metrics", "-debug", "--k8s_api_qps=100.0", "--k8s_api_burst=200"},
	},
	"20.10": {
		version: "20.10", node: "trident-csi", ctrl: "trident-csi", registrar: "driver-registrar",
		ctrlSA: "trident-csi", nodeSA: "trident-csi",
		nodeArgs: []string{"--no_persistence", "--rest=false", "--csi_node_name=$(KUBE_NODE_NAME)",
			"--csi_endpoint=$(CSI_ENDPOINT)", "--csi_role=node", "--log_format=text", "--node_prep=true"},
		ctrlArgs: []string{"--crd_persistence", "--k8s_pod", "--https_rest", "--https_port=8443",
			"--csi_node_name=$(KUBE_NODE_NAME)", "--csi_endpoint=$(CSI_ENDPOINT)", "--csi_role=controller",
			"--log_format=text", "--address=127.0.0.1", "--metrics"},
	},
}

func hostPathVolume(name, path string, t corev1.HostPathType) corev1.Volume {
	return corev1.Volume{Name: name, VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: path, Type: ptr.To(t)}}}
}

// tridentNodeDaemonSet is the release's node DaemonSet (docs/design/trident-compat.md
// §2.1, §2.2) with trident-main on image, reporting to the controller at
// ctrlIP.
func tridentNodeDaemonSet(rel tridentRelease, image, ctrlIP string, sim simEndpoint) *appsv1.DaemonSet {
	labels := map[string]string{"app": tridentNodeLabel}
	bidir := ptr.To(corev1.MountPropagationBidirectional)
	var since22 *corev1.MountPropagationMode // 20.10: none on plugins and tracking
	if rel.v2606 {
		since22 = bidir
	}
	env := []corev1.EnvVar{
		{Name: "KUBE_NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "CSI_ENDPOINT", Value: "unix://plugin/csi.sock"},
		{Name: "PATH", Value: "/netapp:/bin"},
	}
	if rel.v2606 {
		env = append(env, corev1.EnvVar{Name: "KUBELET_DIR", Value: "/var/lib/kubelet"})
	}
	// Harness swaps: kube-proxy's job, and the shims.
	env = append(env,
		corev1.EnvVar{Name: "TRIDENT_CSI_SERVICE_HOST", Value: ctrlIP},
		corev1.EnvVar{Name: "TRIDENT_CSI_SERVICE_PORT", Value: fmt.Sprint(tridentHTTPSPort)})
	env = append(env, shimEnv(sim)...)
	main := corev1.Container{
		Name: "trident-main", Image: image, ImagePullPolicy: corev1.PullNever,
		Command: []string{"/trident_orchestrator"},
		Args:    append(append([]string{}, rel.nodeArgs...), shimArgs("/host")...),
		Env:     env,
		SecurityContext: &corev1.SecurityContext{
			Privileged: ptr.To(true), AllowPrivilegeEscalation: ptr.To(true),
			Capabilities: &corev1.Capabilities{Add: []corev1.Capability{"SYS_ADMIN"}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "plugin-dir", MountPath: "/plugin"},
			{Name: "plugins-mount-dir", MountPath: "/var/lib/kubelet/plugins", MountPropagation: since22},
			{Name: "pods-mount-dir", MountPath: "/var/lib/kubelet/pods", MountPropagation: bidir},
			{Name: "dev-dir", MountPath: "/dev"},
			{Name: "sys-dir", MountPath: "/sys"},
			{Name: "host-dir", MountPath: "/host", MountPropagation: bidir},
			{Name: "trident-tracking-dir", MountPath: "/var/lib/trident/tracking", MountPropagation: since22},
			{Name: "certs", MountPath: "/certs", ReadOnly: true},
		},
	}
	if rel.v2606 {
		main.SecurityContext.ReadOnlyRootFilesystem = ptr.To(true)
		main.SecurityContext.Capabilities.Drop = []corev1.Capability{"ALL"}
		probe := func(path string, failures int32) *corev1.Probe {
			return &corev1.Probe{
				ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
					Scheme: corev1.URISchemeHTTPS, Path: path, Port: intstr.FromInt32(tridentProbePort)}},
				PeriodSeconds: 10, TimeoutSeconds: 1, FailureThreshold: failures,
			}
		}
		main.StartupProbe = probe("/liveness", 24)
		main.LivenessProbe = probe("/liveness", 3)
		main.ReadinessProbe = probe("/readiness", 5)
	}
	registrar := corev1.Container{
		Name: rel.registrar, Image: toolsImage, ImagePullPolicy: corev1.PullNever,
		Command: []string{"/legacyregistrar"},
		Args:    []string{"--v=2", "--csi-address=$(ADDRESS)", "--kubelet-registration-path=$(REGISTRATION_PATH)"},
		Env: []corev1.EnvVar{
			{Name: "ADDRESS", Value: "/plugin/csi.sock"},
			{Name: "REGISTRATION_PATH", Value: tridentRegPath},
			{Name: "KUBE_NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		},
		VolumeMounts: []corev1.VolumeMount{
			{Name: "plugin-dir", MountPath: "/plugin"},
			{Name: "registration-dir", MountPath: "/registration"},
		},
	}
	spec := corev1.PodSpec{
		ServiceAccountName: rel.nodeSA,
		HostNetwork:        true, HostIPC: true, HostPID: true,
		DNSPolicy: corev1.DNSClusterFirstWithHostNet,
		Tolerations: []corev1.Toleration{
			{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute},
			{Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule},
		},
		Containers: []corev1.Container{main, registrar},
		Volumes: []corev1.Volume{
			hostPathVolume("plugin-dir", "/var/lib/kubelet/plugins/"+driverName+"/", corev1.HostPathDirectoryOrCreate),
			hostPathVolume("registration-dir", "/var/lib/kubelet/plugins_registry/", corev1.HostPathDirectory),
			hostPathVolume("plugins-mount-dir", "/var/lib/kubelet/plugins", corev1.HostPathDirectoryOrCreate),
			hostPathVolume("pods-mount-dir", "/var/lib/kubelet/pods", corev1.HostPathDirectoryOrCreate),
			hostPathVolume("dev-dir", "/dev", corev1.HostPathDirectory),
			hostPathVolume("sys-dir", "/sys", corev1.HostPathDirectory),
			hostPathVolume("host-dir", "/", corev1.HostPathDirectory),
			hostPathVolume("trident-tracking-dir", "/var/lib/trident/tracking", corev1.HostPathDirectoryOrCreate),
			{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tridentCertsSecret}}},
		},
	}
	annotations := map[string]string{}
	if rel.v2606 {
		spec.PriorityClassName = "system-node-critical"
		annotations["openshift.io/required-scc"] = "privileged"
		spec.Affinity = &corev1.Affinity{
			NodeAffinity: &corev1.NodeAffinity{RequiredDuringSchedulingIgnoredDuringExecution: &corev1.NodeSelector{
				NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
					{Key: "kubernetes.io/arch", Operator: corev1.NodeSelectorOpIn, Values: []string{"arm64", "amd64"}},
					{Key: "kubernetes.io/os", Operator: corev1.NodeSelectorOpIn, Values: []string{"linux"}},
				}}},
			}},
			// 23.07+: a new node pod cannot start while the old one exists
			// (docs/design/trident-compat.md §1).
			PodAntiAffinity: &corev1.PodAntiAffinity{RequiredDuringSchedulingIgnoredDuringExecution: []corev1.PodAffinityTerm{{
				LabelSelector: &metav1.LabelSelector{MatchLabels: labels}, TopologyKey: "kubernetes.io/hostname",
			}}},
		}
	} else {
		spec.NodeSelector = map[string]string{"kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64"}
	}
	return &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Name: rel.node, Namespace: tridentNS, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels, Annotations: annotations}, Spec: spec},
		},
	}
}

// tridentControllerDeployment is the release's controller Deployment
// (docs/design/trident-compat.md §2.3) with trident-main on image and the
// suite's sidecars.
func (s *suite) tridentControllerDeployment(rel tridentRelease, image string) (*appsv1.Deployment, error) {
	labels := map[string]string{"app": tridentCtrlLabel}
	rendered, err := s.m.controllerDeployment()
	if err != nil {
		return nil, err
	}
	env := []corev1.EnvVar{
		{Name: "KUBE_NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
		{Name: "CSI_ENDPOINT", Value: "unix://plugin/csi.sock"},
		{Name: "TRIDENT_SERVER", Value: "127.0.0.1:8000"},
	}
	if rel.v2606 {
		env = append(env, corev1.EnvVar{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}})
	}
	version := &corev1.Probe{
		ProbeHandler:        corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"tridentctl", "-s", "127.0.0.1:8000", "version"}}},
		InitialDelaySeconds: 120, PeriodSeconds: 120, TimeoutSeconds: 90,
	}
	main := corev1.Container{
		Name: "trident-main", Image: image, ImagePullPolicy: corev1.PullNever,
		Command: []string{"/trident_orchestrator"}, Args: rel.ctrlArgs, Env: env,
		Ports:         []corev1.ContainerPort{{Name: "https", ContainerPort: tridentHTTPSPort}, {Name: "metrics", ContainerPort: 8001}},
		LivenessProbe: version,
		VolumeMounts: []corev1.VolumeMount{
			{Name: "socket-dir", MountPath: "/plugin"},
			{Name: "certs", MountPath: "/certs", ReadOnly: true},
		},
	}
	if rel.v2606 {
		ready := version.DeepCopy()
		ready.InitialDelaySeconds, ready.PeriodSeconds, ready.TimeoutSeconds = 0, 5, 30
		main.ReadinessProbe = ready
		main.SecurityContext = &corev1.SecurityContext{ReadOnlyRootFilesystem: ptr.To(true)}
	}
	containers := []corev1.Container{main}
	for _, c := range rendered.Spec.Template.Spec.Containers {
		if c.Name == "ontap-csi" {
			continue
		}
		// The operator's sidecars: no leader election (one replica) and
		// no --extra-create-metadata (docs/operator.md).
		var args []string
		for _, a := range c.Args {
			if a != "--leader-election" && a != "--extra-create-metadata" {
				args = append(args, a)
			}
		}
		c.Args = args
		containers = append(containers, c)
	}
	spec := corev1.PodSpec{
		ServiceAccountName: rel.ctrlSA,
		NodeSelector:       map[string]string{"kubernetes.io/os": "linux"},
		Containers:         containers,
		Volumes: []corev1.Volume{
			{Name: "socket-dir", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			{Name: "certs", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: tridentCertsSecret}}},
		},
	}
	if rel.v2606 {
		spec.PriorityClassName = "system-cluster-critical"
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: rel.ctrl, Namespace: tridentNS, Labels: labels},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Strategy: appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: spec},
		},
	}, nil
}

// tridentCRD is a structural CRD of Trident's group whose objects keep any
// field: ontap-csi reads and writes Trident's fields, the API server need
// not check them.
func tridentCRD(plural, kind string, status bool) *unstructured.Unstructured {
	version := map[string]any{
		"name": "v1", "served": true, "storage": true,
		"schema": map[string]any{"openAPIV3Schema": map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
	}
	if status {
		version["subresources"] = map[string]any{"status": map[string]any{}}
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
		"metadata": map[string]any{"name": plural + ".trident.netapp.io"},
		"spec": map[string]any{
			"group": "trident.netapp.io", "scope": "Namespaced",
			"names":    map[string]any{"plural": plural, "singular": strings.ToLower(kind), "kind": kind, "listKind": kind + "List"},
			"versions": []any{version},
		},
	}}
}

var tridentNodesGVR = schema.GroupVersionResource{Group: "trident.netapp.io", Version: "v1", Resource: "tridentnodes"}
var tbcGVR = schema.GroupVersionResource{Group: "trident.netapp.io", Version: "v1", Resource: "tridentbackendconfigs"}

// createOrKeep creates obj; one that exists already (the other release's
// run made it) is kept.
func (s *suite) createOrKeep(ctx context.Context, obj runtime.Object) error {
	if err := s.inst.create(ctx, obj); err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return nil
}

// installTridentBase creates what both releases share and a user of Trident
// already has: the namespace, the CRDs ontap-csi reads, the trident-csi
// certificates and Service, and a TridentBackendConfig (with a credentials
// Secret) for each of the suite's backends.
func (s *suite) installTridentBase(ctx context.Context) error {
	objs := []runtime.Object{&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tridentNS}},
		tridentCRD("tridentbackendconfigs", "TridentBackendConfig", true),
		tridentCRD("tridentnodes", "TridentNode", false),
		tridentCRD("tridentvolumes", "TridentVolume", false)}
	for _, o := range objs {
		if err := s.createOrKeep(ctx, o); err != nil {
			return err
		}
	}
	if err := s.waitCRDs(ctx, "tridentbackendconfigs.trident.netapp.io", "tridentnodes.trident.netapp.io", "tridentvolumes.trident.netapp.io"); err != nil {
		return err
	}
	certs, err := s.tridentCerts()
	if err != nil {
		return err
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: tridentServiceName, Namespace: tridentNS, Labels: map[string]string{"app": tridentCtrlLabel}},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": tridentCtrlLabel},
			Ports: []corev1.ServicePort{
				{Name: "https", Protocol: corev1.ProtocolTCP, Port: 34571, TargetPort: intstr.FromInt32(tridentHTTPSPort)},
				{Name: "metrics", Protocol: corev1.ProtocolTCP, Port: 9220, TargetPort: intstr.FromInt32(8001)},
			},
		},
	}
	creds := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tridentCredsSecret, Namespace: tridentNS},
		StringData: map[string]string{"username": "admin", "password": "password"}}
	objs = []runtime.Object{certs, svc, creds}
	backends, err := s.backendConfigs()
	if err != nil {
		return err
	}
	for _, b := range backends {
		spec := map[string]any{}
		for k, v := range b {
			if k != "username" && k != "password" {
				spec[k] = v
			}
		}
		spec["credentials"] = map[string]any{"name": tridentCredsSecret}
		// JSON numbers and string lists, as the API server stores them.
		spec, err = roundTrip(spec)
		if err != nil {
			return err
		}
		objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "trident.netapp.io/v1", "kind": "TridentBackendConfig",
			"metadata": map[string]any{"name": "tbc-" + b["backendName"].(string), "namespace": tridentNS},
			"spec":     spec,
		}})
	}
	for _, o := range objs {
		if err := s.createOrKeep(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// tridentCerts is the trident-csi Secret, from test/tridentcerts.
func (s *suite) tridentCerts() (*corev1.Secret, error) {
	dir, err := os.MkdirTemp("", "trident-certs-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	if out, err := exec.Command(filepath.Join(s.bin, "tridentcerts"), filepath.Join(dir, "certs")).CombinedOutput(); err != nil {
		return nil, fmt.Errorf("tridentcerts: %v: %s", err, out)
	}
	data := map[string][]byte{}
	entries, err := os.ReadDir(filepath.Join(dir, "certs"))
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		if data[e.Name()], err = os.ReadFile(filepath.Join(dir, "certs", e.Name())); err != nil {
			return nil, err
		}
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: tridentCertsSecret, Namespace: tridentNS}, Data: data}, nil
}

// installTridentRBAC creates the release's service accounts and roles.
func (s *suite) installTridentRBAC(ctx context.Context, rel tridentRelease) error {
	rules := []rbacv1.PolicyRule{
		{APIGroups: []string{"trident.netapp.io"}, Resources: []string{"*"}, Verbs: []string{"*"}},
		{APIGroups: []string{""}, Resources: []string{"secrets"}, Verbs: []string{"get", "list", "watch"}},
		{APIGroups: []string{"coordination.k8s.io"}, Resources: []string{"leases"}, Verbs: []string{"*"}},
	}
	for _, o := range s.m.Objects {
		if cr, ok := o.(*rbacv1.ClusterRole); ok && strings.HasPrefix(cr.Name, "ontap-csi-") && cr.Name != "ontap-csi-node" {
			rules = append(rules, cr.Rules...)
		}
	}
	objs := []runtime.Object{}
	account := func(name string, rules []rbacv1.PolicyRule) {
		objs = append(objs,
			&corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: tridentNS}},
			&rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: rules},
			&rbacv1.ClusterRoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: name},
				RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: name},
				Subjects:   []rbacv1.Subject{{Kind: "ServiceAccount", Name: name, Namespace: tridentNS}},
			})
	}
	account(rel.ctrlSA, rules)
	if rel.nodeSA != rel.ctrlSA {
		account(rel.nodeSA, []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes"}, Verbs: []string{"get"}}})
	}
	for _, o := range objs {
		if err := s.createOrKeep(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

// tridentDropIn runs scenario 9 for one release: the suite's install
// swapped for Trident's objects, the rollouts on them, and back.
func tridentDropIn(version string) func(context.Context, *suite, *scenarioRun) error {
	return func(ctx context.Context, s *suite, r *scenarioRun) (err error) {
		rel := tridentReleases[version]
		c := s.cluster.Client
		if err := s.installTridentBase(ctx); err != nil {
			return err
		}
		if err := s.installTridentRBAC(ctx, rel); err != nil {
			return err
		}
		r.note(s, "Trident %s's namespace objects in place: CRDs, trident-csi Secret and Service, TridentBackendConfigs, service accounts and roles", version)

		// This release's controller and node plugins must bind the
		// backends and register the nodes themselves: not the records an
		// earlier run left.
		if err := s.resetTridentRecords(ctx); err != nil {
			return err
		}

		ctrlObj, err := s.tridentControllerDeployment(rel, pluginImageA)
		if err != nil {
			return err
		}
		tds := &nodeDS{client: c, m: &manifests{Node: tridentNodeDaemonSet(rel, pluginImageA, "", s.sim)}, obs: s.obs}
		suiteCtrl := s.m.Controller
		swapped := false
		defer func() {
			// Whatever happened, later scenarios find the suite's install.
			if swapped && err != nil {
				bg := context.WithoutCancel(ctx)
				if ok, _ := s.ds.exists(bg); !ok {
					_ = s.ds.create(bg, nodeVariant{Image: pluginImageA})
				}
				_ = s.ds.waitRollout(bg, rolloutTimeout)
				_ = s.deleteTrident(bg, rel, tds)
				_ = s.scaleController(bg, suiteCtrl.Namespace, suiteCtrl.Name, ptr.Deref(suiteCtrl.Spec.Replicas, 1))
			}
		}()

		// The controller: the suite's scaled to zero, Trident's created.
		swapped = true
		if err := s.scaleController(ctx, suiteCtrl.Namespace, suiteCtrl.Name, 0); err != nil {
			return err
		}
		if _, err := c.AppsV1().Deployments(tridentNS).Create(ctx, ctrlObj, metav1.CreateOptions{}); err != nil {
			return err
		}
		ctrlPod, err := s.waitDeploymentPod(ctx, tridentNS, rel.ctrl, tridentCtrlLabel)
		if err != nil {
			return err
		}
		r.note(s, "%s's controller pod %s Ready at %s (the suite's controller scaled to 0)", rel.ctrl, ctrlPod.Name, ctrlPod.Status.PodIP)
		tbcs, err := s.waitTBCsBound(ctx)
		if err != nil {
			return err
		}
		r.note(s, "TridentBackendConfigs bound by this controller: %s", tbcs)

		// The node plugin: Trident's DaemonSet beside the suite's, then
		// the suite's deleted (docs/design/registration.md §7.7).
		img := pluginImageA
		tds.m.Node = tridentNodeDaemonSet(rel, img, ctrlPod.Status.PodIP, s.sim)
		if _, err := c.AppsV1().DaemonSets(tridentNS).Create(ctx, tds.m.Node, metav1.CreateOptions{}); err != nil {
			return err
		}
		tds.current = nodeVariant{Image: img}
		s.obs.add("test", "created Trident %s DaemonSet %s/%s beside the suite's", version, tridentNS, rel.node)
		if err := tds.waitRollout(ctx, rolloutTimeout); err != nil {
			return err
		}
		tnodes, err := s.waitTridentNodes(ctx)
		if err != nil {
			return err
		}
		r.note(s, "Trident %s node pods Ready on every node and registered with the controller over mutual TLS: TridentNodes %s", version, tnodes)
		old, err := podNames(ctx, s.ds)
		if err != nil {
			return err
		}
		if err := s.ds.delete(ctx); err != nil {
			return err
		}
		if err := s.ds.waitPodsGone(ctx, old, rolloutTimeout); err != nil {
			return err
		}
		r.note(s, "the suite's DaemonSet deleted, its pods %v gone: Trident's DaemonSet alone serves", old)

		// An iSCSI volume staged and published by Trident's pods, kept
		// written through the rollouts, unstaged by the last of them: with
		// 20.10's mounts (no propagation on <kubelet-dir>/plugins) the
		// staging mount is seen through /host only.
		san, err := s.startTridentSAN(ctx, r, version)
		if san != nil {
			defer san.cleanup(ctx, s)
		}
		if err != nil {
			return err
		}

		// The rollouts Trident's installers do.
		next := func() string {
			if img == pluginImageA {
				img = pluginImageB
			} else {
				img = pluginImageA
			}
			tds.current = nodeVariant{Image: img}
			tds.m.Node = tridentNodeDaemonSet(rel, img, ctrlPod.Status.PodIP, s.sim)
			return img
		}
		// 1. A rolling update (image change; Trident sets no strategy, so
		// maxUnavailable 1, no surge).
		next()
		if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
			cur, err := c.AppsV1().DaemonSets(tridentNS).Get(ctx, rel.node, metav1.GetOptions{})
			if err != nil {
				return err
			}
			cur.Spec.Template = tds.m.Node.Spec.Template
			_, err = c.AppsV1().DaemonSets(tridentNS).Update(ctx, cur, metav1.UpdateOptions{})
			return err
		}); err != nil {
			return err
		}
		r.note(s, "rolling update of %s to %s", rel.node, img)
		if err := tds.waitRollout(ctx, rolloutTimeout); err != nil {
			return err
		}
		// 2. The operator's delete and re-create, in both orders: at once,
		// the old pods still terminating (20.10, and 23.10+ deleting in
		// the background); once the old pods are gone (21.01+).
		for _, waitGone := range []bool{false, true} {
			old, err := podNames(ctx, tds)
			if err != nil {
				return err
			}
			if err := tds.delete(ctx); err != nil {
				return err
			}
			if waitGone {
				if err := tds.waitPodsGone(ctx, old, rolloutTimeout); err != nil {
					return err
				}
			}
			next()
			if _, err := c.AppsV1().DaemonSets(tridentNS).Create(ctx, tds.m.Node, metav1.CreateOptions{}); err != nil {
				return err
			}
			how := "at once, old pods terminating"
			if waitGone {
				how = "after the old pods were gone"
			}
			r.note(s, "%s deleted and re-created %s (%s)", rel.node, how, img)
			if err := tds.waitPodsGone(ctx, old, rolloutTimeout); err != nil {
				return err
			}
			if err := tds.waitRollout(ctx, rolloutTimeout); err != nil {
				return err
			}
		}

		if err := san.finish(ctx, s, r); err != nil {
			return err
		}

		// What Trident's trident-main containers warned about, before they
		// go (kubelet removes a deleted pod's logs).
		for _, line := range s.tridentWarnings(ctx) {
			r.note(s, "%s", line)
		}

		// Back to the suite's install, the same way in.
		if err := s.ds.create(ctx, nodeVariant{Image: s.otherImage()}); err != nil {
			return err
		}
		if err := s.ds.waitRollout(ctx, rolloutTimeout); err != nil {
			return err
		}
		if err := s.deleteTrident(ctx, rel, tds); err != nil {
			return err
		}
		if err := s.scaleController(ctx, suiteCtrl.Namespace, suiteCtrl.Name, ptr.Deref(suiteCtrl.Spec.Replicas, 1)); err != nil {
			return err
		}
		r.note(s, "back to the suite's install: its DaemonSet created beside Trident's, Trident's DaemonSet and Deployment deleted, its controller scaled back")
		return nil
	}
}

// tridentSAN is scenario 9's own iSCSI volume and the pod writing to it.
type tridentSAN struct {
	name, pv string
	node     *localcluster.Node
	pod      *corev1.Pod
	lunUUID  string
	done     bool
}

// startTridentSAN provisions an ontap-san claim through Trident's
// controller and starts a pod writing a journal to it on the last node,
// staged and published by Trident's node plugin.
func (s *suite) startTridentSAN(ctx context.Context, r *scenarioRun, version string) (*tridentSAN, error) {
	v := &tridentSAN{name: "s9-" + strings.ReplaceAll(version, ".", "") + "-san", node: s.cluster.Node(s.lastNode())}
	pvc, err := s.createClaim(ctx, claim(workloadNS, v.name, sanClass, corev1.ReadWriteOnce, "1Gi"), true)
	if err != nil {
		return v, err
	}
	v.pv = pvc.Spec.VolumeName
	c := s.cluster.Client
	if _, err := c.CoreV1().Pods(workloadNS).Create(ctx, workloadPod(workloadNS, v.name, v.node.Name, v.name, "keep", "--dir=/data", "--interval=200ms"), metav1.CreateOptions{}); err != nil {
		return v, err
	}
	if err := waitPod(ctx, c, workloadNS, v.name, podTimeout, podReady); err != nil {
		return v, err
	}
	if v.pod, err = c.CoreV1().Pods(workloadNS).Get(ctx, v.name, metav1.GetOptions{}); err != nil {
		return v, err
	}
	m, err := s.nodeMap(ctx, ontapVolume(v.pv), v.node.Name)
	if err != nil || m == nil {
		return v, fmt.Errorf("the LUN of %s is not mapped to %s (%v)", v.pv, v.node.Name, err)
	}
	v.lunUUID = m.LUN.UUID
	r.note(s, "claim %s (ontap-san, ext4) provisioned by Trident's controller as %s; pod %s writes to it on %s, staged and published by Trident's node plugin (LUN %s -> %s)",
		v.name, v.pv, v.name, v.node.Name, m.LUN.Name, m.Igroup.Name)
	return v, nil
}

// finish checks that the pod wrote through the rollouts, deletes it and
// checks the node is clean (unpublished and unstaged by the current
// plugin generation, not the one that staged it), then deletes the claim.
func (v *tridentSAN) finish(ctx context.Context, s *suite, r *scenarioRun) error {
	lines, err := readJournal(v.node.NodePath(filepath.Join(podVolumeMount(v.pod, v.pv), "journal")))
	if err != nil || len(lines) == 0 {
		return fmt.Errorf("%s's journal on %s: %v", v.name, v.node.Name, err)
	}
	last := lines[len(lines)-1]
	age := time.Since(last.at)
	if age > 10*time.Second {
		return fmt.Errorf("%s stopped writing: its last line %d was at %s", v.name, last.seq, last.at.Format(time.RFC3339Nano))
	}
	for i := 1; i < len(lines); i++ {
		if lines[i].seq != lines[i-1].seq+1 {
			return fmt.Errorf("%s's journal jumps from line %d to %d", v.name, lines[i-1].seq, lines[i].seq)
		}
	}
	if err := s.deletePod(ctx, workloadNS, v.name); err != nil {
		return err
	}
	var left string
	if err := pollUntil(ctx, time.Minute, func() (bool, string, error) {
		left, err = s.leftOn(ctx, v.node, v.pv, v.lunUUID)
		if err != nil {
			return false, err.Error(), nil
		}
		m, err := s.nodeMap(ctx, ontapVolume(v.pv), v.node.Name)
		if err == nil && m != nil {
			left = strings.TrimPrefix(left+", the LUN map to "+m.Igroup.Name, ", ")
		}
		return left == "", left, nil
	}); err != nil {
		return fmt.Errorf("%s after its pod was deleted: %w", v.node.Name, err)
	}
	if err := s.deleteClaims(ctx, workloadNS, v.name); err != nil {
		return err
	}
	v.done = true
	r.note(s, "%s wrote %d lines without a gap through the rollouts, the last %s before the test read them; once its pod was deleted %s held no mount of %s, no iSCSI device of its LUN and no LUN map; claim deleted, nothing of it left on ONTAP",
		v.name, len(lines), age.Round(time.Millisecond), v.node.Name, v.pv)
	return nil
}

// cleanup removes the pod and the claim if the scenario failed before
// finish did.
func (v *tridentSAN) cleanup(ctx context.Context, s *suite) {
	if v.done {
		return
	}
	bg := context.WithoutCancel(ctx)
	_ = s.deletePod(bg, workloadNS, v.name)
	_ = s.cluster.Client.CoreV1().PersistentVolumeClaims(workloadNS).Delete(bg, v.name, metav1.DeleteOptions{})
}

func podNames(ctx context.Context, d *nodeDS) ([]string, error) {
	pods, err := d.pods(ctx)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, p := range pods {
		out = append(out, p.Name)
	}
	return out, nil
}

// deleteTrident deletes the release's DaemonSet and Deployment and waits
// until their pods are gone.
func (s *suite) deleteTrident(ctx context.Context, rel tridentRelease, tds *nodeDS) error {
	c := s.cluster.Client
	old, err := podNames(ctx, tds)
	if err != nil {
		return err
	}
	bg := metav1.DeletePropagationBackground
	if err := c.AppsV1().DaemonSets(tridentNS).Delete(ctx, rel.node, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := tds.waitPodsGone(ctx, old, rolloutTimeout); err != nil {
		return err
	}
	s.obs.add("test", "deleted Trident's DaemonSet %s; its pods are gone", rel.node)
	if err := c.AppsV1().Deployments(tridentNS).Delete(ctx, rel.ctrl, metav1.DeleteOptions{PropagationPolicy: &bg}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	return pollUntil(ctx, rolloutTimeout, func() (bool, string, error) {
		l, err := c.CoreV1().Pods(tridentNS).List(ctx, metav1.ListOptions{LabelSelector: "app=" + tridentCtrlLabel})
		return err == nil && len(l.Items) == 0, fmt.Sprintf("controller pods left (%v)", err), nil
	})
}

// scaleController sets a Deployment's replicas and waits until exactly
// that many of its pods run, Ready.
func (s *suite) scaleController(ctx context.Context, ns, name string, replicas int32) error {
	c := s.cluster.Client
	if err := retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		d.Spec.Replicas = ptr.To(replicas)
		_, err = c.AppsV1().Deployments(ns).Update(ctx, d, metav1.UpdateOptions{})
		return err
	}); err != nil {
		return err
	}
	d, err := c.AppsV1().Deployments(ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	sel := metav1.FormatLabelSelector(d.Spec.Selector)
	err = pollUntil(ctx, rolloutTimeout, func() (bool, string, error) {
		l, err := c.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: sel})
		if err != nil {
			return false, err.Error(), nil
		}
		ready := 0
		for _, p := range l.Items {
			if p.DeletionTimestamp == nil && podReady(&p) {
				ready++
			}
		}
		return len(l.Items) == int(replicas) && ready == int(replicas), fmt.Sprintf("%d pods, %d Ready", len(l.Items), ready), nil
	})
	if err != nil {
		return fmt.Errorf("scaling %s to %d: %w", name, replicas, err)
	}
	s.obs.add("test", "Deployment %s/%s at %d replicas", ns, name, replicas)
	return nil
}

// waitDeploymentPod waits until the one pod of a Deployment runs Ready.
func (s *suite) waitDeploymentPod(ctx context.Context, ns, name, app string) (*corev1.Pod, error) {
	var pod *corev1.Pod
	err := pollUntil(ctx, rolloutTimeout, func() (bool, string, error) {
		l, err := s.cluster.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: "app=" + app})
		if err != nil {
			return false, err.Error(), nil
		}
		var states []string
		for i := range l.Items {
			p := &l.Items[i]
			states = append(states, p.Name+" "+podState(p))
			if p.DeletionTimestamp == nil && podReady(p) && p.Status.PodIP != "" {
				pod = p
				return true, "", nil
			}
		}
		return false, strings.Join(states, "; "), nil
	})
	if err != nil {
		return nil, fmt.Errorf("deployment %s: %w", name, err)
	}
	s.obs.add("test", "Deployment %s/%s: pod %s Ready", ns, name, pod.Name)
	return pod, nil
}

// tridentWarnings are the distinct warning and error messages in the logs
// of every running trident-main container in Trident's namespace, with the
// pods that logged them.
func (s *suite) tridentWarnings(ctx context.Context) []string {
	pods, err := s.cluster.Client.CoreV1().Pods(tridentNS).List(ctx, metav1.ListOptions{})
	if err != nil {
		return []string{"listing Trident's pods: " + err.Error()}
	}
	byMsg := map[string][]string{}
	var order []string
	for _, p := range pods.Items {
		b, err := s.cluster.Client.CoreV1().Pods(tridentNS).GetLogs(p.Name, &corev1.PodLogOptions{Container: "trident-main"}).DoRaw(ctx)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if !strings.Contains(l, "level=warning") && !strings.Contains(l, "level=error") && !strings.Contains(l, "level=fatal") {
				continue
			}
			msg := l
			if i := strings.Index(l, "msg="); i >= 0 {
				msg = l[i:]
			}
			if len(msg) > 300 {
				msg = msg[:300] + "…"
			}
			if _, ok := byMsg[msg]; !ok {
				order = append(order, msg)
			}
			if !hasString(byMsg[msg], p.Name) {
				byMsg[msg] = append(byMsg[msg], p.Name)
			}
		}
	}
	if len(order) == 0 {
		return []string{"trident-main logged no warning or error in the running Trident pods"}
	}
	var out []string
	for _, m := range order {
		out = append(out, fmt.Sprintf("trident-main logged (%s): %s", strings.Join(byMsg[m], ", "), m))
	}
	return out
}

// resetTridentRecords clears the TridentBackendConfigs' status and deletes
// the TridentNodes (their finalizer first, with no controller to take it
// off), so that what the next controller reports is its own.
func (s *suite) resetTridentRecords(ctx context.Context) error {
	tbcs := s.dyn.Resource(tbcGVR).Namespace(tridentNS)
	l, err := tbcs.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for i := range l.Items {
		u := &l.Items[i]
		if _, ok := u.Object["status"]; !ok {
			continue
		}
		delete(u.Object, "status")
		if _, err := tbcs.UpdateStatus(ctx, u, metav1.UpdateOptions{}); err != nil {
			return fmt.Errorf("clearing the status of TridentBackendConfig %s: %w", u.GetName(), err)
		}
	}
	nodes := s.dyn.Resource(tridentNodesGVR).Namespace(tridentNS)
	nl, err := nodes.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	for _, u := range nl.Items {
		if _, err := nodes.Patch(ctx, u.GetName(), types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
		if err := nodes.Delete(ctx, u.GetName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return err
		}
	}
	return pollUntil(ctx, time.Minute, func() (bool, string, error) {
		nl, err := nodes.List(ctx, metav1.ListOptions{})
		return err == nil && len(nl.Items) == 0, fmt.Sprintf("TridentNodes left (%v)", err), nil
	})
}

// waitTBCsBound waits until every TridentBackendConfig reports Bound.
func (s *suite) waitTBCsBound(ctx context.Context) (string, error) {
	var last string
	err := pollUntil(ctx, 2*time.Minute, func() (bool, string, error) {
		l, err := s.dyn.Resource(tbcGVR).Namespace(tridentNS).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error(), nil
		}
		if len(l.Items) == 0 {
			return false, "no TridentBackendConfig", nil
		}
		var states []string
		done := true
		for _, u := range l.Items {
			phase, _, _ := unstructured.NestedString(u.Object, "status", "phase")
			msg, _, _ := unstructured.NestedString(u.Object, "status", "message")
			states = append(states, u.GetName()+": "+phase+" ("+msg+")")
			done = done && phase == "Bound"
		}
		last = strings.Join(states, "; ")
		return done, last, nil
	})
	return last, err
}

// waitTridentNodes waits until every live node has its TridentNode: its
// node plugin reached the controller through the trident-csi certificates.
func (s *suite) waitTridentNodes(ctx context.Context) (string, error) {
	var found []string
	err := pollUntil(ctx, 2*time.Minute, func() (bool, string, error) {
		found = nil
		for _, n := range s.liveNodes() {
			u, err := s.dyn.Resource(tridentNodesGVR).Namespace(tridentNS).Get(ctx, n.Name, metav1.GetOptions{})
			if err != nil {
				return false, fmt.Sprintf("TridentNode %s: %v", n.Name, err), nil
			}
			iqn, _, _ := unstructured.NestedString(u.Object, "iqn")
			found = append(found, n.Name+" "+iqn)
		}
		return true, "", nil
	})
	return strings.Join(found, ", "), err
}

// roundTrip turns a Go map into what JSON decoding gives (numbers as
// float64 or int64, []any), which unstructured objects require.
func roundTrip(m map[string]any) (map[string]any, error) {
	u := &unstructured.Unstructured{}
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	if err := u.UnmarshalJSON(append(append([]byte(`{"apiVersion":"v1","kind":"X","spec":`), b...), '}')); err != nil {
		return nil, err
	}
	spec, ok := u.Object["spec"].(map[string]any)
	if !ok {
		return nil, errors.New("round trip lost the spec")
	}
	return spec, nil
}
