package registration

import (
	"errors"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
)

// role is this process's state in the protocol. reconcile decides from the
// lease which one applies; the transitions are:
//
//	acquiring     no generation yet. Acquire → starting.
//	starting      holder of generation G, registration pending.
//	              Notify(true) → registered (Acquire step 6); Notify(false):
//	              retire G and Acquire again after a backoff (step 7).
//	registered    holder, kubelet accepted G. When kubelet may have dropped
//	              the driver, the Watchdog Acquires a new G → starting.
//	standby       the lease names a newer generation ("Superseded"). The
//	              holder's lock is free: Acquire (takeover) → starting.
//	uninstalling  the lease is marked uninstalling ("Uninstall"): G is
//	              deregistered and nothing re-registers; a newer process that
//	              clears the mark makes this one a standby.
//
// A missing or damaged lease is repaired (repairLease). SIGTERM is not a
// role: in any role the process stops taking over, keeps serving E until a
// successor has it or the grace expires, and exits ("SIGTERM").
type role string

const (
	roleAcquiring    role = "acquiring"    // no generation yet
	roleStarting     role = "starting"     // holder, registration pending
	roleRegistered   role = "registered"   // holder, kubelet accepted our generation
	roleStandby      role = "standby"      // superseded by a newer generation
	roleUninstalling role = "uninstalling" // holder, deregistered on request
)

var allRoles = []role{roleAcquiring, roleStarting, roleRegistered, roleStandby, roleUninstalling}

// published is the part of the state that other goroutines read: the role
// (metrics), readiness (/readyz) and the newest generation.
type published struct {
	role       atomic.Value  // role
	ready      atomic.Bool   // the registered holder, or a standby while a holder lives
	generation atomic.Uint64 // this process's newest generation; 0: none yet
}

func (p *published) currentRole() role {
	r, _ := p.role.Load().(role)
	return r
}

// setRole moves this process to role r; a transition is logged, and the
// role is published for /metrics.
func (m *Manager) setRole(r role) {
	if old := m.published.currentRole(); old != r {
		m.log.WithFields(logrus.Fields{"from": old, "to": r}).Info("registration role changed")
	}
	m.published.role.Store(r)
	setRoleMetric(r)
}

// isHolder reports whether the lease names this process's newest generation.
func (m *Manager) isHolder() bool {
	cur := m.generations.current
	return cur != nil && m.paths.leaseNames(cur.g)
}

// reconcile compares this process's generations with the lease and acts:
// holder (watchdog when full), superseded (standby, take over from a dead
// holder), uninstalling, or a damaged lease to repair.
func (m *Manager) reconcile(full bool) {
	now := time.Now()
	if full {
		m.watch.lastCheck = now
	}
	defer m.endpoints.reapOrphans(now, m.timings.drainDelay)
	cur := m.generations.current
	if cur == nil {
		m.published.ready.Store(false)
		return
	}
	lease, err := readLease(m.paths.leasePath())
	if err != nil && !errors.Is(err, errCorruptLease) {
		m.logOnce(err, "cannot read the node lease")
		return
	}
	switch {
	case lease != nil && lease.Phase == PhaseUninstalling && lease.Generation <= cur.g:
		m.uninstall()
	case lease != nil && lease.Generation == cur.g:
		m.asHolder(full)
	case lease == nil || lease.Generation < cur.g:
		m.repairLease(err)
	default:
		m.asStandby(lease)
	}
	m.generations.reap(lease, now, m.timings.linger)
}

// asHolder keeps the role in step with the current generation's
// registration and, on a full check, runs the watchdog.
func (m *Manager) asHolder(full bool) {
	cur := m.generations.current
	if cur.deregistered {
		m.published.ready.Store(false)
		return
	}
	if cur.registered {
		m.setRole(roleRegistered)
	} else {
		m.setRole(roleStarting)
	}
	m.published.ready.Store(cur.registered)
	if full {
		m.watchdog()
	}
}

// cancelTimers drops a scheduled retry and the watchdog's scheduled second
// registration: they are the holder's, and this process no longer is one.
func (m *Manager) cancelTimers() {
	m.retry.cancel()
	m.watch.confirmAt = time.Time{}
}
