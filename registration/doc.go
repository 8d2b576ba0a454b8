// Package registration registers the node plugin with kubelet without a
// node-driver-registrar sidecar, and hands the registration over between
// node-plugin processes with no moment in which kubelet has the driver
// unregistered. It implements the design in docs/design/registration.md;
// K1..K10 and I1..I8 in comments refer to its kubelet facts and invariants,
// quoted names ("Acquire" step N, "Retire", "Superseded", "SIGTERM",
// "Uninstall", "Watchdog", "Garbage collection", "Legacy registrar socket")
// to the parts of its protocol.
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
//
// Where each part of the protocol lives:
//
//	manager.go     Config, New, and Run: the event loop (file events, Notify, tick)
//	state.go       the roles and their transitions; reconcile picks the role from the lease
//	acquire.go     "Acquire": the steps in order, steps 2+3's critical section, retries
//	endpoint.go    E and csi.sock: step 1 (temp sockets, the NodeGetInfo check),
//	               step 3 (take over), and the Watchdog's re-bind of E
//	generation.go  step 2's generation G and g<G>.alive; this process's generations
//	kubeapi.go     the API server: step 4's wait for it
//	register.go    steps 5-7: the registration server, GetInfo, NotifyRegistrationStatus
//	retire.go      "Retire", and the registered holder's sweep of REG_DIR (step 6)
//	gc.go          "Garbage collection"
//	superseded.go  "Superseded": standby, and the takeover from a dead holder
//	repair.go      a lease that was deleted or damaged
//	shutdown.go    "SIGTERM"
//	uninstall.go   "Uninstall": `ontap-csi deregister` and the holder's part
//	watchdog.go    "Watchdog" and "Legacy registrar socket": REG_DIR events
//	csinode.go     the Watchdog's optional CSINode check
//	lease.go       lease.json and handover.lock
//	paths.go       "Files on the node": every path and name
//	sockets.go     unix listeners that never unlink (I7)
//	locks.go       flock
//	status.go      `ontap-csi status`
//	metrics.go     /metrics, and the reasons of a re-registration
package registration
