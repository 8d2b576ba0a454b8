package cluster_test

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/ontap-csi/ontap-csi/test/cluster/localcluster"
)

// Objects the suite installs beside deploy/'s.
const (
	nasClass      = "ontap-nas"      // deploy/examples
	sanClass      = "ontap-san-ext4" // deploy/examples
	sanXFSClass   = "ontap-san-xfs"  // deploy/examples
	sanWFFCClass  = "ontap-san-wffc" // ontap-san-ext4, WaitForFirstConsumer, only the second node's zone
	snapshotClass = "ontap-snapshots"
)

var snapshotGVR = schema.GroupVersionResource{Group: "snapshot.storage.k8s.io", Version: "v1", Resource: "volumesnapshots"}

// setup starts the simulator and the iSCSI shims, and installs what a user
// installs: the VolumeSnapshot CRDs and snapshot-controller, deploy/'s ha
// overlay (the node DaemonSet excepted: the scenarios create it), the
// backends Secret, deploy/examples' StorageClasses and a snapshot class.
func (s *suite) setup(ctx context.Context, t *testing.T, repo string) {
	c := s.cluster
	var err error
	if s.dyn, err = dynamic.NewForConfig(c.RESTConfig); err != nil {
		t.Fatal(err)
	}
	s.inst = newInstallerFor(s)
	if err := s.startSimulator(ctx); err != nil {
		t.Fatal(err)
	}
	for _, n := range c.Nodes {
		if err := s.startISCSI(n); err != nil {
			t.Fatal(err)
		}
	}
	if s.m, err = renderDeploy(ctx, repo, "ha"); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, n := range c.Nodes {
		names = append(names, n.Name)
	}
	s.obs = newObserver(c.Client, driverName, names)
	s.obs.start(ctx, c)
	steps := []struct {
		what string
		f    func(context.Context) error
	}{
		{"snapshot CRDs and snapshot-controller", s.installSnapshotter},
		{"deploy/kustomize/ha", s.installDeploy},
		{"StorageClasses", func(ctx context.Context) error { return s.installClasses(ctx, repo) }},
	}
	for _, st := range steps {
		if err := st.f(ctx); err != nil {
			t.Fatalf("installing %s: %v", st.what, err)
		}
		s.obs.add("test", "installed %s", st.what)
		t.Logf("installed %s after %s", st.what, time.Since(s.report.started).Round(time.Second))
	}
	if _, err := c.Client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: workloadNS}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	s.ds = &nodeDS{client: c.Client, m: s.m, sim: s.sim, obs: s.obs}
}

func (s *suite) startSimulator(ctx context.Context) error {
	c := s.cluster
	simDir := filepath.Join(c.Root, "sim")
	simAddr := net.JoinHostPort(localcluster.APIServerIP, simPort)
	if _, err := c.StartProcess("ontap-sim", []string{filepath.Join(s.bin, "ontap-sim"),
		"--listen", simAddr, "--data-dir", simDir, "--nfs-lifs", simNFSLIF, "--iscsi-lifs", simISCSILIF}, nil); err != nil {
		return err
	}
	s.sim = simEndpoint{URL: "https://" + simAddr, CAFile: filepath.Join(simDir, "tls", "ca.pem")}
	hc, err := s.simClient(ctx, s.sim.CAFile)
	if err != nil {
		return err
	}
	s.ontap = &ontap{http: hc, base: s.sim.URL}
	return nil
}

// startISCSI gives a node its initiator name and starts the iSCSI shim's
// kernel daemon in its namespaces: the kernel's half of the initiator,
// outside any pod, as on a real node.
func (s *suite) startISCSI(n *localcluster.Node) error {
	dir := n.DirSource(iscsiShimDir)
	for _, d := range []string{"state", "sys", "dev"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	iqnFile := n.NodePath(initiatorNameFile)
	if err := os.MkdirAll(filepath.Dir(iqnFile), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(iqnFile, []byte("InitiatorName="+nodeIQN(n.Name)+"\n"), 0o644); err != nil {
		return err
	}
	var env []string
	for _, e := range shimEnv(s.sim) {
		if e.ValueFrom == nil {
			env = append(env, e.Name+"="+e.Value)
		}
	}
	if _, err := n.StartProcess(n.Name+"-iscsi-kernel", []string{filepath.Join(s.bin, "iscsi-shim"), "kernel"}, env); err != nil {
		return err
	}
	return pollUntil(context.Background(), 30*time.Second, func() (bool, string, error) {
		_, err := os.Stat(filepath.Join(dir, "state", "kernel.pid"))
		return err == nil, "no kernel.pid yet", nil
	})
}

func nodeIQN(node string) string { return "iqn.2026-12.io.ontap-csi.e2e:" + node }

// installSnapshotter installs the VolumeSnapshot CRDs from the snapshotter's
// client module and the snapshot-controller as its module's
// deploy/kubernetes/snapshot-controller has it, with the local image.
func (s *suite) installSnapshotter(ctx context.Context) error {
	sidecars := filepath.Join(s.module, "sidecars")
	for _, kind := range []string{"volumesnapshotclasses", "volumesnapshotcontents", "volumesnapshots"} {
		b, err := readModuleFile(ctx, sidecars, "github.com/kubernetes-csi/external-snapshotter/client/v8", "config/crd/snapshot.storage.k8s.io_"+kind+".yaml")
		if err != nil {
			return err
		}
		if err := s.createAll(ctx, b); err != nil {
			return err
		}
	}
	if err := s.waitCRDs(ctx, "volumesnapshotclasses.snapshot.storage.k8s.io", "volumesnapshotcontents.snapshot.storage.k8s.io", "volumesnapshots.snapshot.storage.k8s.io"); err != nil {
		return err
	}
	for _, f := range []string{"rbac-snapshot-controller.yaml", "setup-snapshot-controller.yaml"} {
		b, err := readModuleFile(ctx, sidecars, "github.com/kubernetes-csi/external-snapshotter/v8", "deploy/kubernetes/snapshot-controller/"+f)
		if err != nil {
			return err
		}
		objs, err := decodeTyped(b)
		if err != nil {
			return err
		}
		for _, obj := range objs {
			if d, ok := obj.(*appsv1.Deployment); ok {
				obj = snapshotControllerDeployment(d)
			}
			if err := s.inst.create(ctx, obj); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *suite) createAll(ctx context.Context, stream []byte) error {
	objs, err := decodeUnstructured(stream)
	if err != nil {
		return err
	}
	for _, o := range objs {
		if err := s.inst.create(ctx, o); err != nil {
			return err
		}
	}
	return nil
}

func (s *suite) waitCRDs(ctx context.Context, names ...string) error {
	crds := s.dyn.Resource(schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"})
	return pollUntil(ctx, time.Minute, func() (bool, string, error) {
		for _, n := range names {
			u, err := crds.Get(ctx, n, metav1.GetOptions{})
			if err != nil {
				return false, err.Error(), nil
			}
			conds, _, _ := unstructured.NestedSlice(u.Object, "status", "conditions")
			established := false
			for _, c := range conds {
				m, _ := c.(map[string]any)
				established = established || (m["type"] == "Established" && m["status"] == "True")
			}
			if !established {
				return false, n + " not established", nil
			}
		}
		return true, "", nil
	})
}

// installDeploy creates deploy/'s objects as rendered, the backends Secret
// and the controller Deployment with the local images; not the node
// DaemonSet, which the scenarios create.
func (s *suite) installDeploy(ctx context.Context) error {
	for _, obj := range s.m.Objects {
		if err := s.inst.create(ctx, obj); err != nil {
			return err
		}
	}
	secret, err := s.backendsSecret()
	if err != nil {
		return err
	}
	if err := s.inst.create(ctx, secret); err != nil {
		return err
	}
	d, err := s.m.controllerDeployment()
	if err != nil {
		return err
	}
	return s.inst.create(ctx, d)
}

// backendsSecret holds Trident's backend JSON for an ontap-nas and an
// ontap-san backend on the simulator, trusting its CA. The NAS backend
// publishes by adding the node's address to the volume's export policy;
// the NFS shim checks that policy on every mount. The SAN backend serves
// each node's zone (supportedTopologies), for topology-aware placement.
func (s *suite) backendsSecret() (*corev1.Secret, error) {
	backends, err := s.backendConfigs()
	if err != nil {
		return nil, err
	}
	data := map[string][]byte{}
	for key, b := range backends {
		if data[key], err = json.MarshalIndent(b, "", "  "); err != nil {
			return nil, err
		}
	}
	return &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "ontap-csi-backends", Namespace: s.m.Namespace}, Data: data}, nil
}

// backendConfigs are the two backends by key of the backends Secret;
// scenario 9's TridentBackendConfigs carry the same.
func (s *suite) backendConfigs() (map[string]map[string]any, error) {
	ca, err := os.ReadFile(s.sim.CAFile)
	if err != nil {
		return nil, err
	}
	common := map[string]any{
		"version": 1, "managementLIF": strings.TrimPrefix(s.sim.URL, "https://"), "svm": "svm0",
		"username": "admin", "password": "password", "storagePrefix": "e2e_",
		"trustedCACertificate": base64.StdEncoding.EncodeToString(ca),
	}
	nas := map[string]any{"storageDriverName": "ontap-nas", "backendName": "e2e-nas", "dataLIF": simNFSLIF,
		"autoExportPolicy": true, "autoExportCIDRs": []string{"10.250.0.0/24"},
		"defaults": map[string]string{"unixPermissions": "0777"}}
	var zones []map[string]string
	for _, n := range s.cluster.Nodes {
		zones = append(zones, map[string]string{zoneLabel: n.Name})
	}
	san := map[string]any{"storageDriverName": "ontap-san", "backendName": "e2e-san", "useCHAP": false,
		"supportedTopologies": zones}
	out := map[string]map[string]any{"backend.json": nas, sanBackendFileName: san}
	for _, b := range out {
		for k, v := range common {
			b[k] = v
		}
	}
	return out, nil
}

// installClasses creates deploy/examples' StorageClasses, a
// WaitForFirstConsumer variant of the SAN one limited to the second node's
// zone, and a VolumeSnapshotClass.
func (s *suite) installClasses(ctx context.Context, repo string) error {
	var classes []*storagev1.StorageClass
	for _, f := range []string{"storageclass-ontap-nas.yaml", "storageclass-ontap-san.yaml"} {
		b, err := os.ReadFile(filepath.Join(repo, "deploy", "examples", f))
		if err != nil {
			return err
		}
		objs, err := decodeTyped(b)
		if err != nil {
			return err
		}
		for _, o := range objs {
			sc := o.(*storagev1.StorageClass)
			classes = append(classes, sc)
			if sc.Name == sanClass {
				wffc := sc.DeepCopy()
				wffc.Name = sanWFFCClass
				mode := storagev1.VolumeBindingWaitForFirstConsumer
				wffc.VolumeBindingMode = &mode
				wffc.AllowedTopologies = []corev1.TopologySelectorTerm{{MatchLabelExpressions: []corev1.TopologySelectorLabelRequirement{
					{Key: zoneLabel, Values: []string{s.cluster.Nodes[len(s.cluster.Nodes)-1].Name}},
				}}}
				classes = append(classes, wffc)
			}
		}
	}
	for _, sc := range classes {
		if err := s.inst.create(ctx, sc); err != nil {
			return err
		}
	}
	vsc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "snapshot.storage.k8s.io/v1", "kind": "VolumeSnapshotClass",
		"metadata": map[string]any{"name": snapshotClass}, "driver": driverName, "deletionPolicy": "Delete",
	}}
	return s.inst.create(ctx, vsc)
}
