package plugintest

import (
	"os"
	"strings"
	"testing"
)

// EnvRealKernel, set to 1, makes the suites that use plugintest (test/e2e,
// test/sanity) run on the real kernel they run on, with the host's own
// tools and no shims: in the VM of test/vm (docs/vm.md), whose init
// starts iscsid, multipathd, udevd, nfsd and mountd. Then:
//
//   - the simulator serves its LUNs and exports through LIO and nfsd
//     (ontapsim.DataPlaneKernel);
//   - the plugin runs the host's iscsiadm, multipath and mount.nfs on the
//     host's /dev and /sys, and its initiator name is the host's;
//   - the node's address is the VM's node address, RealKernelNodeIP;
//   - binaries cannot be built (no Go in the VM): ontap-csi and its
//     crash-point build come from EnvPrebuilt.
const EnvRealKernel = "ONTAP_CSI_REAL_KERNEL"

// EnvPrebuilt names a directory holding ontap-csi and ontap-csi-<tags>
// (ontap-csi-crashpoints) built beforehand; Binary uses them instead of
// building.
const EnvPrebuilt = "ONTAP_CSI_E2E_BIN"

// RealKernelNodeIP is the node's address in the VM of test/vm: its
// connections to the simulator's data LIFs come from it (test/vm/init.sh),
// so export rules must name it.
const RealKernelNodeIP = "127.0.0.20"

// RealKernel reports whether the tests run on a real kernel without shims
// (EnvRealKernel).
func RealKernel() bool { return os.Getenv(EnvRealKernel) == "1" }

// NodeIP is the address the node mounts NFS exports from: shimIP through
// the shims (which take it from the plugin's environment), the VM's node
// address on a real kernel.
func NodeIP(shimIP string) string {
	if RealKernel() {
		return RealKernelNodeIP
	}
	return shimIP
}

// hostInitiatorName reads the host's iSCSI initiator name, as iscsid
// and the plugin do.
func hostInitiatorName(t testing.TB) string {
	t.Helper()
	b, err := os.ReadFile("/etc/iscsi/initiatorname.iscsi")
	if err != nil {
		t.Fatalf("the host's initiator name: %v", err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "InitiatorName="); ok && v != "" {
			return v
		}
	}
	t.Fatal("/etc/iscsi/initiatorname.iscsi names no initiator")
	return ""
}
