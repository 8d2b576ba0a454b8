package registration

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
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
// (registration.md §5) for one node-plugin process.
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
