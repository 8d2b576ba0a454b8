package registration

import (
	"path/filepath"
	"time"

	"github.com/fsnotify/fsnotify"
)

// watchdogState is what the holder's watchdog keeps between checks.
type watchdogState struct {
	lastCheck time.Time     // the last full check, once every timings.watchdog
	lastGC    time.Time     // the last garbage collection
	confirmAt time.Time     // register once more after kubelet's next reconcile (K2); zero: not scheduled
	csinode   *csinodeWatch // this node's CSINode; nil without API access
}

// confirmDue reports, once, that the scheduled second registration is due.
func (w *watchdogState) confirmDue(now time.Time) bool {
	if w.confirmAt.IsZero() || now.Before(w.confirmAt) {
		return false
	}
	w.confirmAt = time.Time{}
	return true
}

// watchdog is the holder's periodic check ("Watchdog").
// REG_DIR events trigger the same checks at once (onRegDirEvent).
func (m *Manager) watchdog() {
	m.rebindLostEndpoints()
	cur := m.generations.current
	if cur.reg != nil && !cur.retired && !cur.reg.sock.owned() {
		// Deleted or replaced: kubelet has deregistered the driver (K4) or
		// is about to.
		m.reregisterAfterFileEvent(reasonSocketRemoved)
		return
	}
	if cur.registered {
		m.sweepRegDir()
		m.checkCSINode()
	}
	if time.Since(m.watch.lastGC) >= m.timings.gcEvery {
		m.collectGarbage()
	}
}

// onRegDirEvent is the holder's watchdog on REG_DIR events ("Watchdog":
// registration socket, other sockets; "Legacy registrar socket").
func (m *Manager) onRegDirEvent(name string, op fsnotify.Op) {
	if !op.Has(fsnotify.Create) && !op.Has(fsnotify.Remove) {
		return // K1: kubelet ignores everything else, and so do we
	}
	cur := m.generations.current
	if !m.paths.mayCarryDriver(name) || cur == nil || cur.deregistered {
		return
	}
	lease, err := readLease(m.paths.leasePath())
	if err != nil || lease == nil || lease.Generation != cur.g || lease.Phase == PhaseUninstalling {
		return // not the holder: the holder's watchdog acts
	}
	own := cur.reg != nil && name == cur.reg.name
	kind, g := m.paths.parseRegName(name)
	successor := kind == kindGeneration && g > cur.g
	switch {
	case successor:
		// A newer generation's socket is its own business.
	case own:
		// Deleted, or replaced by a rename onto it: either way kubelet
		// deregisters the driver (K4, docs/design/registration.md §7.5d).
		if !cur.retired && !cur.reg.sock.owned() {
			m.reregisterAfterFileEvent(reasonSocketRemoved)
		}
	case op.Has(fsnotify.Remove):
		// K4: kubelet deregisters the driver by name when any socket it
		// holds is unlinked, e.g. by a legacy registrar on SIGTERM.
		m.reregisterAfterFileEvent(reasonOtherRemoved)
	case !cur.registered:
		// A legacy socket created now, while this holder is on its way to
		// registering (a registrar sidecar next to us in an operator's
		// DaemonSet): retire it before kubelet's next reconcile registers
		// it (K2). Registered, its path would stay in kubelet's state after
		// any retirement (K1), and the next registrar's Create at that path
		// would make kubelet unregister the driver by name (K4, S8o). It is
		// no one's only registration: ours outranks it (K3, I4), and while
		// the API server is down it would fail like ours (K5).
		if op.Has(fsnotify.Create) && kind == kindLegacy && !m.sigterm.received && isSocket(filepath.Join(m.paths.regDir, name)) {
			m.retireByName(name, g)
		}
		// A pre-existing legacy socket is left alone: it may be the only
		// registration kubelet has. But a Create on a path kubelet still
		// holds (a retired legacy socket stays in kubelet's state) makes
		// kubelet unregister that path, by name, in its next reconcile
		// (docs/design/registration.md §7.5d); so register once more after that reconcile.
		if kind != kindGeneration && m.watch.confirmAt.IsZero() {
			m.watch.confirmAt = time.Now().Add(m.timings.confirmAfter)
		}
	default:
		// Registered: retire it at once, so that its owner's unlink (a
		// legacy registrar's on SIGTERM) hits ENOENT and cannot deregister
		// the driver. Our generation outranks it anyway (I4).
		if kind != kindForeign && isSocket(filepath.Join(m.paths.regDir, name)) {
			m.retireByName(name, g)
		}
		if kind != kindGeneration {
			m.reregisterAfterFileEvent(reasonOtherCreated)
		}
	}
}

// reregisterAfterFileEvent is reregister for a REG_DIR event that makes
// kubelet deregister the driver in its next reconcile (K2, K4). There the
// deregistration and our new registration run concurrently, in either order
// (docs/design/registration.md §7.2), so register once more after that reconcile has passed.
func (m *Manager) reregisterAfterFileEvent(reason string) {
	m.reregister(reason)
	m.watch.confirmAt = time.Now().Add(m.timings.confirmAfter)
}
