package shim

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"time"
)

// Environment variables the shim reads. The test harness (shimtest) sets
// them; see README.md.
const (
	EnvSimURL        = "ONTAP_SIM_URL"            // simulator base URL (data plane /sim/iscsi/...)
	EnvSimCA         = "ONTAP_SIM_CA"             // PEM file trusted for an https simulator URL
	EnvState         = "ISCSI_SHIM_STATE"         // shim state dir: state.json, lock, node records, kernel.pid/log
	EnvSysRoot       = "ISCSI_SHIM_SYSROOT"       // the fake sysfs root
	EnvDevDir        = "ISCSI_SHIM_DEVDIR"        // the fake /dev (links to the real /dev/loopN)
	EnvInitiatorName = "ISCSI_SHIM_INITIATORNAME" // initiatorname.iscsi; default $ISCSI_SHIM_STATE/initiatorname.iscsi
	EnvMultipathd    = "ISCSI_SHIM_MULTIPATHD"    // "1": multipathd "runs" and builds maps
	EnvUdevDelay     = "ISCSI_SHIM_UDEV_DELAY"    // udev's links this long after a scan; default 50ms
	EnvMapDelay      = "ISCSI_SHIM_MAP_DELAY"     // a path joins its map this long after udev; default 200ms; "never"
)

const (
	defaultUdevDelay = 50 * time.Millisecond
	defaultMapDelay  = 200 * time.Millisecond
)

// Env is where one shim instance keeps everything.
type Env struct {
	SimURL        string
	SimCA         string
	State         string
	SysRoot       string
	DevDir        string
	InitiatorFile string
	Multipathd    bool
	UdevDelay     time.Duration
	MapDelay      time.Duration // < 0: multipathd builds no map

	simOnce   sync.Once
	simClient *simClient
	simErr    error
}

// LoadEnv reads the shim's environment. The roots must be set and must
// not be the host's: the shim never writes to the real /sys or /dev.
func LoadEnv() (*Env, error) {
	e := &Env{
		SimURL:        os.Getenv(EnvSimURL),
		SimCA:         os.Getenv(EnvSimCA),
		State:         os.Getenv(EnvState),
		SysRoot:       os.Getenv(EnvSysRoot),
		DevDir:        os.Getenv(EnvDevDir),
		InitiatorFile: os.Getenv(EnvInitiatorName),
		Multipathd:    os.Getenv(EnvMultipathd) == "1",
	}
	for name, p := range map[string]*string{EnvState: &e.State, EnvSysRoot: &e.SysRoot, EnvDevDir: &e.DevDir} {
		if *p == "" {
			return nil, fmt.Errorf("%s is not set", name)
		}
		abs, err := filepath.Abs(*p)
		if err != nil {
			return nil, err
		}
		switch abs {
		case "/", "/sys", "/dev", "/etc", "/etc/iscsi", "/dev/disk":
			return nil, fmt.Errorf("%s=%s: refusing a host directory", name, abs)
		}
		*p = abs
	}
	if e.InitiatorFile == "" {
		e.InitiatorFile = filepath.Join(e.State, "initiatorname.iscsi")
	}
	var err error
	if e.UdevDelay, err = delayFromEnv(EnvUdevDelay, defaultUdevDelay); err != nil {
		return nil, err
	}
	if e.MapDelay, err = delayFromEnv(EnvMapDelay, defaultMapDelay); err != nil {
		return nil, err
	}
	return e, nil
}

// delayFromEnv reads a duration variable; "never" is -1.
func delayFromEnv(name string, def time.Duration) (time.Duration, error) {
	switch v := os.Getenv(name); v {
	case "":
		return def, nil
	case "never":
		return -1, nil
	default:
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			return 0, fmt.Errorf("%s=%q: want a duration or never", name, v)
		}
		return d, nil
	}
}

// sim is the simulator's client, made once per process: the kernel
// daemon scans with it all the time, and a TLS handshake per scan cost
// more than the scan (issue 18). Its connections are kept alive, enough
// of them for the scans that run at once.
func (e *Env) sim() (*simClient, error) {
	e.simOnce.Do(func() { e.simClient, e.simErr = e.newSim() })
	return e.simClient, e.simErr
}

func (e *Env) newSim() (*simClient, error) {
	if e.SimURL == "" {
		return nil, errors.New(EnvSimURL + " is not set")
	}
	tr := http.DefaultTransport.(*http.Transport).Clone()
	tr.MaxIdleConnsPerHost = 64
	if e.SimCA != "" {
		pem, err := os.ReadFile(e.SimCA)
		if err != nil {
			return nil, err
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%s: no certificate", e.SimCA)
		}
		tr.TLSClientConfig = &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	}
	return &simClient{base: e.SimURL, hc: &http.Client{Transport: tr, Timeout: 30 * time.Second}}, nil
}
