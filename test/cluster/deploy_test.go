package cluster_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"path/filepath"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

// manifests are the objects of deploy/kustomize/base that the test installs.
type manifests struct {
	Namespace string
	// Objects are created as they are: namespace, RBAC, CSIDriver.
	Objects []runtime.Object
	// Node is the node DaemonSet as rendered; nodeDaemonSet derives the
	// variants the scenarios apply.
	Node *appsv1.DaemonSet
	// Controller is the controller Deployment, not installed: its sidecar
	// images do not exist here (docs/e2e.md). The test runs the controller
	// as a process and does the attacher's job itself.
	Controller *appsv1.Deployment
}

// renderBase renders deploy/kustomize/base with the kustomize that
// deploy/tools pins (the same one deploy's own tests use) and decodes every
// object strictly into its typed form.
func renderBase(ctx context.Context, repo string) (*manifests, error) {
	cmd := exec.CommandContext(ctx, "go", "tool", "kustomize", "build", filepath.Join(repo, "deploy", "kustomize", "base"))
	cmd.Dir = filepath.Join(repo, "deploy", "tools")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("kustomize build deploy/kustomize/base: %v: %s", err, stderr.String())
	}
	m := &manifests{}
	dec := utilyaml.NewYAMLReader(bufioReader(out))
	for {
		doc, err := dec.Read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		if len(bytes.TrimSpace(doc)) == 0 {
			continue
		}
		obj, gvk, err := scheme.Codecs.UniversalDeserializer().Decode(doc, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("decoding rendered object: %w\n%s", err, doc)
		}
		switch o := obj.(type) {
		case *appsv1.DaemonSet:
			if m.Node != nil {
				return nil, fmt.Errorf("two DaemonSets rendered: %s and %s", m.Node.Name, o.Name)
			}
			m.Node = o
		case *appsv1.Deployment:
			m.Controller = o
		case *corev1.Namespace:
			m.Namespace = o.Name
			m.Objects = append(m.Objects, o)
		case *corev1.ServiceAccount, *rbacv1.ClusterRole, *rbacv1.ClusterRoleBinding, *rbacv1.Role,
			*rbacv1.RoleBinding, *storagev1.CSIDriver, *corev1.ConfigMap, *corev1.Secret:
			m.Objects = append(m.Objects, o)
		default:
			return nil, fmt.Errorf("deploy/kustomize/base renders a %s the e2e test does not know how to install", gvk.Kind)
		}
	}
	if m.Node == nil || m.Namespace == "" {
		return nil, errors.New("deploy/kustomize/base rendered no node DaemonSet or no namespace")
	}
	return m, nil
}

// install creates the rendered objects, namespace first.
func (m *manifests) install(ctx context.Context, c kubernetes.Interface) error {
	for _, obj := range m.Objects {
		var err error
		switch o := obj.(type) {
		case *corev1.Namespace:
			_, err = c.CoreV1().Namespaces().Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ServiceAccount:
			_, err = c.CoreV1().ServiceAccounts(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.ConfigMap:
			_, err = c.CoreV1().ConfigMaps(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *corev1.Secret:
			_, err = c.CoreV1().Secrets(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRole:
			_, err = c.RbacV1().ClusterRoles().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.ClusterRoleBinding:
			_, err = c.RbacV1().ClusterRoleBindings().Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.Role:
			_, err = c.RbacV1().Roles(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *rbacv1.RoleBinding:
			_, err = c.RbacV1().RoleBindings(o.Namespace).Create(ctx, o, metav1.CreateOptions{})
		case *storagev1.CSIDriver:
			_, err = c.StorageV1().CSIDrivers().Create(ctx, o, metav1.CreateOptions{})
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// simEndpoint is where the NFS shim reaches the simulator's data plane.
type simEndpoint struct {
	URL    string
	CAFile string
}

// nodeVariant is how a scenario wants the node DaemonSet.
type nodeVariant struct {
	// Image replaces the plugin container's image (a local tag).
	Image string
	// LegacyRegistrar adds a node-driver-registrar emulation sidecar, as an
	// operator-generated Trident DaemonSet has (docs/design/registration.md §5).
	LegacyRegistrar bool
}

// Container and image names the variants use.
const (
	pluginImageA    = "localhost/ontap-csi:e2e-a"
	pluginImageB    = "localhost/ontap-csi:e2e-b"
	toolsImage      = "localhost/e2e-tools:e2e"
	legacyContainer = "driver-registrar"
)

// nodeDaemonSet returns the rendered DaemonSet with the changes this
// cluster needs, and nothing else:
//   - the image is a local tag that only exists in containerd
//     (imagePullPolicy Never: there is no registry);
//   - the NFS client shim (test/shims/nfs, installed as the node's
//     /usr/sbin/mount.nfs) reads where the ONTAP simulator's data plane is,
//     the CA to trust, and which IP this node mounts from from the
//     environment, which mount(8) passes on to its helper.
func (m *manifests) nodeDaemonSet(v nodeVariant, sim simEndpoint) (*appsv1.DaemonSet, error) {
	ds := m.Node.DeepCopy()
	spec := &ds.Spec.Template.Spec
	var plugin *corev1.Container
	for i := range spec.Containers {
		if spec.Containers[i].Name != legacyContainer {
			if plugin != nil {
				return nil, fmt.Errorf("DaemonSet %s has more than one container; the test expects the plugin alone", ds.Name)
			}
			plugin = &spec.Containers[i]
		}
	}
	if plugin == nil {
		return nil, fmt.Errorf("DaemonSet %s has no container", ds.Name)
	}
	plugin.Image = v.Image
	plugin.ImagePullPolicy = corev1.PullNever
	plugin.Env = append(plugin.Env,
		corev1.EnvVar{Name: "ONTAP_SIM_URL", Value: sim.URL},
		// A path on the node; the shim runs there (chrooted into /host).
		corev1.EnvVar{Name: "ONTAP_SIM_CA", Value: sim.CAFile},
		corev1.EnvVar{Name: "NFS_SHIM_CLIENT_IP", Value: localcluster.NodeIP},
	)
	if v.LegacyRegistrar {
		regVolume, pluginVolume := "", ""
		for _, vm := range plugin.VolumeMounts {
			switch vm.MountPath {
			case "/var/lib/kubelet/plugins_registry":
				regVolume = vm.Name
			case "/plugin":
				pluginVolume = vm.Name
			}
		}
		if regVolume == "" || pluginVolume == "" {
			return nil, errors.New("the plugin container mounts no plugins_registry or /plugin volume to share with a registrar")
		}
		// Trident's sidecar: the registration dir at /registration, the
		// plugin dir at /plugin, registering the endpoint csi.sock.
		spec.Containers = append(spec.Containers, corev1.Container{
			Name:            legacyContainer,
			Image:           toolsImage,
			ImagePullPolicy: corev1.PullNever,
			Command: []string{"/legacyregistrar",
				"--registration-dir=/registration",
				"--driver=" + driverName,
				"--kubelet-registration-path=/var/lib/kubelet/plugins/" + driverName + "/csi.sock",
				"--csi-address=/plugin/csi.sock",
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: regVolume, MountPath: "/registration"},
				{Name: pluginVolume, MountPath: "/plugin"},
			},
		})
	}
	return ds, nil
}

func bufioReader(b []byte) *bufio.Reader { return bufio.NewReader(bytes.NewReader(b)) }
