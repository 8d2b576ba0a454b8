// Package guest holds the tests that run inside the VM of test/vm, on a
// real kernel with no shims: the ONTAP simulator with its kernel data plane
// (`ontap-sim --dataplane kernel`: LIO and nfsd) and the real ontap-csi
// binary in the allInOne role, driven over its CSI socket, against the
// VM's iscsid, multipathd, udev and NFS client.
//
// The test binary (`go test -c`), ontap-csi and ontap-sim are passed in by
// test/vm (TestNFSVolumeLife, TestISCSIVolumeLife); the tests skip unless
// ONTAP_CSI_VM_GUEST is set, which only the VM's command does.
package guest
