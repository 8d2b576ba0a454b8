package registration

import (
	"time"

	"github.com/sirupsen/logrus"
)

// beginTermination is "SIGTERM": no deregistration (unless
// --deregister-on-shutdown=always), no new takeovers; keep serving E until
// a successor takes it over or the grace expires.
func (m *Manager) beginTermination() {
	m.terminating = true
	m.deadline = time.Now().Add(m.cfg.HandoverGrace)
	holder := m.isHolder()
	if !holder {
		m.retryAt = time.Time{}
	}
	if m.cfg.DeregisterOnShutdown && holder && !m.cur.deregistered {
		m.deregister(m.cur, "--deregister-on-shutdown=always")
	}
	m.log.WithFields(logrus.Fields{"holder": holder, "grace": m.cfg.HandoverGrace}).
		Info("terminating: serving E until a successor takes it over or the grace expires")
}

// mayExit reports whether a terminating process is done: E is no longer
// its own (or it deregistered, or the grace expired), and no registration
// server is within its linger time (I5).
func (m *Manager) mayExit() bool {
	now := time.Now()
	handedOver := m.e == nil || !m.e.owned()
	deregistered := m.cur != nil && m.cur.deregistered
	if !handedOver && !deregistered && now.Before(m.deadline) {
		return false
	}
	for _, gen := range m.gens {
		if gen.reg != nil && !gen.reg.stopped && now.Before(gen.reg.lingerUntil(m.t.linger)) {
			return false
		}
	}
	return true
}

// shutdown closes every listener without unlinking anything (I7): E and the
// registration socket stay, so kubelet keeps the driver registered at E for
// the next process, and the successor retires the socket.
func (m *Manager) shutdown() {
	handedOver := m.e == nil || !m.e.owned()
	for _, s := range []*servedSocket{m.e, m.c} {
		if s != nil {
			s.close()
		}
	}
	for _, o := range m.orphans {
		o.s.close()
	}
	m.orphans = nil
	for _, gen := range m.gens {
		if gen.reg != nil {
			gen.reg.stop()
		}
	}
	m.retirer.wait()
	for _, gen := range m.gens {
		if gen.alive != nil {
			gen.alive.Close()
			gen.alive = nil
		}
	}
	m.updateReady(false)
	m.log.WithField("handedOver", handedOver).Info("registration stopped; listeners closed, nothing unlinked")
}
