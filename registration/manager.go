package registration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	"github.com/fsnotify/fsnotify"
	"github.com/sirupsen/logrus"
)

// DefaultHandoverGrace is the default of --handover-grace: how long a
// terminating process keeps serving E for a successor. It must stay below
// the pod's terminationGracePeriodSeconds (30 s by default).
const DefaultHandoverGrace = 20 * time.Second

// Config configures the node plugin's kubelet registration.
type Config struct {
	// DriverName is the CSI driver name, e.g. csi.trident.netapp.io.
	DriverName string
	// KubeletDir is kubelet's root directory on the host. E is told to
	// kubelet as <KubeletDir>/plugins/<DriverName>/csi-node.sock.
	KubeletDir string
	// PluginDir is <KubeletDir>/plugins/<DriverName> as this process sees
	// it. Empty means the directory of CSIEndpointPath.
	PluginDir string
	// CSIEndpointPath is the --csi_endpoint socket; it is swapped like E.
	// Empty means none.
	CSIEndpointPath string
	// RegistrationDir is kubelet's plugins_registry as this process sees it
	// (see ResolveRegistrationDir). Empty means <KubeletDir>/plugins_registry.
	RegistrationDir string
	// HandoverGrace bounds how long a process keeps serving E after SIGTERM
	// while waiting for a successor (DefaultHandoverGrace; zero: not at all).
	HandoverGrace time.Duration
	// DeregisterOnShutdown makes the holder unlink its registration socket on
	// SIGTERM, as node-driver-registrar does (--deregister-on-shutdown=always).
	DeregisterOnShutdown bool
	// PodName and PodUID identify the holder in the lease.
	PodName, PodUID string
	// NodeName is the Kubernetes node name, the name of the CSINode object.
	// Only used with Kube.
	NodeName string
	// Serve serves CSI Identity and Node on a listener until it is closed or
	// the server stops; grpc.Server.Serve fits. It is called for several
	// listeners over the process's life. Each listener has
	// SetUnlinkOnClose(false) (I7), so stopping the server never unlinks a path.
	Serve func(net.Listener) error
	// Kube is optional (NewKubeAPI). With it, registration waits for the API
	// server (step 4) and the holder checks CSINode for the driver.
	Kube *KubeAPI
}

// timings are the protocol's periods and delays. Tests shorten some.
type timings struct {
	tick         time.Duration // loop tick: standby probe of the holder's lock, timers
	watchdog     time.Duration // holder's periodic checks (design: 1 s)
	retireDelay  time.Duration // rename-to-dot → unlink (design: 2 s)
	linger       time.Duration // registration server stays up after its last GetInfo (I5: 10 s)
	confirmAfter time.Duration // second registration after kubelet's next reconcile (K2: 1 s period)
	drainDelay   time.Duration // before closing a listener whose path moved to a successor
	backoffMin   time.Duration // re-acquire backoff after Notify(false) or a failed acquire
	backoffMax   time.Duration
	apiWait      time.Duration // step 4 bound
	csinodeGrace time.Duration // CSINode may lack the driver this long while registered
	gcEvery      time.Duration
	nodeInfo     time.Duration // NodeGetInfo self-check timeout
}

var defaultTimings = timings{
	tick:         200 * time.Millisecond,
	watchdog:     time.Second,
	retireDelay:  2 * time.Second,
	linger:       10 * time.Second,
	confirmAfter: 1500 * time.Millisecond,
	drainDelay:   time.Second,
	backoffMin:   time.Second,
	backoffMax:   30 * time.Second,
	apiWait:      time.Minute,
	csinodeGrace: 3 * time.Second,
	gcEvery:      30 * time.Second,
	nodeInfo:     10 * time.Second,
}

// Manager runs the node's side of the registration protocol
// (docs/design/registration.md §5) for one node-plugin process.
type Manager struct {
	cfg     Config
	lay     layout
	t       timings
	log     *logrus.Entry
	started time.Time
	retirer *retirer

	events  chan any
	done    chan struct{}
	running atomic.Bool
	ready   atomic.Bool
	role    atomic.Value  // string, one of the role* constants
	gen     atomic.Uint64 // this process's newest generation

	// Everything below is owned by the Run loop.
	life        context.Context // ends when Run returns
	runCtx      context.Context // ends on SIGTERM
	cur         *generation     // newest generation this process allocated
	gens        []*generation   // generations whose registration server may still run
	e, c        *servedSocket   // E and csi.sock while this process bound them
	orphans     []orphan        // listeners whose path a successor took over
	floor       uint64          // lowest acceptable next generation (Notify(false) jumps)
	backoff     time.Duration
	retryAt     time.Time
	retryReason string
	confirmAt   time.Time
	terminating bool
	deadline    time.Time
	lastCheck   time.Time
	lastGC      time.Time
	csinode     *csinodeWatch
	lastErr     string
}

// generation is one generation this process allocated.
type generation struct {
	g            uint64
	info         NodeInfo
	alive        *os.File // flock on g<G>.alive; nil once released
	reg          *regServer
	registered   bool
	retired      bool // its socket was renamed away or unlinked by this process
	deregistered bool // unlinked on purpose (uninstall or shutdown)
}

type orphan struct {
	s       *servedSocket
	closeAt time.Time
}

type notifyEvent struct {
	g          uint64
	registered bool
	msg        string
}

// New validates cfg and computes every path; it fails if a socket path does
// not fit the unix socket limit even with the shortened registration name.
func New(cfg Config) (*Manager, error) {
	if cfg.DriverName == "" {
		return nil, errors.New("registration: driver name is empty")
	}
	if !filepath.IsAbs(cfg.KubeletDir) {
		return nil, fmt.Errorf("registration: kubelet dir %q is not absolute", cfg.KubeletDir)
	}
	if cfg.PluginDir == "" {
		if cfg.CSIEndpointPath == "" {
			return nil, errors.New("registration: neither plugin dir nor CSI endpoint given")
		}
		cfg.PluginDir = filepath.Dir(cfg.CSIEndpointPath)
	}
	if cfg.RegistrationDir == "" {
		cfg.RegistrationDir = filepath.Join(cfg.KubeletDir, "plugins_registry")
	}
	for _, d := range []string{cfg.PluginDir, cfg.RegistrationDir, cfg.CSIEndpointPath} {
		if d != "" && !filepath.IsAbs(d) {
			return nil, fmt.Errorf("registration: path %q is not absolute", d)
		}
	}
	if cfg.HandoverGrace < 0 {
		return nil, fmt.Errorf("registration: negative handover grace %s", cfg.HandoverGrace)
	}
	if cfg.Serve == nil {
		return nil, errors.New("registration: no Serve function")
	}
	lay := newLayout(cfg.DriverName, cfg.KubeletDir, cfg.PluginDir, cfg.RegistrationDir, cfg.CSIEndpointPath)
	if err := lay.validate(); err != nil {
		return nil, fmt.Errorf("registration: %w", err)
	}
	dirs := []string{lay.pluginDir, lay.regDir}
	if lay.csiEndpoint != "" {
		dirs = append(dirs, filepath.Dir(lay.csiEndpoint))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("registration: %w", err)
		}
	}
	log := logrus.WithFields(logrus.Fields{"component": "registration", "driver": cfg.DriverName})
	return &Manager{
		cfg:     cfg,
		lay:     lay,
		t:       defaultTimings,
		log:     log,
		started: time.Now(),
		retirer: &retirer{delay: defaultTimings.retireDelay, log: log},
		events:  make(chan any, 64),
		done:    make(chan struct{}),
	}, nil
}

// Ready reports whether this process is the registered holder, or a standby
// while a live holder exists (/readyz).
func (m *Manager) Ready() bool { return m.ready.Load() }

// post hands an event to the loop without ever blocking the caller: a
// NotifyRegistrationStatus handler must return at once (I5).
func (m *Manager) post(ev any) {
	select {
	case m.events <- ev:
	default:
		go func() {
			select {
			case m.events <- ev:
			case <-m.done:
			}
		}()
	}
}

// Run acquires the node lease and registers with kubelet, then keeps the
// registration healthy (watchdog) or stands by, until ctx ends (SIGTERM).
// It then keeps serving E until a successor takes E over or the handover
// grace expires, closes its listeners without unlinking anything (I7) and
// returns. The caller then drains the CSI server (GracefulStop).
func (m *Manager) Run(ctx context.Context) error {
	if !m.running.CompareAndSwap(false, true) {
		return errors.New("registration: Run called twice")
	}
	life, cancel := context.WithCancel(context.Background())
	defer cancel()
	m.life, m.runCtx = life, ctx
	defer close(m.done)

	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("registration: %w", err)
	}
	defer w.Close()
	watched := []string{m.lay.pluginDir, m.lay.regDir}
	if m.lay.csiEndpoint != "" && filepath.Dir(m.lay.csiEndpoint) != m.lay.pluginDir {
		watched = append(watched, filepath.Dir(m.lay.csiEndpoint))
	}
	for _, d := range watched {
		if err := w.Add(d); err != nil {
			return fmt.Errorf("registration: watch %s: %w", d, err)
		}
	}
	go m.forward(w)

	if m.cfg.Kube != nil && m.cfg.NodeName != "" {
		m.csinode = watchCSINode(life, m.cfg.Kube.Client, m.cfg.NodeName, m.cfg.DriverName, m.log)
	}

	m.log.WithFields(logrus.Fields{
		"pluginDir": m.lay.pluginDir, "registrationDir": m.lay.regDir, "endpoint": m.lay.hostEndpoint,
	}).Info("acquiring the node registration")
	m.setRole(roleAcquiring)
	m.tryAcquire(reasonStart)
	m.reconcile(true)

	tick := time.NewTicker(m.t.tick)
	defer tick.Stop()
	term := ctx.Done()
	for {
		select {
		case <-term:
			term = nil
			m.beginTermination()
		case ev := <-m.events:
			m.handle(ev)
		case <-tick.C:
			m.onTick()
		}
		if m.terminating && m.mayExit() {
			m.shutdown()
			return nil
		}
	}
}

func (m *Manager) forward(w *fsnotify.Watcher) {
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			m.post(ev)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events; the periodic checks still run.
			m.log.WithError(err).Warn("file watch error")
		}
	}
}

func (m *Manager) handle(ev any) {
	switch ev := ev.(type) {
	case notifyEvent:
		m.onNotify(ev)
	case fsnotify.Event:
		m.onFileEvent(ev)
	}
}

func (m *Manager) onTick() {
	now := time.Now()
	if !m.retryAt.IsZero() && !now.Before(m.retryAt) {
		m.retryAt = time.Time{}
		// A standby's retry is a takeover; reconcile below retries it only
		// if the holder is still dead.
		if m.currentRole() != roleStandby && (!m.terminating || m.isHolder()) {
			m.tryAcquire(m.retryReason)
		}
	}
	if !m.confirmAt.IsZero() && !now.Before(m.confirmAt) {
		m.confirmAt = time.Time{}
		if m.isHolder() && !m.cur.deregistered {
			m.reregister(reasonConfirm)
		}
	}
	m.reconcile(now.Sub(m.lastCheck) >= m.t.watchdog)
}

// isHolder reports whether the lease names this process's newest generation.
func (m *Manager) isHolder() bool {
	if m.cur == nil {
		return false
	}
	l, err := readLease(m.lay.leasePath())
	return err == nil && l != nil && l.Generation == m.cur.g
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

// reregisterAfterFileEvent is reregister for a REG_DIR event that makes
// kubelet deregister the driver in its next reconcile (K2, K4). There the
// deregistration and our new registration run concurrently, in either order
// (docs/design/registration.md §7.2), so register once more after that reconcile has passed.
func (m *Manager) reregisterAfterFileEvent(reason string) {
	m.reregister(reason)
	m.confirmAt = time.Now().Add(m.t.confirmAfter)
}

// acquire is docs/design/registration.md §5.1 "Acquire", steps 1–5. Steps 6 and 7 follow
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
	// A re-registration is the holder's alone (docs/design/registration.md §5.8 Watchdog), and a successor
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

func (m *Manager) ownsGeneration(g uint64) bool {
	return slices.ContainsFunc(m.gens, func(x *generation) bool { return x.g == g })
}

func (m *Manager) bindTemp(target string) (*servedSocket, error) {
	s, err := listenSocket(tempPathFor(target))
	if err != nil {
		return nil, fmt.Errorf("bind CSI socket next to %s: %w", target, err)
	}
	go func() {
		if err := m.cfg.Serve(s.lis); err != nil && !s.closed.Load() {
			m.log.WithError(err).WithField("socket", s.path).Warn("CSI server stopped serving a socket")
		}
	}()
	return s, nil
}

// orphan schedules closing a listener whose path a successor now owns. New
// connections can no longer reach it; the delay lets the server accept any
// connection kubelet made just before the rename. Calls in flight finish.
func (m *Manager) orphan(s *servedSocket) {
	m.orphans = append(m.orphans, orphan{s: s, closeAt: time.Now().Add(m.t.drainDelay)})
}

func (m *Manager) reapOrphans(now time.Time) {
	m.orphans = slices.DeleteFunc(m.orphans, func(o orphan) bool {
		if now.Before(o.closeAt) {
			return false
		}
		o.s.close()
		return true
	})
}

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

// logOnce logs err unless it is the same as the last one logged.
func (m *Manager) logOnce(err error, msg string) {
	if err == nil {
		m.lastErr = ""
		return
	}
	if s := err.Error(); s != m.lastErr {
		m.lastErr = s
		m.log.WithError(err).Warn(msg)
	}
}
