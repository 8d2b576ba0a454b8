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
	// server (Acquire step 4) and the holder checks CSINode for the driver.
	Kube *KubeAPI
}

// timings are the protocol's periods and delays. Tests shorten some.
type timings struct {
	tick         time.Duration // loop tick: the standby's check of the holder's lock, timers
	watchdog     time.Duration // the holder's periodic checks ("Watchdog": 1 s)
	retireDelay  time.Duration // rename-to-dot → unlink ("Retire": 2 s)
	linger       time.Duration // registration server stays up after its last GetInfo (I5: 10 s)
	confirmAfter time.Duration // second registration after kubelet's next reconcile (K2: 1 s period)
	drainDelay   time.Duration // before closing a listener whose path moved to a successor
	backoffMin   time.Duration // re-acquire backoff after Notify(false) (Acquire step 7) or a failed acquire
	backoffMax   time.Duration
	apiWait      time.Duration // Acquire step 4's bound
	csinodeGrace time.Duration // CSINode may lack the driver this long while registered
	gcEvery      time.Duration
	nodeInfo     time.Duration // timeout of the endpoint check (NodeGetInfo, I6)
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

// Manager runs the node's side of the registration protocol for one
// node-plugin process. It is a state machine (state.go): Run's loop feeds it
// file events, kubelet's NotifyRegistrationStatus and a tick; reconcile
// reads the node lease and moves the process between its roles.
type Manager struct {
	cfg     Config
	paths   layout // every file of the protocol on this node ("Files on the node")
	self    Holder // this process, as the leases it writes name their holder
	timings timings
	log     *logrus.Entry

	// Shared with other goroutines.
	published published // role, readiness and generation, for /readyz and metrics
	inbox     inbox     // file events and kubelet's Notify, for the Run loop
	running   atomic.Bool

	// Everything below is owned by the Run loop.
	life          context.Context // ends when Run returns
	sigterm       termination     // "SIGTERM": the signal, and the handover grace
	generations   generations     // the generations this process allocated
	endpoints     endpoints       // this process's sockets on E and csi.sock
	retirer       *retirer        // "Retire"
	retry         retryTimer      // the next acquire after a failed one, with backoff
	watch         watchdogState   // what the holder's "Watchdog" saw and scheduled
	lastLoggedErr string          // logOnce's last message
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
	paths := newLayout(cfg.DriverName, cfg.KubeletDir, cfg.PluginDir, cfg.RegistrationDir, cfg.CSIEndpointPath)
	if err := paths.validate(); err != nil {
		return nil, fmt.Errorf("registration: %w", err)
	}
	dirs := []string{paths.pluginDir, paths.regDir}
	if paths.csiEndpoint != "" {
		dirs = append(dirs, filepath.Dir(paths.csiEndpoint))
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o750); err != nil {
			return nil, fmt.Errorf("registration: %w", err)
		}
	}
	log := logrus.WithFields(logrus.Fields{"component": "registration", "driver": cfg.DriverName})
	return &Manager{
		cfg:     cfg,
		paths:   paths,
		self:    Holder{Pod: cfg.PodName, PodUID: cfg.PodUID, PID: os.Getpid(), StartedAt: time.Now()},
		timings: defaultTimings,
		log:     log,
		inbox:   inbox{events: make(chan any, 64), done: make(chan struct{})},
		retirer: &retirer{delay: defaultTimings.retireDelay, log: log},
	}, nil
}

// Ready reports whether this process is the registered holder, or a standby
// while a live holder exists (/readyz).
func (m *Manager) Ready() bool { return m.published.ready.Load() }

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
	m.life, m.sigterm.signal = life, ctx
	defer close(m.inbox.done)

	w, err := fsnotify.NewWatcher()
	if err != nil {
		return fmt.Errorf("registration: %w", err)
	}
	defer w.Close()
	watched := []string{m.paths.pluginDir, m.paths.regDir}
	if m.paths.csiEndpoint != "" && filepath.Dir(m.paths.csiEndpoint) != m.paths.pluginDir {
		watched = append(watched, filepath.Dir(m.paths.csiEndpoint))
	}
	for _, d := range watched {
		if err := w.Add(d); err != nil {
			return fmt.Errorf("registration: watch %s: %w", d, err)
		}
	}
	go m.inbox.forward(w, m.log)

	if m.cfg.Kube != nil && m.cfg.NodeName != "" {
		m.watch.csinode = watchCSINode(life, m.cfg.Kube.Client, m.cfg.NodeName, m.cfg.DriverName, m.log)
	}

	m.log.WithFields(logrus.Fields{
		"pluginDir": m.paths.pluginDir, "registrationDir": m.paths.regDir, "endpoint": m.paths.hostEndpoint,
	}).Info("acquiring the node registration")
	m.setRole(roleAcquiring)
	m.tryAcquire(reasonStart)
	m.reconcile(true)

	tick := time.NewTicker(m.timings.tick)
	defer tick.Stop()
	term := ctx.Done()
	for {
		select {
		case <-term:
			term = nil
			m.beginTermination()
		case ev := <-m.inbox.events:
			m.handle(ev)
		case <-tick.C:
			m.onTick()
		}
		if m.sigterm.received && m.mayExit() {
			m.shutdown()
			return nil
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

// onTick runs the timers (a retry of a failed acquire, the watchdog's second
// registration) and reconciles, with the watchdog's full check once a period.
func (m *Manager) onTick() {
	now := time.Now()
	if reason, due := m.retry.due(now); due {
		// A standby's retry is a takeover; reconcile below retries it only
		// if the holder is still dead.
		if m.published.currentRole() != roleStandby && (!m.sigterm.received || m.isHolder()) {
			m.tryAcquire(reason)
		}
	}
	if m.watch.confirmDue(now) {
		if m.isHolder() && !m.generations.current.deregistered {
			m.reregister(reasonConfirm)
		}
	}
	m.reconcile(now.Sub(m.watch.lastCheck) >= m.timings.watchdog)
}

// onFileEvent reacts to inotify events; the periodic checks cover any that
// are lost.
func (m *Manager) onFileEvent(ev fsnotify.Event) {
	dir, name := filepath.Dir(ev.Name), filepath.Base(ev.Name)
	switch {
	case dir == m.paths.regDir:
		m.onRegDirEvent(name, ev.Op)
	case dir == m.paths.pluginDir && name == LeaseName:
		m.reconcile(false)
	case ev.Name == m.paths.endpoint || ev.Name == m.paths.csiEndpoint:
		m.reconcile(true)
	}
}

// logOnce logs err unless it is the same as the last one logged.
func (m *Manager) logOnce(err error, msg string) {
	if err == nil {
		m.lastLoggedErr = ""
		return
	}
	if s := err.Error(); s != m.lastLoggedErr {
		m.lastLoggedErr = s
		m.log.WithError(err).Warn(msg)
	}
}

// inbox carries events to the Run loop: file events, and kubelet's
// NotifyRegistrationStatus from the registration servers' goroutines.
type inbox struct {
	events chan any
	done   chan struct{} // closed when Run returns
}

// post hands an event to the loop without ever blocking the caller: a
// NotifyRegistrationStatus handler must return at once (I5).
func (in inbox) post(ev any) {
	select {
	case in.events <- ev:
	default:
		go func() {
			select {
			case in.events <- ev:
			case <-in.done:
			}
		}()
	}
}

func (in inbox) forward(w *fsnotify.Watcher, log *logrus.Entry) {
	for {
		select {
		case ev, ok := <-w.Events:
			if !ok {
				return
			}
			in.post(ev)
		case err, ok := <-w.Errors:
			if !ok {
				return
			}
			// An overflow loses events; the periodic checks still run.
			log.WithError(err).Warn("file watch error")
		}
	}
}
