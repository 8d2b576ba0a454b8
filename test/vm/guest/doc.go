// Package guest holds the tests that run inside the VM of test/vm and
// only there: the ONTAP simulator's kernel data plane (LIO and nfsd)
// under REST calls, seen by the VM's own iscsiadm and sysfs. The plugin's
// data path on the real kernel is tested by test/e2e and test/sanity,
// which test/vm runs in the same VM (plugintest.RealKernel).
//
// The test binary (`go test -c`) is passed in by test/vm; the tests skip
// unless ONTAP_CSI_VM_GUEST is set, which only the VM's command does.
package guest
