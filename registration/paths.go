package registration

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// File names in PLUGIN_DIR and REG_DIR ("Files on the node").
const (
	// EndpointName is E, the one CSI endpoint kubelet is told about (I3). It is
	// deliberately not csi.sock: a legacy Trident container may unlink
	// csi.sock when it stops.
	EndpointName = "csi-node.sock"
	// LeaseName is the node lease.
	LeaseName = "lease.json"
	// HandoverLockName is flocked around every state transition.
	HandoverLockName = "handover.lock"

	aliveSuffix      = ".alive"
	regSuffix        = "-reg.sock"
	retiredPrefix    = ".retired-"
	tempSocketPrefix = ".tmp-"
	tempSocketSuffix = ".sock"
	leaseTempPrefix  = ".lease-"

	// maxSocketPath is the longest path that fits sockaddr_un.sun_path (108
	// bytes including the terminating NUL). It applies to every path we bind
	// and to every path kubelet dials.
	maxSocketPath = 107

	// hashPrefixLen is the length of the hashed stand-in for the driver name
	// in registration socket names that would otherwise be too long.
	hashPrefixLen = 12
)

// layout holds every path the registration protocol uses, both as this
// process sees them and, where kubelet dials them, as kubelet sees them.
type layout struct {
	driver string

	pluginDir    string // PLUGIN_DIR in this process
	regDir       string // REG_DIR in this process
	hostRegDir   string // REG_DIR as kubelet sees it; kubelet dials sockets there
	endpoint     string // E in this process
	hostEndpoint string // E as told to kubelet in GetInfo
	csiEndpoint  string // --csi_endpoint, swapped like E; "" when it is E itself

	hashPrefix string // hashed driver name for shortened socket names
}

func newLayout(driver, kubeletDir, pluginDir, regDir, csiEndpoint string) layout {
	l := layout{
		driver:       driver,
		pluginDir:    filepath.Clean(pluginDir),
		regDir:       filepath.Clean(regDir),
		hostRegDir:   filepath.Join(kubeletDir, "plugins_registry"),
		endpoint:     filepath.Join(pluginDir, EndpointName),
		hostEndpoint: filepath.Join(kubeletDir, "plugins", driver, EndpointName),
		hashPrefix:   hashDriver(driver),
	}
	if csiEndpoint != "" && filepath.Clean(csiEndpoint) != l.endpoint {
		l.csiEndpoint = filepath.Clean(csiEndpoint)
	}
	return l
}

func hashDriver(driver string) string {
	sum := sha256.Sum256([]byte(driver))
	return "csi-" + hex.EncodeToString(sum[:])[:hashPrefixLen]
}

func (l layout) leasePath() string { return filepath.Join(l.pluginDir, LeaseName) }

func (l layout) handoverLockPath() string { return filepath.Join(l.pluginDir, HandoverLockName) }

func (l layout) alivePath(g uint64) string {
	return filepath.Join(l.pluginDir, aliveName(g))
}

// legacyRegName is node-driver-registrar's fixed socket name.
func (l layout) legacyRegName() string { return l.driver + regSuffix }

// regSocketName returns generation g's registration socket name:
// <driver>-g<G>-reg.sock, or, if that does not fit the socket path limit
// where we bind it (as a dot-name first) or where kubelet dials it,
// csi-<sha256(driver)[:12]>-g<G>-reg.sock. Both carry G, so a name is never
// reused (I4) and stays recognisable as ours.
func (l layout) regSocketName(g uint64) (string, error) {
	for _, name := range []string{
		l.driver + "-g" + strconv.FormatUint(g, 10) + regSuffix,
		l.hashPrefix + "-g" + strconv.FormatUint(g, 10) + regSuffix,
	} {
		if l.regNameFits(name) {
			return name, nil
		}
	}
	return "", fmt.Errorf("registration sockets do not fit the %d-byte unix socket path limit in %s (kubelet: %s); use a shorter --kubelet-dir or --registration-dir",
		maxSocketPath, l.regDir, l.hostRegDir)
}

func (l layout) regNameFits(name string) bool {
	// The socket is bound as "."+name (Acquire step 5) and dialed by kubelet as name.
	return len(filepath.Join(l.regDir, "."+name)) <= maxSocketPath &&
		len(filepath.Join(l.hostRegDir, name)) <= maxSocketPath
}

// validate checks the fixed paths against the socket path limit.
func (l layout) validate() error {
	for _, p := range []struct{ what, path string }{
		{"CSI endpoint (as kubelet sees it)", l.hostEndpoint},
		{"CSI endpoint", l.endpoint},
		{"CSI endpoint temporary socket", filepath.Join(l.pluginDir, tempSocketName())},
	} {
		if len(p.path) > maxSocketPath {
			return fmt.Errorf("%s %s is %d bytes, over the %d-byte unix socket path limit", p.what, p.path, len(p.path), maxSocketPath)
		}
	}
	if l.csiEndpoint != "" {
		if p := filepath.Join(filepath.Dir(l.csiEndpoint), tempSocketName()); len(p) > maxSocketPath {
			return fmt.Errorf("temporary socket %s next to --csi_endpoint is over the %d-byte unix socket path limit", p, maxSocketPath)
		}
	}
	// A generation is a Unix time in ms (13 digits until the year 2286);
	// check with a digit to spare so a valid configuration keeps working.
	_, err := l.regSocketName(99_999_999_999_999)
	return err
}

// socketKind classifies a name in REG_DIR.
type socketKind int

const (
	kindForeign    socketKind = iota // not recognisably ours
	kindGeneration                   // <driver>-g<G>-reg.sock or its hashed form
	kindLegacy                       // node-driver-registrar's <driver>-reg.sock
)

// parseRegName classifies a non-dot name in REG_DIR and returns its
// generation for kindGeneration.
func (l layout) parseRegName(name string) (socketKind, uint64) {
	if name == l.legacyRegName() {
		return kindLegacy, 0
	}
	for _, prefix := range []string{l.driver + "-g", l.hashPrefix + "-g"} {
		rest, ok := strings.CutPrefix(name, prefix)
		if !ok {
			continue
		}
		digits, ok := strings.CutSuffix(rest, regSuffix)
		if !ok {
			continue
		}
		if g, ok := parseGeneration(digits); ok {
			return kindGeneration, g
		}
	}
	return kindForeign, 0
}

// mayCarryDriver reports whether a non-dot name in REG_DIR may be a
// registration socket for our driver, ours or another registrar's. It is
// deliberately loose: it only decides whether a Remove may have made
// kubelet deregister the driver (K4).
func (l layout) mayCarryDriver(name string) bool {
	if strings.HasPrefix(name, ".") {
		return false
	}
	k, _ := l.parseRegName(name)
	return k != kindForeign || strings.Contains(name, l.driver)
}

// generationOfRegFile returns the generation named by any file in REG_DIR
// that belongs to us: live, dot-named or retired registration sockets.
func (l layout) generationOfRegFile(name string) (uint64, bool) {
	name = strings.TrimPrefix(name, retiredPrefix)
	name = strings.TrimPrefix(name, ".")
	if k, g := l.parseRegName(name); k == kindGeneration {
		return g, true
	}
	return 0, false
}

func aliveName(g uint64) string { return "g" + strconv.FormatUint(g, 10) + aliveSuffix }

func parseAliveName(name string) (uint64, bool) {
	rest, ok := strings.CutPrefix(name, "g")
	if !ok {
		return 0, false
	}
	digits, ok := strings.CutSuffix(rest, aliveSuffix)
	if !ok {
		return 0, false
	}
	return parseGeneration(digits)
}

// parseGeneration accepts only plain decimal digits without a leading zero,
// so that exactly one name maps to each generation.
func parseGeneration(s string) (uint64, bool) {
	if s == "" || s[0] == '0' || len(s) > 20 {
		return 0, false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return 0, false
		}
	}
	g, err := strconv.ParseUint(s, 10, 64)
	return g, err == nil
}

// tempSocketName returns a fresh name for a socket that is bound and then
// renamed onto E or csi.sock (Acquire step 3). It starts with "." so nothing reads
// it as an endpoint.
func tempSocketName() string {
	return tempSocketPrefix + randomHex(8) + tempSocketSuffix
}

func isTempSocketName(name string) bool {
	return strings.HasPrefix(name, tempSocketPrefix) && strings.HasSuffix(name, tempSocketSuffix)
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}

// ResolveRegistrationDir returns REG_DIR as this process sees it: override
// if set; else <kubeletDir>/plugins_registry if it exists in this mount
// namespace; else <hostRoot>/<kubeletDir>/plugins_registry if that exists,
// so a Trident DaemonSet that only mounts / at /host works; else the former.
func ResolveRegistrationDir(kubeletDir, hostRoot, override string) string {
	if override != "" {
		return filepath.Clean(override)
	}
	return resolveHostDir(filepath.Join(kubeletDir, "plugins_registry"), hostRoot)
}

// ResolvePluginDir returns PLUGIN_DIR (<kubeletDir>/plugins/<driver>) as
// this process sees it, by the same rule as ResolveRegistrationDir. The
// node role takes it from --csi_endpoint instead; the status and deregister
// subcommands use this.
func ResolvePluginDir(kubeletDir, driver, hostRoot, override string) string {
	if override != "" {
		return filepath.Clean(override)
	}
	return resolveHostDir(filepath.Join(kubeletDir, "plugins", driver), hostRoot)
}

func resolveHostDir(dir, hostRoot string) string {
	if isDir(dir) || hostRoot == "" {
		return dir
	}
	if viaRoot := filepath.Join(hostRoot, dir); isDir(viaRoot) {
		return viaRoot
	}
	return dir
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}
