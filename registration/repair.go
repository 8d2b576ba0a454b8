package registration

import (
	"context"

	"github.com/ontap-csi/ontap-csi/internal/filelock"
)

// repairLease handles a lease that is missing, unreadable or older than
// this process's generation: someone deleted or damaged it. The newest live
// generation repairs it; the others wait for that. A holder rewrites it; a
// standby has no registration of its own to keep, so it takes over as from
// a dead holder.
func (m *Manager) repairLease(cause error) {
	cur := m.generations.current
	if m.published.currentRole() == roleStandby {
		live, err := m.paths.liveGenerations()
		if err != nil {
			m.logOnce(err, "cannot list live generations")
			return
		}
		if len(live) > 0 && live[len(live)-1] > cur.g || m.sigterm.received || m.retry.pending() {
			return
		}
		m.log.WithError(cause).Warn("node lease missing or damaged and no newer generation is alive; taking over")
		m.tryAcquire(reasonTakeover)
		return
	}
	var rewrote bool
	err := m.paths.withHandoverLock(func() error {
		l, _ := readLease(m.paths.leasePath())
		if l != nil && l.Generation >= cur.g {
			return nil // repaired meanwhile
		}
		live, err := m.paths.liveGenerations()
		if err != nil {
			return err
		}
		if len(live) > 0 && live[len(live)-1] > cur.g {
			return nil
		}
		if cur.alive == nil || !cur.alive.Linked() {
			// Our g<G>.alive went with the lease; lock a new one.
			f, err := filelock.Acquire(context.Background(), m.paths.alivePath(cur.g), filelock.Exclusive, 0o644)
			if err != nil {
				return err
			}
			if cur.alive != nil {
				cur.alive.Release()
			}
			cur.alive = f
		}
		phase := PhaseStarting
		if cur.registered {
			phase = PhaseRegistered
		}
		rewrote = true
		return writeLease(m.paths.leasePath(), m.paths.newLease(m.self, cur.g, cur.info, phase))
	})
	switch {
	case err != nil:
		m.logOnce(err, "cannot repair the node lease")
	case rewrote:
		m.log.WithError(cause).WithField("generation", cur.g).Warn("node lease was missing or damaged; rewrote it")
	}
}
