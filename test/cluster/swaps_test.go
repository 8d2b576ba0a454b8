package cluster_test

import (
	"errors"
	"fmt"
	"strings"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
)

// Everything the suite changes in the objects deploy/ renders is in this
// file: images (local tags, never pulled), the test shims' environment, and
// the extra backend. docs/e2e.md lists the same.

// Local images. The ontap-csi image carries two tags, so that changing the
// DaemonSet from one to the other is an image change that rolls the pods.
const (
	pluginImageA       = "localhost/ontap-csi:e2e-a"
	pluginImageB       = "localhost/ontap-csi:e2e-b"
	toolsImage         = "localhost/e2e-tools:e2e"
	attacherImage      = "localhost/csi-attacher:v4.13.0"
	snapshotterImage   = "localhost/csi-snapshotter:v8.7.0"
	snapControllerImg  = "localhost/snapshot-controller:v8.7.0"
	provisionerImage   = "localhost/csi-provisioner:e2e-standin"
	resizerImage       = "localhost/csi-resizer:e2e-standin"
	legacyContainer    = "driver-registrar"
	iscsiShimDir       = "/var/lib/e2e-iscsi" // on each node: the shim's state, fake sysfs and /dev
	initiatorNameFile  = "/etc/iscsi/initiatorname.iscsi"
	zoneLabel          = "topology.kubernetes.io/zone"
	sanBackendFileName = "san.json"
)

// controllerImages maps the rendered controller containers to local images:
// the real csi-attacher and csi-snapshotter, the stand-ins for
// csi-provisioner and csi-resizer (sidecars/cmd), ontap-csi itself.
var controllerImages = map[string]string{
	"ontap-csi":       pluginImageA,
	"csi-provisioner": provisionerImage,
	"csi-attacher":    attacherImage,
	"csi-resizer":     resizerImage,
	"csi-snapshotter": snapshotterImage,
}

// simEndpoint is where the shims reach the simulator's data plane.
type simEndpoint struct {
	URL    string
	CAFile string // a path on every node (the test root)
}

// shimEnv is the environment the NFS and iSCSI shims read; mount(8) and the
// node plugin's host tools pass it on to them. Paths are the same on every
// node and lead to each node's own files (iscsiShimDir is a directory of
// the node's root, bind-mounted there).
func shimEnv(sim simEndpoint) []corev1.EnvVar {
	return []corev1.EnvVar{
		{Name: "ONTAP_SIM_URL", Value: sim.URL},
		{Name: "ONTAP_SIM_CA", Value: sim.CAFile},
		// The NFS shim asks the export policy about this node's address.
		{Name: "NFS_SHIM_CLIENT_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
		{Name: "ISCSI_SHIM_STATE", Value: iscsiShimDir + "/state"},
		{Name: "ISCSI_SHIM_SYSROOT", Value: iscsiShimDir + "/sys"},
		{Name: "ISCSI_SHIM_DEVDIR", Value: iscsiShimDir + "/dev"},
		{Name: "ISCSI_SHIM_INITIATORNAME", Value: initiatorNameFile},
		{Name: "ISCSI_SHIM_MULTIPATHD", Value: "1"},
	}
}

// shimArgs point the node plugin at the iSCSI shim's sysfs and /dev (seen
// through --host-root), and give each node a topology zone of its own name,
// which the rendered DaemonSet leaves to the user (docs/configuration.md).
func shimArgs(hostRoot string) []string {
	return []string{
		"--sys-root=" + hostRoot + iscsiShimDir + "/sys",
		"--dev-dir=" + hostRoot + iscsiShimDir + "/dev",
		"--node-topology=" + zoneLabel + "=$(KUBE_NODE_NAME)",
	}
}

// nodeVariant is how a scenario wants the node DaemonSet.
type nodeVariant struct {
	// Image replaces the plugin container's image (a local tag).
	Image string
	// LegacyRegistrar adds a node-driver-registrar emulation sidecar, as an
	// operator-generated Trident DaemonSet has (docs/design/registration.md §5.9).
	LegacyRegistrar bool
}

func (v nodeVariant) String() string {
	s := "image " + v.Image
	if v.LegacyRegistrar {
		s += " + legacy registrar sidecar"
	}
	return s
}

// nodeDaemonSet returns the rendered DaemonSet with the local image and the
// shims' environment and arguments (above), and nothing else.
func (m *manifests) nodeDaemonSet(v nodeVariant, sim simEndpoint) (*appsv1.DaemonSet, error) {
	ds := m.Node.DeepCopy()
	spec := &ds.Spec.Template.Spec
	if len(spec.Containers) != 1 {
		return nil, fmt.Errorf("DaemonSet %s has %d containers; the test expects the plugin alone", ds.Name, len(spec.Containers))
	}
	plugin := &spec.Containers[0]
	plugin.Image = v.Image
	plugin.ImagePullPolicy = corev1.PullNever
	plugin.Env = append(plugin.Env, shimEnv(sim)...)
	plugin.Args = append(plugin.Args, shimArgs("/host")...)
	if v.LegacyRegistrar {
		sidecar, err := legacyRegistrarFor(plugin)
		if err != nil {
			return nil, err
		}
		spec.Containers = append(spec.Containers, sidecar)
	}
	return ds, nil
}

// legacyRegistrarFor is Trident's node-driver-registrar sidecar beside the
// plugin: the registration dir at /registration, the plugin dir at /plugin,
// registering the endpoint csi.sock.
func legacyRegistrarFor(plugin *corev1.Container) (corev1.Container, error) {
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
		return corev1.Container{}, errors.New("the plugin container mounts no plugins_registry or /plugin volume to share with a registrar")
	}
	return corev1.Container{
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
	}, nil
}

// controllerDeployment returns the rendered controller Deployment with the
// local images, and a second --backend-config for the SAN backend's key of
// the backends Secret (one per key, as the Deployment's comment says).
func (m *manifests) controllerDeployment() (*appsv1.Deployment, error) {
	d := m.Controller.DeepCopy()
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		img, ok := controllerImages[c.Name]
		if !ok {
			return nil, fmt.Errorf("controller container %s has no local image", c.Name)
		}
		c.Image, c.ImagePullPolicy = img, corev1.PullNever
		if c.Name != "ontap-csi" {
			continue
		}
		found := false
		for _, a := range c.Args {
			if dir, ok := strings.CutPrefix(a, "--backend-config="); ok {
				found = true
				c.Args = append(c.Args, "--backend-config="+dir[:strings.LastIndex(dir, "/")+1]+sanBackendFileName)
				break
			}
		}
		if !found {
			return nil, errors.New("the controller has no --backend-config")
		}
	}
	return d, nil
}

// snapshotControllerDeployment is the snapshotter module's
// deploy/kubernetes/snapshot-controller Deployment with the local image.
func snapshotControllerDeployment(d *appsv1.Deployment) *appsv1.Deployment {
	d = d.DeepCopy()
	for i := range d.Spec.Template.Spec.Containers {
		c := &d.Spec.Template.Spec.Containers[i]
		c.Image, c.ImagePullPolicy = snapControllerImg, corev1.PullNever
	}
	return d
}
