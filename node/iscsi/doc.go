// Package iscsi is the initiator side of ontap-san volumes: it logs in to
// ONTAP iSCSI targets, makes the kernel see exactly one LUN, verifies that
// every device it uses or removes is that LUN, and takes it away again.
//
// Host tools (iscsiadm, multipath, multipathd, blockdev) run through a
// hostexec.Executor, argv only. The kernel is read and driven through sysfs
// (Config.SysRoot) and device nodes (Config.DevDir); see sysfs.go for the
// layout.
//
// # Identity
//
// A LUN is identified by its serial (VPD page 0x80), never by its address
// alone: the kernel keeps a device at H:C:T:L until it is told otherwise,
// so after an unmap and a new map on the array the same address can show a
// stale device of another LUN (Trident #410, #812). Attach removes such a
// device and scans once more; Detach, Find and Resize ignore it. A
// multipath map is the LUN's when its WWID carries the serial and all its
// paths do.
//
// # Sessions
//
// node.session.scan is set to manual before login, so a login to a shared
// target (one per SVM on ONTAP) makes no device appear; Attach writes
// "0 <target id> <lun>" to the host's scan file for exactly its LUN. A
// session is logged out when no SCSI device is left on it: with manual
// scans, a device on a session exists only because some Attach asked for
// it, so an empty session carries no LUN in use. Attach holds a per-target
// lock file (Config.LockDir, flock, released by the kernel when a process
// dies) from its first login until its path devices exist, and the logout
// decision is taken under the same lock, across all node-plugin processes
// on the host (I8). Attaches whose sessions exist hold it shared, so the
// LUNs of one target attach side by side; a login and the logout decision
// hold it exclusively.
//
// The session list is read from sysfs (class/iscsi_session), which is all
// `iscsiadm -m session` reads; iscsiadm is asked only when sysfs does not
// describe every session (sysfsSessions).
//
// # Crash safety
//
// The node process may be killed between any two steps of Attach or
// Detach. The Client keeps no state of its own but multipathd's answer
// about itself, for seconds (multipathdTTL): each call re-reads the
// session list and sysfs, and each step is one whose repetition is
// harmless:
//
//   - "iscsiadm -o new" rewrites the node record from defaults and every
//     setting is written again before the login; a login to a portal with
//     a session is skipped, and if it raced exits 15, which is success.
//   - A scan of a LUN the kernel already has is skipped (and would be a
//     no-op in the kernel): one SCSI device per address, so a LUN is never
//     attached twice on a session. In single-path mode the session that
//     already has the device is chosen again, so a retry never adds a
//     second path.
//   - multipathd keeps one map per WWID; Attach only waits for it.
//   - A stale device removed before the crash is simply absent on retry and
//     the LUN is scanned again.
//   - Detach finds what is left by serial: a map already flushed or a path
//     already deleted is no longer found, and the remaining steps run. A
//     logout that already happened leaves no session to log out of, and
//     "iscsiadm -u/-o delete" with nothing to do (exit 21) is success.
//
// The per-target lock is released by the kernel when its holder dies, so a
// crash never blocks the retry.
package iscsi
