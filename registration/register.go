package registration

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// versionOf is the CSI version generation g advertises. Kubelet accepts a
// second registration of a driver only with a strictly higher version (K3);
// 1.0.N parses for any N (K8), and 1.0.G with G ≥ 1 outranks
// node-driver-registrar's 1.0.0 (I4).
func versionOf(g uint64) string { return "1.0." + strconv.FormatUint(g, 10) }

// regServer is one generation's registration server in REG_DIR.
type regServer struct {
	g        uint64
	name     string // socket name in REG_DIR
	hostPath string // as kubelet sees it
	sock     *servedSocket
	srv      *grpc.Server
	lastInfo atomic.Int64 // unix ns of the last successful GetInfo answer
	stopped  bool
}

// lingerUntil is the earliest time the server may stop (I5): kubelet calls
// NotifyRegistrationStatus on the connection of its GetInfo, within 5 s
// (K6), and from v1.36 a failed Notify deregisters the driver by name.
func (r *regServer) lingerUntil(linger time.Duration) time.Time {
	last := r.lastInfo.Load()
	if last == 0 {
		return time.Time{}
	}
	return time.Unix(0, last).Add(linger)
}

func (r *regServer) stop() {
	if r.stopped {
		return
	}
	r.stopped = true
	r.sock.closed.Store(true)
	r.srv.Stop() // closes the listener; SetUnlinkOnClose(false) keeps the file (I7)
}

// exposeRegistration is Acquire step 5, only while gen is still the
// holder's: a superseded generation's socket would only be refused (K7).
func (m *Manager) exposeRegistration(gen *generation) error {
	if !m.paths.leaseNames(gen.g) {
		m.log.WithField("generation", gen.g).Info("superseded before registering")
		return nil
	}
	rs, err := startRegServer(m.paths, gen.g, m.inbox, m.log)
	if err != nil {
		return err
	}
	gen.reg = rs
	m.log.WithFields(logrus.Fields{"generation": gen.g, "socket": rs.hostPath, "version": versionOf(gen.g)}).
		Info("registration socket exposed")
	return nil
}

// startRegServer serves generation g's registration on a dot-name that
// kubelet ignores (K1), then renames it to its real name, so kubelet only
// ever dials a socket that already listens. The rename arrives at kubelet as
// a Create. Kubelet's NotifyRegistrationStatus goes to the Run loop.
func startRegServer(paths layout, g uint64, notify inbox, log *logrus.Entry) (*regServer, error) {
	name, err := paths.regSocketName(g)
	if err != nil {
		return nil, err
	}
	staging := filepath.Join(paths.regDir, "."+name)
	final := filepath.Join(paths.regDir, name)
	sock, err := listenSocket(staging)
	if err != nil {
		return nil, fmt.Errorf("registration socket: %w", err)
	}
	rs := &regServer{
		g:        g,
		name:     name,
		hostPath: filepath.Join(paths.hostRegDir, name),
		sock:     sock,
		srv:      grpc.NewServer(),
	}
	registerapi.RegisterRegistrationServer(rs.srv, &registrationService{paths: paths, notify: notify, rs: rs})
	go func() {
		if err := rs.srv.Serve(sock.lis); err != nil && !sock.closed.Load() {
			log.WithError(err).WithField("generation", g).Error("registration server stopped")
		}
	}()
	if err := sock.moveTo(final); err != nil {
		rs.stop()
		os.Remove(staging) // a dot-name: kubelet never saw it
		return nil, fmt.Errorf("expose registration socket: %w", err)
	}
	return rs, nil
}

// registrationService answers kubelet's plugin watcher for one generation.
type registrationService struct {
	registerapi.UnimplementedRegistrationServer
	paths  layout
	notify inbox
	rs     *regServer
}

// GetInfo answers only while this generation holds the lease and the node
// is not being uninstalled. A refusal is safe: kubelet registers nothing and
// retries later (K7).
func (s *registrationService) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	lease, err := readLease(s.paths.leasePath())
	switch {
	case err != nil:
		return nil, status.Errorf(codes.Unavailable, "node lease unreadable: %v", err)
	case lease == nil || lease.Generation != s.rs.g:
		return nil, status.Errorf(codes.FailedPrecondition, "generation %d no longer holds the node lease", s.rs.g)
	case lease.Phase == PhaseUninstalling:
		return nil, status.Error(codes.FailedPrecondition, "driver is being uninstalled from this node")
	}
	s.rs.lastInfo.Store(time.Now().UnixNano())
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.paths.driver,
		Endpoint:          s.paths.hostEndpoint, // always E (I3)
		SupportedVersions: []string{versionOf(s.rs.g)},
	}, nil
}

// NotifyRegistrationStatus always returns OK at once (I5): from v1.36 a
// failed Notify makes kubelet deregister the driver by name (K6). The loop
// acts on the status.
func (s *registrationService) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	s.notify.post(notifyEvent{g: s.rs.g, registered: st.GetPluginRegistered(), msg: st.GetError()})
	return &registerapi.RegistrationStatusResponse{}, nil
}

// notifyEvent is kubelet's NotifyRegistrationStatus for generation g.
type notifyEvent struct {
	g          uint64
	registered bool
	msg        string
}

// onNotify is Acquire steps 6 and 7: kubelet's NotifyRegistrationStatus for
// the current generation.
func (m *Manager) onNotify(ev notifyEvent) {
	log := m.log.WithField("generation", ev.g)
	gen := m.generations.current
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
	err := m.paths.withHandoverLock(func() error {
		l, err := readLease(m.paths.leasePath())
		if err != nil || l == nil || l.Generation != gen.g || l.Phase == PhaseUninstalling {
			return err
		}
		holder = true
		if l.Phase == PhaseRegistered {
			return nil
		}
		l.Phase, l.UpdatedAt = PhaseRegistered, time.Now()
		return writeLease(m.paths.leasePath(), l)
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
	m.retry.backoff = 0
	m.setRole(roleRegistered)
	m.published.ready.Store(true)
	// Then retire every other registration socket of this driver.
	m.sweepRegDir()
	m.collectGarbage()
}

// registrationFailed is Acquire step 7: kubelet rejected generation G.
// Either G was not high enough (validation), or NodeGetInfo or the CSINode
// update failed and kubelet has just dropped the driver (K5). Retire the
// socket (before v1.36 kubelet never retries that name, K5/K10) and register
// a new G after a backoff.
func (m *Manager) registrationFailed(gen *generation, msg string) {
	reason := reasonRegistrationFailed
	log := m.log.WithFields(logrus.Fields{"generation": gen.g, "error": msg})
	if strings.Contains(msg, "validation failed") {
		reason = reasonValidationFailed
		if v, ok := highestPatchVersion(msg); ok && v >= m.generations.floor {
			m.generations.floor = v + 1
		}
		if otherMinor.MatchString(msg) {
			log.Error("kubelet holds this driver with a version 1.M.N, M > 0, which 1.0.G can never outrank")
		}
	}
	reregistrationsTotal.WithLabelValues(reason).Inc()
	log.WithField("reason", reason).Warn("kubelet rejected the registration; registering a new generation after a backoff")
	m.retire(gen)
	m.retry.schedule(reason, m.timings)
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
