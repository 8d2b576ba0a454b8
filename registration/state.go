package registration

import (
	"errors"
	"time"

	"github.com/sirupsen/logrus"
)

// The process's own view of its registration role.
const (
	roleAcquiring    = "acquiring"    // no generation yet
	roleStarting     = "starting"     // holder, registration pending
	roleRegistered   = "registered"   // holder, kubelet accepted our generation
	roleStandby      = "standby"      // superseded by a newer generation
	roleUninstalling = "uninstalling" // holder, deregistered on request
)

var allRoles = []string{roleAcquiring, roleStarting, roleRegistered, roleStandby, roleUninstalling}

func (m *Manager) setRole(role string) {
	if old := m.currentRole(); old != role {
		m.log.WithFields(logrus.Fields{"from": old, "to": role}).Info("registration role changed")
	}
	m.role.Store(role)
	setRoleMetric(role)
}

func (m *Manager) currentRole() string {
	r, _ := m.role.Load().(string)
	return r
}

func (m *Manager) updateReady(v bool) { m.ready.Store(v) }

// isHolder reports whether the lease names this process's newest generation.
func (m *Manager) isHolder() bool {
	if m.cur == nil {
		return false
	}
	l, err := readLease(m.lay.leasePath())
	return err == nil && l != nil && l.Generation == m.cur.g
}

// reconcile compares this process's generations with the lease and acts:
// holder (watchdog when full), superseded (standby, take over from a dead
// holder), uninstalling, or a damaged lease to repair.
func (m *Manager) reconcile(full bool) {
	now := time.Now()
	if full {
		m.lastCheck = now
	}
	defer m.reapOrphans(now)
	if m.cur == nil {
		m.updateReady(false)
		return
	}
	lease, err := readLease(m.lay.leasePath())
	if err != nil && !errors.Is(err, errCorruptLease) {
		m.logOnce(err, "cannot read the node lease")
		return
	}
	switch {
	case lease != nil && lease.Phase == PhaseUninstalling && lease.Generation <= m.cur.g:
		m.uninstall()
	case lease != nil && lease.Generation == m.cur.g:
		m.asHolder(full)
	case lease == nil || lease.Generation < m.cur.g:
		m.repairLease(err)
	default:
		m.asStandby(lease)
	}
	m.reapGenerations(lease, now)
}

func (m *Manager) asHolder(full bool) {
	if m.cur.deregistered {
		m.updateReady(false)
		return
	}
	if m.cur.registered {
		m.setRole(roleRegistered)
	} else {
		m.setRole(roleStarting)
	}
	m.updateReady(m.cur.registered)
	if full {
		m.watchdog()
	}
}
