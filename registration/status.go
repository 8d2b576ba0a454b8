package registration

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/ontap-csi/ontap-csi/internal/filelock"
)

// NodeStatus is the node's registration state as found on disk, for
// `ontap-csi status`.
type NodeStatus struct {
	PluginDir       string `json:"pluginDir"`
	RegistrationDir string `json:"registrationDir"`
	// RegistrationError says why the registration dir could not be read;
	// the rest is reported all the same.
	RegistrationError string `json:"registrationError,omitempty"`
	// Lease is nil when lease.json is missing or unreadable (LeaseError).
	Lease      *Lease `json:"lease,omitempty"`
	LeaseError string `json:"leaseError,omitempty"`
	// HolderAlive reports whether the lease's generation still holds its lock.
	HolderAlive bool               `json:"holderAlive"`
	Generations []GenerationStatus `json:"generations"`
	Sockets     []SocketStatus     `json:"sockets"`
}

// GenerationStatus is one generation found on disk.
type GenerationStatus struct {
	Generation uint64 `json:"generation"`
	// Alive: a live process holds g<G>.alive.
	Alive bool `json:"alive"`
	// Holder: the lease names this generation.
	Holder bool `json:"holder"`
	// RegistrationSocket is its registration socket in REG_DIR, if still there.
	RegistrationSocket string `json:"registrationSocket,omitempty"`
}

// Socket roles reported by Status.
const (
	SocketEndpoint       = "endpoint"            // E, the endpoint kubelet is told about
	SocketCSIEndpoint    = "csi-endpoint"        // csi.sock (--csi_endpoint)
	SocketRegistration   = "registration"        // <driver>-g<G>-reg.sock
	SocketLegacy         = "legacy-registration" // node-driver-registrar's <driver>-reg.sock
	SocketStaging        = "staging"             // a registration socket before its rename (Acquire step 5)
	SocketRetired        = "retired"             // renamed away, unlinked shortly
	SocketTemporary      = "temporary"           // bound, about to be renamed onto E or csi.sock
	SocketForeign        = "other"               // carries the driver name, not ours
	defaultCSISocketName = "csi.sock"
)

// SocketStatus is one socket file on disk.
type SocketStatus struct {
	Path       string `json:"path"`
	Role       string `json:"role"`
	Generation uint64 `json:"generation,omitempty"`
	// Listening: something accepts connections on it.
	Listening bool `json:"listening"`
}

// Status reads the lease, the generations and the sockets of driver in
// pluginDir and regDir. It changes nothing; liveness is checked with a
// momentary shared lock and a connect, neither of which kubelet notices.
func Status(pluginDir, regDir, driver string) (*NodeStatus, error) {
	lay := newLayout(driver, "/", pluginDir, regDir, "")
	if !isDir(pluginDir) {
		return nil, fmt.Errorf("plugin dir %s does not exist (is the driver installed on this node? see --plugin-dir, --host-root)", pluginDir)
	}
	st := &NodeStatus{PluginDir: lay.pluginDir, RegistrationDir: lay.regDir, Generations: []GenerationStatus{}, Sockets: []SocketStatus{}}
	lease, err := readLease(lay.leasePath())
	switch {
	case err != nil:
		st.LeaseError = err.Error()
	case lease == nil:
		st.LeaseError = "no lease: no node plugin has run here since the plugin dir was created"
	default:
		st.Lease = lease
	}

	gens := generationTable{}
	if lease != nil && lease.Generation != 0 {
		gens.of(lease.Generation).Holder = true
	}
	if err := st.scanPluginDir(lay, gens); err != nil {
		return nil, err
	}
	st.scanRegDir(lay, gens)
	if err := st.addGenerations(lay, gens); err != nil {
		return nil, err
	}
	return st, nil
}

// generationTable collects the generations found on disk.
type generationTable map[uint64]*GenerationStatus

func (t generationTable) of(g uint64) *GenerationStatus {
	if t[g] == nil {
		t[g] = &GenerationStatus{Generation: g}
	}
	return t[g]
}

// scanPluginDir reports the sockets in PLUGIN_DIR, and notes the
// generation of every g<G>.alive.
func (st *NodeStatus) scanPluginDir(lay layout, gens generationTable) error {
	ents, err := os.ReadDir(lay.pluginDir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		name, p := e.Name(), filepath.Join(lay.pluginDir, e.Name())
		if g, ok := parseAliveName(name); ok {
			gens.of(g)
			continue
		}
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		role := SocketForeign
		switch {
		case name == EndpointName:
			role = SocketEndpoint
		case name == defaultCSISocketName:
			role = SocketCSIEndpoint
		case isTempSocketName(name):
			role = SocketTemporary
		}
		st.Sockets = append(st.Sockets, SocketStatus{Path: p, Role: role, Listening: isListening(p)})
	}
	return nil
}

// scanRegDir reports this driver's sockets in REG_DIR, and notes each
// generation's registration socket. A REG_DIR that cannot be read is
// reported in RegistrationError.
func (st *NodeStatus) scanRegDir(lay layout, gens generationTable) {
	ents, err := os.ReadDir(lay.regDir)
	if err != nil {
		st.RegistrationError = fmt.Sprintf("%v (kubelet's plugins_registry: check --kubelet-dir against kubelet's --root-dir; inside a pod that mounts the host at /host, pass --host-root /host)", err)
	}
	for _, e := range ents {
		name, p := e.Name(), filepath.Join(lay.regDir, e.Name())
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		s := SocketStatus{Path: p}
		s.Role, s.Generation = lay.regSocketRole(name)
		if s.Role == "" {
			continue // another driver's
		}
		if s.Role == SocketRegistration {
			gens.of(s.Generation).RegistrationSocket = p
		}
		s.Listening = isListening(p)
		st.Sockets = append(st.Sockets, s)
	}
}

// regSocketRole classifies a socket in REG_DIR; the role is "" for another
// driver's.
func (l layout) regSocketRole(name string) (string, uint64) {
	switch rest, retired := strings.CutPrefix(name, retiredPrefix); {
	case retired:
		if k, g := l.parseRegName(rest); k != kindForeign {
			return SocketRetired, g
		}
	case strings.HasPrefix(name, "."):
		if g, ok := l.generationOfRegFile(name); ok {
			return SocketStaging, g
		}
	default:
		switch k, g := l.parseRegName(name); {
		case k == kindGeneration:
			return SocketRegistration, g
		case k == kindLegacy:
			return SocketLegacy, 0
		case strings.Contains(name, l.driver):
			return SocketForeign, 0
		}
	}
	return "", 0
}

// addGenerations reports every generation found, and whether its process
// is alive, in order.
func (st *NodeStatus) addGenerations(lay layout, gens generationTable) error {
	for g, gs := range gens {
		alive, err := filelock.Locked(lay.alivePath(g))
		if err != nil {
			return err
		}
		gs.Alive = alive
		if gs.Holder {
			st.HolderAlive = alive
		}
		st.Generations = append(st.Generations, *gs)
	}
	slices.SortFunc(st.Generations, func(a, b GenerationStatus) int { return compareUint(a.Generation, b.Generation) })
	return nil
}

func compareUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
