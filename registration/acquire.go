package registration

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/sirupsen/logrus"
)

// acquire is registration.md §5 "Acquire", steps 1–5. Steps 6 and 7 follow
// kubelet's NotifyRegistrationStatus (onNotify).
func (m *Manager) acquire(reason string) error {
	// Step 1: serve CSI on temp sockets unless this process still owns E and
	// csi.sock, and check NodeGetInfo through them (I6).
	var newE, newC *servedSocket
	discard := func() {
		for _, s := range []*servedSocket{newE, newC} {
			if s != nil {
				s.discard()
			}
		}
	}
	var err error
	if m.e == nil || !m.e.owned() {
		if newE, err = m.bindTemp(m.lay.endpoint); err != nil {
			return err
		}
	}
	if m.lay.csiEndpoint != "" && (m.c == nil || !m.c.owned()) {
		if newC, err = m.bindTemp(m.lay.csiEndpoint); err != nil {
			m.log.WithError(err).Warn("cannot bind a socket for --csi_endpoint; continuing with E only")
			newC = nil
		}
	}
	probe := m.lay.endpoint
	if newE != nil {
		probe = newE.path
	}
	pctx, cancel := context.WithTimeout(m.life, m.t.nodeInfo)
	info, err := probeNodeInfo(pctx, probe)
	cancel()
	if err != nil {
		discard()
		return fmt.Errorf("CSI server not ready (I6): %w", err)
	}

	// Steps 2 and 3 in one critical section: allocate G and write the lease,
	// then take E. Holding handover.lock across the rename keeps E with the
	// newest generation even when acquirers race.
	//
	// A re-registration is the holder's alone (§5 Watchdog), and a successor
	// may have taken the lease since the caller checked: a terminating
	// holder reacting to the successor's registrar sidecar (S8o) would
	// otherwise outrank the new pod, take E back and keep it until its
	// grace ran out. So the check is repeated under the lock.
	var holding uint64
	if m.cur != nil && reason != reasonStart && reason != reasonTakeover {
		holding = m.cur.g
	}
	var a *allocation
	err = m.lay.withHandoverLock(func() error {
		var err error
		a, err = m.lay.allocateGeneration(func(g uint64) *Lease {
			return m.newLease(g, info, PhaseStarting)
		}, m.floor, holding)
		if err != nil {
			return err
		}
		if newE != nil {
			if err := newE.moveTo(m.lay.endpoint); err != nil {
				a.alive.Close()
				os.Remove(m.lay.alivePath(a.g))
				return fmt.Errorf("take over E: %w", err)
			}
		}
		if newC != nil {
			if err := newC.moveTo(m.lay.csiEndpoint); err != nil {
				m.log.WithError(err).Warn("cannot take over --csi_endpoint")
				newC.discard()
				newC = nil
			}
		}
		return nil
	})
	if errors.Is(err, errNotHolder) {
		discard()
		m.log.WithFields(logrus.Fields{"generation": holding, "reason": reason}).
			Info("a successor took the lease first; not re-registering")
		return nil // reconcile makes this process a standby
	}
	if err != nil {
		discard()
		return err
	}

	gen := &generation{g: a.g, info: info, alive: a.alive}
	if prev := m.cur; prev != nil && prev.alive != nil {
		// One lock per process: its newest generation stands for it.
		prev.alive.Close()
		prev.alive = nil
	}
	m.cur = gen
	m.gens = append(m.gens, gen)
	if newE != nil {
		if m.e != nil {
			m.orphan(m.e)
		}
		m.e = newE
	}
	if newC != nil {
		if m.c != nil {
			m.orphan(m.c)
		}
		m.c = newC
	}
	m.logAcquired(a, info, reason)
	m.gen.Store(a.g)
	generationGauge.Set(float64(a.g))
	m.setRole(roleStarting)
	m.updateReady(false)

	// Step 4: kubelet's RegisterPlugin writes CSINode; if the API server does
	// not answer, it fails and kubelet drops the driver (K5).
	if m.cfg.Kube != nil && !m.waitForAPI() {
		m.log.WithField("generation", a.g).Warn("terminating before the API server answered; not registering")
		return nil
	}

	// Step 5, only while still the holder: a superseded generation's socket
	// would only be refused (K7).
	if l, err := readLease(m.lay.leasePath()); err != nil || l == nil || l.Generation != a.g {
		m.log.WithField("generation", a.g).Info("superseded before registering")
		return nil
	}
	rs, err := m.exposeRegistration(a.g)
	if err != nil {
		return err
	}
	gen.reg = rs
	m.log.WithFields(logrus.Fields{"generation": a.g, "socket": rs.hostPath, "version": versionOf(a.g)}).
		Info("registration socket exposed")
	return nil
}

func (m *Manager) newLease(g uint64, info NodeInfo, phase Phase) *Lease {
	l := &Lease{
		Generation: g,
		Holder: Holder{
			Pod:       m.cfg.PodName,
			PodUID:    m.cfg.PodUID,
			PID:       os.Getpid(),
			StartedAt: m.started,
		},
		NodeInfo:  info,
		Phase:     phase,
		UpdatedAt: time.Now(),
	}
	if name, err := m.lay.regSocketName(g); err == nil {
		l.RegistrationSocket = filepath.Join(m.lay.hostRegDir, name)
	}
	return l
}

func (m *Manager) logAcquired(a *allocation, info NodeInfo, reason string) {
	log := m.log.WithFields(logrus.Fields{"generation": a.g, "reason": reason})
	if a.prevErr != nil {
		log.WithError(a.prevErr).Warn("previous node lease was unreadable; replaced it")
	}
	if p := a.prev; p != nil && !m.ownsGeneration(p.Generation) {
		predecessor := "dead"
		if a.prevAlive {
			predecessor = "live"
		}
		handoversTotal.WithLabelValues(predecessor).Inc()
		log = log.WithFields(logrus.Fields{"predecessor": p.Generation, "predecessorPod": p.Holder.Pod, "predecessorAlive": a.prevAlive})
		if p.NodeInfo.NodeID != "" && !p.NodeInfo.equal(info) {
			// Kubelet rewrites CSINode and the node's topology labels on the
			// next registration; a topology change can even fail it (K5).
			log.WithFields(logrus.Fields{"previous": p.NodeInfo, "now": info}).
				Error("NODE INFO CHANGED from the previous holder's: kubelet will rewrite CSINode for this driver")
		}
	}
	log.WithField("endpoint", m.lay.hostEndpoint).Info("acquired the node lease and took over E")
}

// tryAcquire runs acquire and schedules a retry with backoff if it fails.
func (m *Manager) tryAcquire(reason string) {
	if err := m.acquire(reason); err != nil {
		m.log.WithError(err).WithField("reason", reason).Warn("could not acquire the node registration; will retry")
		m.scheduleRetry(reason)
	}
}

func (m *Manager) scheduleRetry(reason string) {
	switch {
	case m.backoff == 0:
		m.backoff = m.t.backoffMin
	default:
		m.backoff = min(2*m.backoff, m.t.backoffMax)
	}
	m.retryAt = time.Now().Add(m.backoff)
	m.retryReason = reason
}

// reregister registers a new generation at once because kubelet may have
// just deregistered the driver. The lease is read again first: a successor
// may have taken over since the caller looked.
func (m *Manager) reregister(reason string) {
	if !m.isHolder() {
		return
	}
	reregistrationsTotal.WithLabelValues(reason).Inc()
	m.log.WithField("reason", reason).Warn("kubelet may have deregistered the driver; registering a new generation")
	m.tryAcquire(reason)
}
