package registration

// repairLease handles a lease that is missing, unreadable or older than
// this process's generation: someone deleted or damaged it. The newest live
// generation repairs it; the others wait for that. A holder rewrites it; a
// standby has no registration of its own to keep, so it takes over as from
// a dead holder.
func (m *Manager) repairLease(cause error) {
	if m.currentRole() == roleStandby {
		live, err := m.lay.liveGenerations()
		if err != nil {
			m.logOnce(err, "cannot list live generations")
			return
		}
		if len(live) > 0 && live[len(live)-1] > m.cur.g || m.terminating || !m.retryAt.IsZero() {
			return
		}
		m.log.WithError(cause).Warn("node lease missing or damaged and no newer generation is alive; taking over")
		m.tryAcquire(reasonTakeover)
		return
	}
	var rewrote bool
	err := m.lay.withHandoverLock(func() error {
		l, _ := readLease(m.lay.leasePath())
		if l != nil && l.Generation >= m.cur.g {
			return nil // repaired meanwhile
		}
		live, err := m.lay.liveGenerations()
		if err != nil {
			return err
		}
		if len(live) > 0 && live[len(live)-1] > m.cur.g {
			return nil
		}
		if m.cur.alive == nil || !sameFile(m.cur.alive, m.lay.alivePath(m.cur.g)) {
			// Our g<G>.alive went with the lease; lock a new one.
			f, err := lockFile(m.lay.alivePath(m.cur.g))
			if err != nil {
				return err
			}
			if m.cur.alive != nil {
				m.cur.alive.Close()
			}
			m.cur.alive = f
		}
		phase := PhaseStarting
		if m.cur.registered {
			phase = PhaseRegistered
		}
		rewrote = true
		return writeLease(m.lay.leasePath(), m.newLease(m.cur.g, m.cur.info, phase))
	})
	switch {
	case err != nil:
		m.logOnce(err, "cannot repair the node lease")
	case rewrote:
		m.log.WithError(cause).WithField("generation", m.cur.g).Warn("node lease was missing or damaged; rewrote it")
	}
}
