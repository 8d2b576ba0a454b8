package registration

import (
	"errors"
	"time"

	"github.com/sirupsen/logrus"
)

// acquire is "Acquire" steps 1–5, run by a new process, by a standby taking
// over and by a holder registering a new generation. Steps 6 and 7 follow
// kubelet's NotifyRegistrationStatus (onNotify).
func (m *Manager) acquire(reason string) error {
	fresh, info, err := m.serveOnTempSockets() // step 1
	if err != nil {
		return err
	}

	// A re-registration is the holder's alone ("Watchdog"), and a successor
	// may have taken the lease since the caller checked: a terminating
	// holder reacting to the successor's registrar sidecar (S8o) would
	// otherwise outrank the new pod, take E back and keep it until its
	// grace ran out. So the check is repeated under the lock.
	var holding uint64
	if cur := m.generations.current; cur != nil && reason != reasonStart && reason != reasonTakeover {
		holding = cur.g
	}
	a, err := m.allocateAndTakeOver(&fresh, info, holding) // steps 2 and 3
	if errors.Is(err, errNotHolder) {
		fresh.discard()
		m.log.WithFields(logrus.Fields{"generation": holding, "reason": reason}).
			Info("a successor took the lease first; not re-registering")
		return nil // reconcile makes this process a standby
	}
	if err != nil {
		fresh.discard()
		return err
	}
	gen := m.adopt(a, info, fresh, reason)

	// Step 4: kubelet's RegisterPlugin writes CSINode; if the API server does
	// not answer, it fails and kubelet drops the driver (K5).
	if m.cfg.Kube != nil && !m.waitForAPI() {
		m.log.WithField("generation", a.g).Warn("terminating before the API server answered; not registering")
		return nil
	}
	return m.exposeRegistration(gen) // step 5
}

// allocateAndTakeOver is Acquire steps 2 and 3 in one critical section:
// allocate G and write the lease, then take E. Holding handover.lock across
// the rename keeps E with the newest generation even when acquirers race.
// holding, when not 0, is the generation a holder re-registers from
// (allocateGeneration refuses with errNotHolder if the lease moved on).
func (m *Manager) allocateAndTakeOver(fresh *socketPair, info NodeInfo, holding uint64) (*allocation, error) {
	var a *allocation
	err := m.paths.withHandoverLock(func() error {
		var err error
		a, err = m.paths.allocateGeneration(func(g uint64) *Lease {
			return m.paths.newLease(m.self, g, info, PhaseStarting)
		}, m.generations.floor, holding)
		if err != nil {
			return err
		}
		if err := m.takeOver(fresh); err != nil {
			a.alive.Remove()
			a.alive.Release()
			return err
		}
		return nil
	})
	return a, err
}

// adopt makes the allocated generation this process's current one, and the
// sockets step 3 moved onto E and csi.sock its own.
func (m *Manager) adopt(a *allocation, info NodeInfo, taken socketPair, reason string) *generation {
	gen := &generation{g: a.g, info: info, alive: a.alive}
	m.generations.add(gen)
	m.endpoints.adopt(taken)
	m.logAcquired(a, info, reason)
	m.published.generation.Store(a.g)
	generationGauge.Set(float64(a.g))
	m.setRole(roleStarting)
	m.published.ready.Store(false)
	return gen
}

func (m *Manager) logAcquired(a *allocation, info NodeInfo, reason string) {
	log := m.log.WithFields(logrus.Fields{"generation": a.g, "reason": reason})
	if a.prevErr != nil {
		log.WithError(a.prevErr).Warn("previous node lease was unreadable; replaced it")
	}
	if p := a.prev; p != nil && !m.generations.owns(p.Generation) {
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
	log.WithField("endpoint", m.paths.hostEndpoint).Info("acquired the node lease and took over E")
}

// tryAcquire runs acquire and schedules a retry with backoff if it fails.
func (m *Manager) tryAcquire(reason string) {
	if err := m.acquire(reason); err != nil {
		m.log.WithError(err).WithField("reason", reason).Warn("could not acquire the node registration; will retry")
		m.retry.schedule(reason, m.timings)
	}
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

// retryTimer is the next acquire after a failed one, or after kubelet
// rejected a generation (Acquire step 7): 1 s, doubling up to 30 s.
type retryTimer struct {
	backoff time.Duration // 0 after a registration succeeded
	at      time.Time     // zero: none scheduled
	reason  string
}

func (r *retryTimer) schedule(reason string, t timings) {
	switch {
	case r.backoff == 0:
		r.backoff = t.backoffMin
	default:
		r.backoff = min(2*r.backoff, t.backoffMax)
	}
	r.at = time.Now().Add(r.backoff)
	r.reason = reason
}

// due reports, once, that the scheduled retry's time has come.
func (r *retryTimer) due(now time.Time) (reason string, ok bool) {
	if r.at.IsZero() || now.Before(r.at) {
		return "", false
	}
	r.at = time.Time{}
	return r.reason, true
}

func (r *retryTimer) pending() bool { return !r.at.IsZero() }

func (r *retryTimer) cancel() { r.at = time.Time{} }
