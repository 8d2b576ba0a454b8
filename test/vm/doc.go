// Package vm runs tests on a real Linux kernel: Debian 12's, in a QEMU
// virtual machine (TCG: software emulation, no KVM needed), because the
// test machines' own kernel has no NFS client or server, no iSCSI initiator
// or target and no device-mapper (docs/vm.md).
//
// The image is built from Debian packages only (image.sh: debootstrap
// minbase, the kernel, open-iscsi, multipath-tools, nfs-common,
// nfs-kernel-server, e2fsprogs, xfsprogs, udev) and cached by content in
// the e2e cache (CacheDir) as vm-<key>. Each run boots it on a
// copy-on-write overlay, with the host's files in /host/in and the results
// in /host/out (9p), runs
// init.sh as pid 1 — udevd, iscsid, multipathd, rpcbind, statd, mountd,
// nfsd, configfs, loopback aliases for the simulator's data LIFs
// (127.0.0.10 NFS, 127.0.0.11 and .12 iSCSI) — then the command, and
// powers off.
//
//	res := vm.Run(t, vm.Options{
//		Files:   map[string]string{"guest.test": bin},
//		Command: []string{"/host/in/guest.test", "-test.v"},
//	})
//
// A run leaves nothing: qemu is killed with its process group when the
// test ends, fails, times out, or the test process gets SIGINT or SIGTERM,
// and dies with the test process otherwise (Pdeathsig); its overlay is
// unlinked before qemu starts, which gets it as open file descriptors.
//
// The tests boot VMs only with ONTAP_CSI_VM=1 (make vm).
package vm
