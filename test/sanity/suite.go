package sanity

import (
	"flag"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	csisanity "github.com/kubernetes-csi/csi-test/v5/pkg/sanity"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// Run runs csi-sanity, node specs included, against the real binary —
// ontap-csi --csi_role=allInOne serving one backend of driver on the ONTAP
// simulator — as root through the test shims: NFS exports are checked
// against the simulator's export policies and bind-mounted, iSCSI LUNs
// attach as loop devices and are formatted and mounted for real. Only one
// Run per process: csi-sanity builds one Ginkgo suite.
//
// Afterwards nothing csi-sanity made may be left: no volume, LUN, igroup or
// export policy on ONTAP, no mount, tracking file, iSCSI session or loop
// device on the node.
//
// On a real kernel (plugintest.RealKernel, the VM of test/vm) the same
// runs with no shims: the simulator's LUNs and exports are LIO's and
// nfsd's, the plugin runs the host's iscsiadm, multipathd and mount.nfs,
// and the node's first address is the VM's node address.
func Run(t *testing.T, driver string) {
	plugintest.RequireRoot(t)
	roots := plugintest.NewRoots(t)
	s := plugintest.StartSim(t, roots, ontapsim.Config{})
	nodeIPs, extra := NodeIPs, map[string]any(nil)
	if plugintest.RealKernel() {
		nodeIPs = []string{plugintest.RealKernelNodeIP, NodeIPs[1]}
		if driver == config.DriverONTAPNAS {
			extra = map[string]any{"autoExportCIDRs": []string{plugintest.RealKernelNodeIP + "/32"}}
		}
	}
	o := plugintest.Options{
		Roots:    roots,
		Sim:      s,
		Backends: []string{plugintest.WriteBackendConfig(t, roots.Root, s.Simulator, driver, backendKeys(driver, extra))},
		NodeID:   NodeID,
		NodeIPs:  nodeIPs,
		// VOLUME_ACCESSIBILITY_CONSTRAINTS is advertised: csi-sanity
		// wants NodeGetInfo to report a topology.
		Topology: "topology.kubernetes.io/zone=zone-a",
	}
	if driver == config.DriverONTAPSAN || driver == config.DriverONTAPSANEconomy {
		o.ISCSI = plugintest.StartISCSI(t, roots, s, NodeIQN)
	}
	p := plugintest.Start(t, o)

	cfg := csisanity.NewTestConfig()
	cfg.Address = p.Endpoint
	// csi-sanity makes both directories itself (os.Mkdir) and publishes at
	// TargetPath/target; they must lie below the kubelet dir, as kubelet's
	// do.
	cfg.TargetPath = filepath.Join(roots.KubeletDir, "pods", "sanity-target")
	cfg.StagingPath = filepath.Join(roots.KubeletDir, "plugins", "sanity-staging")
	cfg.IdempotentCount = 10
	// The attach-limit spec runs if NodeGetInfo ever reports
	// max_volumes_per_node; like Trident's, ours reports none.
	cfg.TestNodeVolumeAttachLimit = true
	cfg.TestVolumeMutableParameters = mutableParameters(t, driver, s.Simulator)
	skipSpecs(t, driver)
	csisanity.Test(t, cfg)

	plugintest.AssertONTAPClean(t, s.Simulator)
	if mps := plugintest.MountPointsBelow(t, roots.Root); len(mps) > 0 {
		t.Errorf("mounts left: %v", mps)
	}
	if files := roots.TrackingFiles(t); len(files) > 0 {
		t.Errorf("tracking files left: %v", files)
	}
	if o.ISCSI != nil {
		plugintest.AssertNoISCSI(t, o.ISCSI)
	}
	for _, dir := range []string{cfg.TargetPath, cfg.StagingPath} {
		if _, err := os.Lstat(dir); !os.IsNotExist(err) {
			t.Errorf("%s left behind (%v)", dir, err)
		}
	}
}

// sanityQoS is the QoS policy group the ModifyVolume specs put volumes in.
const sanityQoS = "sanity-gold"

// mutableParameters is the VolumeAttributesClass the ModifyVolume specs
// create and modify volumes with: every key the driver can change. The
// economy drivers change none (their volumes share FlexVols); their specs
// run with an empty class.
func mutableParameters(t *testing.T, driver string, s *ontapsim.Simulator) map[string]string {
	t.Helper()
	if err := s.CreateQoSPolicy(sanityQoS, false, 5000); err != nil {
		t.Fatal(err)
	}
	switch driver {
	case config.DriverONTAPNAS:
		return map[string]string{
			"qosPolicy": sanityQoS, "snapshotPolicy": "none", "snapshotReserve": "10", "tieringPolicy": "none",
			"snapshotDir": "true", "unixPermissions": "0770",
		}
	case config.DriverONTAPSAN:
		return map[string]string{"qosPolicy": sanityQoS, "snapshotPolicy": "none", "snapshotReserve": "10", "tieringPolicy": "none"}
	}
	return nil
}

// A Skip is a csi-sanity spec a driver cannot pass, with the Trident
// behaviour that explains it.
type Skip struct {
	Spec, Why string
}

// Skipped lists, per driver, the csi-sanity specs Run skips. The specs
// csi-sanity skips itself for capabilities the plugin does not advertise
// are not listed.
var Skipped = map[string][]Skip{
	config.DriverONTAPNASEconomy: {
		{"should create volume from an existing source snapshot",
			"Trident 26.06's ontap-nas-economy refuses clones of qtrees (only read-only clones, which CSI cannot ask for) and its pools offer clones false; a StorageClass asking for clones skips it"},
		{"should create volume from an existing source volume",
			"as above: no clones on ontap-nas-economy"},
	},
}

// skipSpecs tells Ginkgo to skip the driver's Skipped specs; its -ginkgo.skip
// flag is bound to the configuration csi-sanity's suite runs with.
func skipSpecs(t *testing.T, driver string) {
	t.Helper()
	var res []string
	for _, s := range Skipped[driver] {
		t.Logf("skipping csi-sanity spec %q: %s", s.Spec, s.Why)
		res = append(res, regexp.QuoteMeta(s.Spec))
	}
	if len(res) == 0 {
		return
	}
	if err := flag.Set("ginkgo.skip", strings.Join(res, "|")); err != nil {
		t.Fatalf("ginkgo.skip: %v", err)
	}
}
