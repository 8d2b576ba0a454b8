package registration

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Phase is the lease's phase (docs/design/registration.md §4).
type Phase string

const (
	// PhaseStarting: the holder has taken E and is registering generation G.
	PhaseStarting Phase = "starting"
	// PhaseRegistered: kubelet accepted generation G (NotifyRegistrationStatus(true)).
	PhaseRegistered Phase = "registered"
	// PhaseUninstalling: `ontap-csi deregister` asked the holder to
	// deregister and stop re-registering. A process that starts later clears it.
	PhaseUninstalling Phase = "uninstalling"
)

// Lease is the node lease, PLUGIN_DIR/lease.json.
type Lease struct {
	Generation uint64 `json:"generation"`
	Holder     Holder `json:"holder"`
	// RegistrationSocket is generation G's registration socket as kubelet
	// sees it (a host path).
	RegistrationSocket string    `json:"registrationSocket"`
	NodeInfo           NodeInfo  `json:"nodeInfo"`
	Phase              Phase     `json:"phase"`
	UpdatedAt          time.Time `json:"updatedAt"`
}

// Holder identifies the process that allocated the lease's generation.
type Holder struct {
	Pod       string    `json:"pod,omitempty"`
	PodUID    string    `json:"podUID,omitempty"`
	PID       int       `json:"pid"`
	StartedAt time.Time `json:"startedAt"`
}

// NodeInfo is what the holder's NodeGetInfo answered. Kubelet writes it to
// CSINode on every registration, so a change between holders is worth a
// loud log line.
type NodeInfo struct {
	NodeID            string            `json:"nodeID"`
	Topology          map[string]string `json:"topology,omitempty"`
	MaxVolumesPerNode int64             `json:"maxVolumesPerNode,omitempty"`
}

func (n NodeInfo) equal(o NodeInfo) bool {
	return n.NodeID == o.NodeID && n.MaxVolumesPerNode == o.MaxVolumesPerNode && maps.Equal(n.Topology, o.Topology)
}

// errCorruptLease marks a lease.json that exists but cannot be used.
var errCorruptLease = errors.New("corrupt lease")

// errNotHolder: the lease no longer names the generation a change was meant
// to be made from.
var errNotHolder = errors.New("no longer the lease holder")

// parseLease decodes and checks a lease document. Unknown fields are
// allowed so that a newer writer does not break an older reader.
func parseLease(b []byte) (*Lease, error) {
	var l Lease
	dec := json.NewDecoder(bytes.NewReader(b))
	if err := dec.Decode(&l); err != nil {
		return nil, fmt.Errorf("%w: %v", errCorruptLease, err)
	}
	if dec.More() {
		return nil, fmt.Errorf("%w: trailing data after the JSON document", errCorruptLease)
	}
	switch l.Phase {
	case PhaseStarting, PhaseRegistered, PhaseUninstalling:
	default:
		return nil, fmt.Errorf("%w: unknown phase %q", errCorruptLease, l.Phase)
	}
	if l.Generation == 0 && l.Phase != PhaseUninstalling {
		return nil, fmt.Errorf("%w: generation 0", errCorruptLease)
	}
	return &l, nil
}

// readLease returns the lease, (nil, nil) if there is none, or an error
// wrapping errCorruptLease if the file cannot be used.
func readLease(path string) (*Lease, error) {
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	l, err := parseLease(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

// writeLease replaces the lease atomically: temp file, fsync, rename, fsync
// of the directory. Readers therefore see the old or the new lease, never a
// torn one, and the rename arrives at watchers as one Create.
func writeLease(path string, l *Lease) error {
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, leaseTempPrefix+"*.tmp")
	if err != nil {
		return fmt.Errorf("write lease: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp) // a no-op after the rename
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return fmt.Errorf("write lease: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("write lease: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write lease: %w", err)
	}
	if err := os.Chmod(tmp, 0o644); err != nil {
		return fmt.Errorf("write lease: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write lease: %w", err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// flock applies how to f, retrying on EINTR.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// lockFile opens (creating) path and takes an exclusive flock on it,
// waiting for it. The lock lives as long as the returned file is open.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return f, nil
}

// isLocked reports whether some process holds an exclusive flock on path,
// i.e. whether the generation that owns this g<G>.alive is alive. A missing
// file is not held. The probe takes a shared lock for an instant, which
// never disturbs the owner's exclusive one.
func isLocked(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = flock(f, unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("flock %s: %w", path, err)
	}
	return false, nil // closing f drops the probe's lock
}

// withHandoverLock runs fn while holding PLUGIN_DIR/handover.lock, which
// serializes every state transition of every process on the node. Critical
// sections are a few file operations long.
func (l layout) withHandoverLock(fn func() error) error {
	f, err := lockFile(l.handoverLockPath())
	if err != nil {
		return fmt.Errorf("handover lock: %w", err)
	}
	defer f.Close()
	return fn()
}

// maxGenerationOnDisk returns the highest generation named by any of our
// files in REG_DIR (live, dot-named and retired registration sockets) and
// PLUGIN_DIR (g<G>.alive).
func (l layout) maxGenerationOnDisk() (uint64, error) {
	var max uint64
	for _, dir := range []string{l.regDir, l.pluginDir} {
		ents, err := os.ReadDir(dir)
		if err != nil {
			return 0, err
		}
		for _, e := range ents {
			g, ok := l.generationOfRegFile(e.Name())
			if !ok {
				g, ok = parseAliveName(e.Name())
			}
			if ok && g > max {
				max = g
			}
		}
	}
	return max, nil
}

// liveGenerations returns, ascending, the generations whose g<G>.alive is
// locked by a live process.
func (l layout) liveGenerations() ([]uint64, error) {
	ents, err := os.ReadDir(l.pluginDir)
	if err != nil {
		return nil, err
	}
	var live []uint64
	for _, e := range ents {
		g, ok := parseAliveName(e.Name())
		if !ok {
			continue
		}
		held, err := isLocked(filepath.Join(l.pluginDir, e.Name()))
		if err != nil {
			return nil, err
		}
		if held {
			live = append(live, g)
		}
	}
	slices.Sort(live)
	return live, nil
}

// nextGeneration is step 2's rule:
//
//	G = max(1 + lease.generation, 1 + every generation named by files, now in ms)
//
// The clock term keeps G above anything kubelet may still hold even after
// the plugin dir was wiped; the other terms keep G monotonic if the clock
// steps back (I4). floor lets a caller jump above a version kubelet named.
func nextGeneration(prev *Lease, onDisk uint64, now time.Time, floor uint64) uint64 {
	g := uint64(now.UnixMilli())
	if prev != nil && prev.Generation+1 > g {
		g = prev.Generation + 1
	}
	if onDisk+1 > g {
		g = onDisk + 1
	}
	if floor > g {
		g = floor
	}
	return g
}

// allocation is the outcome of step 2.
type allocation struct {
	g     uint64
	alive *os.File // exclusive flock on g<G>.alive, held for the generation's life
	prev  *Lease   // the lease before this allocation (nil if none or corrupt)
	// prevErr is set when the previous lease.json was unreadable.
	prevErr error
	// prevAlive reports whether prev's generation was alive when replaced.
	prevAlive bool
}

// allocateGeneration is step 2 of acquire, called with handover.lock held:
// compute G, create and lock g<G>.alive, write the lease naming G.
// holding, when not 0, is the generation a holder re-registers from: the
// allocation is refused with errNotHolder unless the lease still names it.
func (l layout) allocateGeneration(newLease func(g uint64) *Lease, floor, holding uint64) (*allocation, error) {
	prev, prevErr := readLease(l.leasePath())
	if prevErr != nil && !errors.Is(prevErr, errCorruptLease) {
		return nil, prevErr
	}
	if holding != 0 && (prev == nil || prev.Generation != holding) {
		return nil, errNotHolder
	}
	onDisk, err := l.maxGenerationOnDisk()
	if err != nil {
		return nil, err
	}
	a := &allocation{prev: prev, prevErr: prevErr}
	a.g = nextGeneration(prev, onDisk, time.Now(), floor)
	if prev != nil {
		if a.prevAlive, err = isLocked(l.alivePath(prev.Generation)); err != nil {
			return nil, err
		}
	}
	// G is fresh, so nobody else locks this file; a momentary shared probe
	// by `ontap-csi status` only delays us.
	if a.alive, err = lockFile(l.alivePath(a.g)); err != nil {
		return nil, err
	}
	if err := writeLease(l.leasePath(), newLease(a.g)); err != nil {
		a.alive.Close()
		os.Remove(l.alivePath(a.g))
		return nil, err
	}
	return a, nil
}

func randomHex(n int) string {
	b := make([]byte, n/2)
	if _, err := rand.Read(b); err != nil {
		panic(err) // crypto/rand never fails on Linux
	}
	return hex.EncodeToString(b)
}
