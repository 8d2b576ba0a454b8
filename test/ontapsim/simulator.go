package ontapsim

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/internal/atomicfile"
)

// Simulator is one simulated ONTAP cluster with one data SVM. All state is
// behind mu; handlers run with it held and never sleep while holding it.
type Simulator struct {
	cfg Config

	mu   sync.Mutex
	m    *model
	jobs map[string]*job
	// creating reserves volume names whose create job is in flight, so
	// concurrent creates of one name have exactly one winner.
	creating map[string]string // svm uuid + "/" + name -> job uuid

	kernel *kernelPlane // the kernel data plane, nil with the file one
	// cutOnUnmap and cuts: the file data plane's stand-in for a fence
	// (cut.go), under mu.
	cutOnUnmap bool
	cuts       []DataPlaneCut

	dataDir    string
	tempDir    bool
	persistent bool

	rngMu  sync.Mutex // guards rng and faults
	rng    *rand.Rand
	faults faultState

	// qtreeMounts are the qtree tmpfs mounts (qtreefs.go), dir -> size.
	qtreeMounts map[string]int64

	stats   statsCounter
	routes  []*route
	tls     *tlsMaterial
	closing chan struct{}
	jobWG   sync.WaitGroup

	srvMu     sync.Mutex
	srv       *http.Server
	ln        net.Listener // closed by Close too: Shutdown misses one Serve has not reached yet
	url       string
	closeOnce sync.Once
	closeErr  error
}

// New builds a simulator. With cfg.DataDir set and a state.json present,
// the saved cluster is loaded (its topology wins over cfg); otherwise a
// fresh cluster is created from cfg.
func New(cfg Config) (*Simulator, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	s := &Simulator{
		cfg:      cfg,
		jobs:     map[string]*job{},
		creating: map[string]string{},
		closing:  make(chan struct{}),
	}
	seed := cfg.Seed
	if seed == 0 {
		seed = rand.Uint64()
	}
	s.rng = rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	s.SetFaults(cfg.Faults)

	if cfg.DataDir == "" {
		dir, err := os.MkdirTemp("", "ontap-sim-")
		if err != nil {
			return nil, err
		}
		s.dataDir, s.tempDir = dir, true
	} else {
		abs, err := filepath.Abs(cfg.DataDir)
		if err != nil {
			return nil, err
		}
		s.dataDir, s.persistent = abs, true
	}
	for _, d := range []string{"volumes", "luns", "snapshots"} {
		if err := os.MkdirAll(filepath.Join(s.dataDir, d), 0o755); err != nil {
			return nil, err
		}
	}
	loaded, err := s.load()
	if err != nil {
		return nil, err
	}
	if !loaded {
		s.m = newTopology(&s.cfg)
		for _, v := range s.m.Volumes {
			if err := s.createVolumeDir(v); err != nil {
				return nil, err
			}
		}
		if err := s.saveLocked(); err != nil {
			return nil, err
		}
	}
	if s.tls, err = loadOrCreateCA(s.dataDir, s.persistent); err != nil {
		return nil, err
	}
	if err := s.mountQtreeFS(); err != nil {
		return nil, err
	}
	if cfg.DataPlane == DataPlaneKernel {
		if s.kernel, err = newKernelPlane(&s.cfg); err != nil {
			return nil, err
		}
		s.mu.Lock()
		s.syncKernelLocked()
		s.mu.Unlock()
	}
	s.routes = s.buildRoutes()
	return s, nil
}

// Handler serves /api/... (ONTAP REST) and /sim/... (data plane, stats).
func (s *Simulator) Handler() http.Handler { return http.HandlerFunc(s.serveHTTP) }

// DataDir is the directory holding the state and the backing files.
func (s *Simulator) DataDir() string { return s.dataDir }

// Start listens on addr ("127.0.0.1:0" picks a port) and serves HTTPS with
// a certificate from the simulator's CA, or plain HTTP when useTLS is false.
// It returns the base URL, e.g. "https://127.0.0.1:40123".
func (s *Simulator) Start(addr string, useTLS bool) (string, error) {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	if s.srv != nil {
		return "", errors.New("simulator already started")
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return "", err
	}
	host, port, _ := net.SplitHostPort(ln.Addr().String())
	if ip := net.ParseIP(host); ip != nil && ip.IsUnspecified() {
		host = "127.0.0.1"
	}
	scheme := "http"
	srv := &http.Server{
		Handler:           s.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       s.cfg.IdleTimeout,
		// Hijacking (connection-drop faults) needs HTTP/1.1.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		ErrorLog:     log.New(io.Discard, "", 0),
	}
	if useTLS {
		conf, err := s.serverTLSConfig(append([]string{host}, s.cfg.TLSHosts...))
		if err != nil {
			ln.Close()
			return "", err
		}
		ln = tls.NewListener(ln, conf)
		scheme = "https"
	}
	s.srv, s.ln = srv, ln
	s.url = scheme + "://" + net.JoinHostPort(host, port)
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logrus.WithError(err).Error("ONTAP simulator server stopped")
		}
	}()
	logrus.WithFields(logrus.Fields{"url": s.url, "svm": s.cfg.SVM, "dataDir": s.dataDir}).Info("ONTAP simulator listening")
	return s.url, nil
}

// URL is the base URL after Start ("" before).
func (s *Simulator) URL() string {
	s.srvMu.Lock()
	defer s.srvMu.Unlock()
	return s.url
}

// Close stops serving, completes in-flight jobs at once, saves the state
// (when persistent) and removes a temporary data directory. It is safe to
// call more than once.
func (s *Simulator) Close() error {
	s.closeOnce.Do(func() {
		close(s.closing) // jobs skip their remaining latency and commit
		s.srvMu.Lock()
		srv, ln := s.srv, s.ln
		s.srvMu.Unlock()
		if srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if err := srv.Shutdown(ctx); err != nil {
				srv.Close()
			}
			cancel()
			ln.Close()
		}
		s.jobWG.Wait()
		s.mu.Lock()
		// The kernel first: its binds of qtree directories would keep
		// closeQtreeFS from replacing them (EBUSY).
		s.closeErr = errors.Join(s.closeKernelLocked(), s.closeQtreeFS(), s.saveLocked())
		s.mu.Unlock()
		if s.tempDir {
			if err := os.RemoveAll(s.dataDir); err != nil && s.closeErr == nil {
				s.closeErr = err
			}
		}
	})
	return s.closeErr
}

// ---- persistence ----

const stateFile = "state.json"

// load reads <data-dir>/state.json if present.
func (s *Simulator) load() (bool, error) {
	if !s.persistent {
		return false, nil
	}
	data, err := os.ReadFile(filepath.Join(s.dataDir, stateFile))
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	m := &model{}
	if err := json.Unmarshal(data, m); err != nil {
		return false, fmt.Errorf("%s: %w", stateFile, err)
	}
	if m.Format != modelFormat {
		return false, fmt.Errorf("%s: format %d, want %d", stateFile, m.Format, modelFormat)
	}
	if m.Volumes == nil {
		m.Volumes = map[string]*volumeState{}
	}
	if m.ExportPolicies == nil {
		m.ExportPolicies = map[int64]*policyState{}
	}
	if m.LUNs == nil {
		m.LUNs = map[string]*lunState{}
	}
	if m.IGroups == nil {
		m.IGroups = map[string]*igroupState{}
	}
	m.initQuotaMaps()
	if svm := m.svmByName(s.cfg.SVM); svm == nil {
		logrus.WithFields(logrus.Fields{"configured": s.cfg.SVM, "file": stateFile}).Warn("configured SVM not in saved state; the saved topology is used")
	}
	s.m = m
	return true, nil
}

// saveLocked writes the model atomically (temp file, fsync, rename, fsync
// of the directory) so a crash leaves either the old or the new state.
//
// Every committed change passes here, so it is also where the kernel data
// plane catches up with the model.
func (s *Simulator) saveLocked() error {
	s.syncKernelLocked()
	if !s.persistent {
		return nil
	}
	s.m.Format = modelFormat
	data, err := json.MarshalIndent(s.m, "", " ")
	if err != nil {
		return err
	}
	err = writeFileAtomic(filepath.Join(s.dataDir, stateFile), data, 0o600)
	if err != nil {
		logrus.WithError(err).Error("ONTAP simulator: saving state failed")
	}
	return err
}

// writeFileAtomic replaces path durably: the simulator's state survives a
// crash of the simulator as ONTAP's would.
func writeFileAtomic(path string, data []byte, mode os.FileMode) error {
	return atomicfile.Write(path, "."+filepath.Base(path)+".tmp-*", data, mode, true)
}
