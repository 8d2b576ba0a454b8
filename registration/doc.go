// Package registration registers the node plugin with kubelet without a
// node-driver-registrar sidecar, and hands the registration over between
// node-plugin processes with no moment in which kubelet has the driver
// unregistered. It implements the design in docs/design/registration.md; K1..K10 and
// I1..I8 in comments refer to its kubelet facts and invariants.
//
// In short: every process that acquires the node lease gets a fresh
// generation G, larger than any seen on the node, advertises version 1.0.G
// (so kubelet always accepts the newest, K3) on a registration socket used
// once (<driver>-g<G>-reg.sock), and always names the same CSI endpoint E,
// whose ownership moves by an atomic rename (I3). Registration sockets are
// never unlinked while kubelet may hold them (K4): they are retired by a
// rename to a dot-name, which kubelet ignores (K1, I2). Only an explicit
// uninstall (`ontap-csi deregister`) deregisters.
//
// Files, in PLUGIN_DIR (<kubelet-dir>/plugins/<driver>): csi-node.sock (E),
// csi.sock (--csi_endpoint), lease.json, handover.lock and one g<G>.alive
// per live process, flocked for its life; in REG_DIR (plugins_registry):
// the registration sockets.
package registration
