package registration

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sirupsen/logrus"
)

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

// asStandby is "Superseded": a newer generation holds the lease. This
// process stops taking new work (E is no longer its own, so new connections
// reach the holder), finishes calls in flight, and takes over if the
// holder's g<G>.alive lock becomes free while it is not terminating.
func (m *Manager) asStandby(lease *Lease) {
	if m.currentRole() != roleStandby {
		m.log.WithFields(logrus.Fields{
			"generation": m.cur.g, "holder": lease.Generation, "holderPod": lease.Holder.Pod,
		}).Info("superseded by a newer generation; standing by")
		m.setRole(roleStandby)
		m.retryAt, m.confirmAt = time.Time{}, time.Time{}
	}
	for _, slot := range []**servedSocket{&m.e, &m.c} {
		if s := *slot; s != nil && !s.owned() {
			m.orphan(s)
			*slot = nil
		}
	}
	alive, err := isLocked(m.lay.alivePath(lease.Generation))
	if err != nil {
		m.logOnce(err, "cannot probe the holder's lock")
		return
	}
	m.updateReady(alive)
	if alive || m.terminating || lease.Phase == PhaseUninstalling || !m.retryAt.IsZero() {
		return
	}
	m.log.WithFields(logrus.Fields{"holder": lease.Generation, "holderPod": lease.Holder.Pod}).
		Warn("the holder's lock is free, so it died; taking over")
	m.tryAcquire(reasonTakeover)
}

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

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}

// uninstall is the holder's part of "Uninstall": unlink its registration
// socket so kubelet deregisters the driver and removes its CSINode entry,
// and stop re-registering.
func (m *Manager) uninstall() {
	m.retryAt, m.confirmAt = time.Time{}, time.Time{}
	if !m.cur.deregistered {
		m.deregister(m.cur, "the node is being uninstalled (ontap-csi deregister)")
	}
	m.setRole(roleUninstalling)
	m.updateReady(false)
}

// deregister unlinks gen's registration socket: I2's one exception, an
// explicit deregistration. Kubelet sees the Remove and deregisters the
// driver by name (K4), as after node-driver-registrar's SIGTERM.
func (m *Manager) deregister(gen *generation, why string) {
	gen.deregistered = true
	if gen.reg == nil || gen.retired || !gen.reg.sock.owned() {
		return
	}
	if err := os.Remove(gen.reg.sock.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		m.log.WithError(err).Error("cannot remove the registration socket to deregister")
		return
	}
	gen.retired = true
	m.log.WithFields(logrus.Fields{"generation": gen.g, "socket": gen.reg.hostPath, "why": why}).
		Warn("removed the registration socket: kubelet deregisters the driver")
}

// onNotify is steps 6 and 7.
func (m *Manager) onNotify(ev notifyEvent) {
	log := m.log.WithField("generation", ev.g)
	gen := m.cur
	if gen == nil || gen.g != ev.g {
		log.WithFields(logrus.Fields{"registered": ev.registered, "error": ev.msg}).
			Debug("registration status for an older generation; ignored")
		return
	}
	if gen.deregistered {
		return
	}
	if !ev.registered {
		m.registrationFailed(gen, ev.msg)
		return
	}
	// Step 6: record it, under the lock and only if the lease still names G.
	var holder bool
	err := m.lay.withHandoverLock(func() error {
		l, err := readLease(m.lay.leasePath())
		if err != nil || l == nil || l.Generation != gen.g || l.Phase == PhaseUninstalling {
			return err
		}
		holder = true
		if l.Phase == PhaseRegistered {
			return nil
		}
		l.Phase, l.UpdatedAt = PhaseRegistered, time.Now()
		return writeLease(m.lay.leasePath(), l)
	})
	if err != nil {
		log.WithError(err).Warn("cannot record the registration in the node lease")
	}
	if !holder {
		log.Info("kubelet registered a generation that was superseded meanwhile")
		return
	}
	if !gen.registered {
		log.WithField("version", versionOf(gen.g)).Info("registered with kubelet")
	}
	gen.registered = true
	m.backoff = 0
	m.setRole(roleRegistered)
	m.updateReady(true)
	m.sweepRegDir()
	m.collectGarbage()
}

// registrationFailed is step 7: kubelet rejected generation G. Either G was
// not high enough (validation), or NodeGetInfo or the CSINode update failed
// and kubelet has just dropped the driver (K5). Retire the socket (before
// v1.36 kubelet never retries that name, K5/K10) and register a new G after
// a backoff.
func (m *Manager) registrationFailed(gen *generation, msg string) {
	reason := reasonRegistrationFailed
	log := m.log.WithFields(logrus.Fields{"generation": gen.g, "error": msg})
	if strings.Contains(msg, "validation failed") {
		reason = reasonValidationFailed
		if v, ok := highestPatchVersion(msg); ok && v >= m.floor {
			m.floor = v + 1
		}
		if otherMinor.MatchString(msg) {
			log.Error("kubelet holds this driver with a version 1.M.N, M > 0, which 1.0.G can never outrank")
		}
	}
	reregistrationsTotal.WithLabelValues(reason).Inc()
	log.WithField("reason", reason).Warn("kubelet rejected the registration; registering a new generation after a backoff")
	m.retire(gen)
	m.scheduleRetry(reason)
}

var (
	patchVersion = regexp.MustCompile(`\b1\.0\.(\d+)\b`)
	otherMinor   = regexp.MustCompile(`\b1\.0*[1-9]\d*\.\d+\b`)
)

// highestPatchVersion returns the largest N of the versions 1.0.N named in
// a kubelet message such as "…already registered with a higher supported
// version: \"1.0.N\"".
func highestPatchVersion(msg string) (uint64, bool) {
	var max uint64
	var found bool
	for _, sm := range patchVersion.FindAllStringSubmatch(msg, -1) {
		if n, err := strconv.ParseUint(sm[1], 10, 64); err == nil && n >= max && n < ^uint64(0) {
			max, found = n, true
		}
	}
	return max, found
}

// retire retires gen's registration socket if it is still on disk as ours.
func (m *Manager) retire(gen *generation) {
	if gen.reg == nil || gen.retired || !gen.reg.sock.owned() {
		return
	}
	if _, err := m.retirer.retire(m.lay.regDir, gen.reg.name); err != nil {
		m.log.WithError(err).Warn("cannot retire registration socket")
		return
	}
	gen.retired = true
}

// sweepRegDir is the holder's retirement of every other registration socket
// of this driver once registered: older generations, dead or alive, and the
// legacy <driver>-reg.sock. Sockets of newer generations belong to a
// successor and are left alone.
func (m *Manager) sweepRegDir() {
	ents, err := os.ReadDir(m.lay.regDir)
	if err != nil {
		m.logOnce(err, "cannot list the registration dir")
		return
	}
	for _, e := range ents {
		name := e.Name()
		if strings.HasPrefix(name, ".") || e.Type()&fs.ModeSocket == 0 {
			continue
		}
		kind, g := m.lay.parseRegName(name)
		if kind == kindLegacy || (kind == kindGeneration && g < m.cur.g) {
			m.retireByName(name, g)
		}
	}
}

func (m *Manager) retireByName(name string, g uint64) {
	if _, err := m.retirer.retire(m.lay.regDir, name); err != nil {
		m.log.WithError(err).WithField("socket", name).Warn("cannot retire registration socket")
		return
	}
	for _, gen := range m.gens {
		if gen.g == g && gen.reg != nil && gen.reg.name == name {
			gen.retired = true
		}
	}
}

func (m *Manager) collectGarbage() {
	m.lastGC = time.Now()
	err := m.lay.withHandoverLock(func() error {
		m.lay.collectGarbage(m.cur.g, m.log)
		return nil
	})
	if err != nil {
		m.log.WithError(err).Warn("garbage collection skipped")
	}
}

// onFileEvent reacts to inotify events; the periodic checks cover any that
// are lost.
func (m *Manager) onFileEvent(ev fsnotify.Event) {
	dir, name := filepath.Dir(ev.Name), filepath.Base(ev.Name)
	switch {
	case dir == m.lay.regDir:
		m.onRegDirEvent(name, ev.Op)
	case dir == m.lay.pluginDir && name == LeaseName:
		m.reconcile(false)
	case ev.Name == m.lay.endpoint || ev.Name == m.lay.csiEndpoint:
		m.reconcile(true)
	}
}

// onRegDirEvent is the holder's watchdog on REG_DIR events.
func (m *Manager) onRegDirEvent(name string, op fsnotify.Op) {
	if !op.Has(fsnotify.Create) && !op.Has(fsnotify.Remove) {
		return // K1: kubelet ignores everything else, and so do we
	}
	if !m.lay.mayCarryDriver(name) || m.cur == nil || m.cur.deregistered {
		return
	}
	lease, err := readLease(m.lay.leasePath())
	if err != nil || lease == nil || lease.Generation != m.cur.g || lease.Phase == PhaseUninstalling {
		return // not the holder: the holder's watchdog acts
	}
	cur := m.cur
	own := cur.reg != nil && name == cur.reg.name
	kind, g := m.lay.parseRegName(name)
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
		if op.Has(fsnotify.Create) && kind == kindLegacy && !m.terminating && isSocket(filepath.Join(m.lay.regDir, name)) {
			m.retireByName(name, g)
		}
		// A pre-existing legacy socket is left alone: it may be the only
		// registration kubelet has. But a Create on a path kubelet still
		// holds (a retired legacy socket stays in kubelet's state) makes
		// kubelet unregister that path, by name, in its next reconcile
		// (docs/design/registration.md §7.5d); so register once more after that reconcile.
		if kind != kindGeneration && m.confirmAt.IsZero() {
			m.confirmAt = time.Now().Add(m.t.confirmAfter)
		}
	default:
		// Registered: retire it at once, so that its owner's unlink (a
		// legacy registrar's on SIGTERM) hits ENOENT and cannot deregister
		// the driver. Our generation outranks it anyway (I4).
		if kind != kindForeign && isSocket(filepath.Join(m.lay.regDir, name)) {
			m.retireByName(name, g)
		}
		if kind != kindGeneration {
			m.reregisterAfterFileEvent(reasonOtherCreated)
		}
	}
}

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

// reapGenerations stops registration servers that are done: not the
// holder's, socket no longer on disk as ours (retired), and past their
// linger (I5).
func (m *Manager) reapGenerations(lease *Lease, now time.Time) {
	var holderG uint64
	if lease != nil {
		holderG = lease.Generation
	}
	for _, gen := range m.gens {
		r := gen.reg
		if r == nil || r.stopped {
			continue
		}
		active := gen.g == holderG && !gen.deregistered
		if !active && !r.sock.owned() && !now.Before(r.lingerUntil(m.t.linger)) {
			r.stop()
		}
	}
	m.gens = slices.DeleteFunc(m.gens, func(gen *generation) bool {
		return gen != m.cur && (gen.reg == nil || gen.reg.stopped)
	})
}
