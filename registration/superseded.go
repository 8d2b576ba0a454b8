package registration

import (
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/internal/filelock"
)

// asStandby is "Superseded": a newer generation holds the lease. This
// process stops taking new work (E is no longer its own, so new connections
// reach the holder), finishes calls in flight, and takes over if the
// holder's g<G>.alive lock becomes free while it is not terminating.
func (m *Manager) asStandby(lease *Lease) {
	if m.published.currentRole() != roleStandby {
		m.log.WithFields(logrus.Fields{
			"generation": m.generations.current.g, "holder": lease.Generation, "holderPod": lease.Holder.Pod,
		}).Info("superseded by a newer generation; standing by")
		m.setRole(roleStandby)
		m.cancelTimers()
	}
	m.endpoints.orphanLost()
	alive, err := filelock.Locked(m.paths.alivePath(lease.Generation))
	if err != nil {
		m.logOnce(err, "cannot probe the holder's lock")
		return
	}
	m.published.ready.Store(alive)
	if alive || m.sigterm.received || lease.Phase == PhaseUninstalling || m.retry.pending() {
		return
	}
	m.log.WithFields(logrus.Fields{"holder": lease.Generation, "holderPod": lease.Holder.Pod}).
		Warn("the holder's lock is free, so it died; taking over")
	m.tryAcquire(reasonTakeover)
}
