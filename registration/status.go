package registration

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
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
	SocketStaging        = "staging"             // a registration socket before its rename (step 5)
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
// pluginDir and regDir. It changes nothing; liveness is probed with a
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

	gens := map[uint64]*GenerationStatus{}
	genOf := func(g uint64) *GenerationStatus {
		if gens[g] == nil {
			gens[g] = &GenerationStatus{Generation: g}
		}
		return gens[g]
	}
	if lease != nil && lease.Generation != 0 {
		genOf(lease.Generation).Holder = true
	}

	ents, err := os.ReadDir(lay.pluginDir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		name, p := e.Name(), filepath.Join(lay.pluginDir, e.Name())
		if g, ok := parseAliveName(name); ok {
			genOf(g)
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

	if ents, err = os.ReadDir(lay.regDir); err != nil {
		st.RegistrationError = fmt.Sprintf("%v (kubelet's plugins_registry: check --kubelet-dir against kubelet's --root-dir; inside a pod that mounts the host at /host, pass --host-root /host)", err)
	}
	for _, e := range ents {
		name, p := e.Name(), filepath.Join(lay.regDir, e.Name())
		if e.Type()&fs.ModeSocket == 0 {
			continue
		}
		s := SocketStatus{Path: p}
		switch rest, retired := strings.CutPrefix(name, retiredPrefix); {
		case retired:
			if k, g := lay.parseRegName(rest); k != kindForeign {
				s.Role, s.Generation = SocketRetired, g
			}
		case strings.HasPrefix(name, "."):
			if g, ok := lay.generationOfRegFile(name); ok {
				s.Role, s.Generation = SocketStaging, g
			}
		default:
			switch k, g := lay.parseRegName(name); {
			case k == kindGeneration:
				s.Role, s.Generation = SocketRegistration, g
				genOf(g).RegistrationSocket = p
			case k == kindLegacy:
				s.Role = SocketLegacy
			case strings.Contains(name, driver):
				s.Role = SocketForeign
			}
		}
		if s.Role == "" {
			continue // another driver's
		}
		s.Listening = isListening(p)
		st.Sockets = append(st.Sockets, s)
	}

	for g, gs := range gens {
		alive, err := isLocked(lay.alivePath(g))
		if err != nil {
			return nil, err
		}
		gs.Alive = alive
		if gs.Holder {
			st.HolderAlive = alive
		}
		st.Generations = append(st.Generations, *gs)
	}
	slices.SortFunc(st.Generations, func(a, b GenerationStatus) int { return compareUint(a.Generation, b.Generation) })
	return st, nil
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

// DeregisterResult reports what Deregister did.
type DeregisterResult struct {
	// Generation is the lease's generation when it was marked uninstalling.
	Generation  uint64 `json:"generation"`
	HolderPod   string `json:"holderPod,omitempty"`
	HolderAlive bool   `json:"holderAlive"`
	// ByHolder: the live holder removed its own registration socket.
	ByHolder bool `json:"deregisteredByHolder"`
	// Unlinked are the registration sockets Deregister removed itself
	// (no live holder did it); each removal makes kubelet deregister.
	Unlinked []string `json:"unlinked,omitempty"`
	// Retired are leftover sockets renamed away without a deregistration,
	// after the holder had deregistered.
	Retired []string `json:"retired,omitempty"`
}

// Deregister is the uninstall path (docs/design/registration.md §5.5 "Uninstall"): mark
// the lease uninstalling, so the holder removes its registration socket
// (kubelet then deregisters the driver and removes its CSINode entry) and
// nothing re-registers until a new process starts. If no live holder does
// so before ctx ends, Deregister removes the registration sockets itself.
func Deregister(ctx context.Context, pluginDir, regDir, driver string) (*DeregisterResult, error) {
	lay := newLayout(driver, "/", pluginDir, regDir, "")
	if !isDir(pluginDir) {
		return nil, fmt.Errorf("plugin dir %s does not exist (see --plugin-dir, --host-root)", pluginDir)
	}
	if !isDir(regDir) {
		return nil, fmt.Errorf("registration dir %s does not exist (see --registration-dir, --host-root)", regDir)
	}
	log := logrus.WithFields(logrus.Fields{"component": "registration", "driver": driver})

	var lease *Lease
	var own string // the holder's registration socket, if on disk before the mark
	err := lay.withHandoverLock(func() error {
		l, err := readLease(lay.leasePath())
		if err != nil && !errors.Is(err, errCorruptLease) {
			return err
		}
		if l == nil {
			// Name the newest generation on disk, so the holder, if any,
			// recognises the mark as meant for it.
			g, err := lay.maxGenerationOnDisk()
			if err != nil {
				return err
			}
			l = &Lease{Generation: g}
		}
		if l.RegistrationSocket != "" {
			if p := filepath.Join(lay.regDir, filepath.Base(l.RegistrationSocket)); isSocket(p) {
				own = p
			}
		}
		l.Phase, l.UpdatedAt = PhaseUninstalling, time.Now()
		lease = l
		return writeLease(lay.leasePath(), l)
	})
	if err != nil {
		return nil, err
	}
	res := &DeregisterResult{Generation: lease.Generation, HolderPod: lease.Holder.Pod}
	if res.HolderAlive, err = isLocked(lay.alivePath(lease.Generation)); err != nil {
		return nil, err
	}

	// Wait for the holder to remove its socket.
	if res.HolderAlive && own != "" {
		res.ByHolder = waitGone(ctx, own, lay.alivePath(lease.Generation))
	}

	rt := &retirer{delay: defaultTimings.retireDelay, log: log}
	ents, err := os.ReadDir(lay.regDir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		name, p := e.Name(), filepath.Join(lay.regDir, e.Name())
		if strings.HasPrefix(name, ".") || e.Type()&fs.ModeSocket == 0 {
			continue
		}
		if k, _ := lay.parseRegName(name); k == kindForeign {
			continue
		}
		if res.ByHolder {
			// Kubelet has already dropped the driver; a rename away makes
			// no second deregistration (K1).
			if ok, err := rt.retire(lay.regDir, name); err != nil {
				return nil, err
			} else if ok {
				res.Retired = append(res.Retired, p)
			}
			continue
		}
		// No live holder did it: this is the explicit deregistration, I2's
		// one exception. Kubelet deregisters for any of these it holds (K4).
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		log.WithField("socket", p).Info("removed registration socket")
		res.Unlinked = append(res.Unlinked, p)
	}
	rt.wait()
	return res, nil
}

// waitGone waits until path is gone (true), or its holder's lock at alive is
// free, or ctx ends (false).
func waitGone(ctx context.Context, path, alive string) bool {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if _, err := os.Lstat(path); errors.Is(err, os.ErrNotExist) {
			return true
		}
		if held, _ := isLocked(alive); !held {
			return false
		}
		select {
		case <-ctx.Done():
			return false
		case <-tick.C:
		}
	}
}
