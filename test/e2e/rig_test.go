// Package e2e drives the real ontap-csi binary — --csi_role=allInOne, as
// a process of its own over its CSI socket — against the ONTAP simulator,
// with the NFS and iSCSI shims of test/shims standing in for the kernel
// clients this machine lacks. Everything else is real: mkfs, mount, bind
// mounts, resize2fs/xfs_growfs, statfs.
//
// The same tests run on a real kernel with no shims in the VM of test/vm
// (plugintest.RealKernel: make vm builds this package's test binary and
// runs it there): the real iscsiadm, udev, multipathd and mount.nfs
// against the simulator's kernel data plane (LIO and nfsd).
//
// Every test needs root and works under its own temporary roots (kubelet
// dir, tracking dir, lock dir, fake /dev and /sys, the simulator's data);
// mounts, loop devices and processes are cleaned up even when a test fails
// (plugintest).
package e2e

import (
	"cmp"
	"context"
	"errors"
	"maps"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// TestMain shares the builds of ontap-csi and of the shims among the tests.
func TestMain(m *testing.M) { plugintest.Main(m) }

// The test node. nfsClientIP is the address it reports to the controller
// and mounts NFS exports from; export policies admit or refuse it. Its
// initiator name is nodeIQN through the shims, the host's on a real kernel
// (iscsiEnv.iqn).
const (
	nodeID  = "node-1"
	nodeIQN = "iqn.2005-03.org.open-iscsi:node-1"
)

var nfsClientIP = plugintest.NodeIP("192.0.2.10")

// rig is one test's world: temporary roots, a simulator, an ontap-csi
// backend config for it, and the node plugin (restarted at will).
type rig struct {
	t testing.TB
	plugintest.Roots
	sim     *plugintest.Sim
	backend string    // --backend-config: ontap-san with iSCSI, else ontap-nas
	driver  string    // its storageDriverName
	iscsi   *iscsiEnv // nil for NFS-only rigs
}

type rigOptions struct {
	iscsi bool
	// driver replaces ontap-san or ontap-nas (an economy driver of the
	// same protocol); keys add to its backend config.
	driver string
	keys   map[string]any
	sim    ontapsim.Config // of the simulator
}

func newRig(t testing.TB, opts rigOptions) *rig {
	t.Helper()
	plugintest.RequireRoot(t)
	roots := plugintest.NewRoots(t)
	r := &rig{t: t, Roots: roots, sim: plugintest.StartSim(t, roots, opts.sim), driver: opts.driver}
	keys := map[string]any{}
	if opts.iscsi {
		r.iscsi = newISCSIEnv(t, r)
		r.driver = cmp.Or(r.driver, config.DriverONTAPSAN)
	} else {
		// Each volume gets its own policy with a rule for each node it is
		// published to (nfsClientIP).
		keys["autoExportPolicy"] = true
		r.driver = cmp.Or(r.driver, config.DriverONTAPNAS)
	}
	maps.Copy(keys, opts.keys)
	r.backend = plugintest.WriteBackendConfig(t, roots.Root, r.sim.Simulator, r.driver, keys)
	return r
}

// in is the rig for subtest t: what it starts or fails, it starts and
// fails in t (a subtest must not FailNow its parent).
func (r *rig) in(t testing.TB) *rig {
	sub := *r
	sub.t = t
	return &sub
}

type pluginOptions struct {
	role     string   // --csi_role; default allInOne
	crashAt  string   // kill at this crash point (crash build)
	crashLog string   // log crash points reached (crash build)
	args     []string // more flags
}

// startPlugin starts ontap-csi (allInOne unless told) on the rig.
func (r *rig) startPlugin(opts pluginOptions) *plugintest.Plugin {
	r.t.Helper()
	o := plugintest.Options{
		Roots: r.Roots, Role: opts.role, Sim: r.sim,
		NodeID: nodeID, NodeIPs: []string{nfsClientIP}, Args: opts.args,
	}
	if opts.role != "node" {
		o.Backends = []string{r.backend}
	}
	if r.iscsi != nil {
		o.ISCSI = r.iscsi.host
	}
	if opts.crashAt != "" || opts.crashLog != "" {
		o.Tags = []string{"crashpoints"}
		o.Env = []string{"ONTAP_CSI_CRASHPOINT=" + opts.crashAt, "ONTAP_CSI_CRASHPOINT_LOG=" + opts.crashLog}
	}
	return plugintest.Start(r.t, o)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// Kubelet's paths for a volume.
func (r *rig) stagingPath(volumeID string) string {
	return filepath.Join(r.KubeletDir, "plugins/kubernetes.io/csi/pv", volumeID, "globalmount")
}

func (r *rig) targetPath(podUID, volumeID string) string {
	return filepath.Join(r.KubeletDir, "pods", podUID, "volumes/kubernetes.io~csi", volumeID, "mount")
}

// makeStaging creates the staging directory, as kubelet does.
func (r *rig) makeStaging(volumeID string) string {
	p := r.stagingPath(volumeID)
	if err := os.MkdirAll(p, 0o750); err != nil {
		r.t.Fatal(err)
	}
	return p
}

// makeTargetParent creates the target's parent, as kubelet does; the
// plugin creates the target itself.
func (r *rig) makeTargetParent(podUID, volumeID string) string {
	p := r.targetPath(podUID, volumeID)
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		r.t.Fatal(err)
	}
	return p
}

func mountCap(fsType string, mode csi.VolumeCapability_AccessMode_Mode, flags ...string) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType, MountFlags: flags}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

func blockCap(mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

const snw = csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER

// assertClean checks that nothing of the volume is left on the node: no
// mount, no tracking file, and (iSCSI) no session, map or loop device.
func (r *rig) assertClean(volumeID string) {
	r.t.Helper()
	if mps := plugintest.MountPointsBelow(r.t, r.KubeletDir); len(mps) > 0 {
		r.t.Errorf("mounts left: %v", mps)
	}
	if _, err := os.Stat(r.TrackingFile(volumeID)); !errors.Is(err, os.ErrNotExist) {
		r.t.Errorf("tracking file of %s left behind (%v)", volumeID, err)
	}
	if r.iscsi != nil {
		plugintest.AssertNoISCSI(r.t, r.iscsi.host)
	}
}

// skipOnRealKernel skips a test that only makes sense through the shims.
func skipOnRealKernel(t testing.TB, why string) {
	t.Helper()
	if plugintest.RealKernel() {
		t.Skip("not on a real kernel: " + why)
	}
}

func isMountPoint(t testing.TB, p string) bool {
	t.Helper()
	return plugintest.MountsAt(t, p) > 0
}
