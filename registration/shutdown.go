package registration

import (
	"context"
	"time"

	"github.com/sirupsen/logrus"
)

// termination is "SIGTERM": the signal, and the handover grace that
// follows it.
type termination struct {
	signal    context.Context // Run's ctx: ends on SIGTERM
	received  bool            // the Run loop has begun terminating
	graceEnds time.Time       // --handover-grace after SIGTERM
}

// beginTermination is "SIGTERM": no deregistration (unless
// --deregister-on-shutdown=always), no new takeovers; keep serving E until
// a successor takes it over or the grace expires.
func (m *Manager) beginTermination() {
	m.sigterm.received = true
	m.sigterm.graceEnds = time.Now().Add(m.cfg.HandoverGrace)
	holder := m.isHolder()
	if !holder {
		m.retry.cancel()
	}
	if cur := m.generations.current; m.cfg.DeregisterOnShutdown && holder && !cur.deregistered {
		m.deregister(cur, "--deregister-on-shutdown=always")
	}
	m.log.WithFields(logrus.Fields{"holder": holder, "grace": m.cfg.HandoverGrace}).
		Info("terminating: serving E until a successor takes it over or the grace expires")
}

// mayExit reports whether a terminating process is done: E is no longer
// its own (or it deregistered, or the grace expired), and no registration
// server is within its linger time (I5).
func (m *Manager) mayExit() bool {
	now := time.Now()
	cur := m.generations.current
	deregistered := cur != nil && cur.deregistered
	if !m.endpoints.handedOver() && !deregistered && now.Before(m.sigterm.graceEnds) {
		return false
	}
	return !m.generations.lingering(now, m.timings.linger)
}

// shutdown closes every listener without unlinking anything (I7): E and the
// registration socket stay, so kubelet keeps the driver registered at E for
// the next process, and the successor retires the socket.
func (m *Manager) shutdown() {
	handedOver := m.endpoints.handedOver()
	m.endpoints.closeAll()
	m.generations.stopServers()
	m.retirer.wait()
	m.generations.releaseLocks()
	m.published.ready.Store(false)
	m.log.WithField("handedOver", handedOver).Info("registration stopped; listeners closed, nothing unlinked")
}
