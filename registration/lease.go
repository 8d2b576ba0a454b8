package registration

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"time"

	"github.com/ontap-csi/ontap-csi/internal/atomicfile"
	"github.com/ontap-csi/ontap-csi/internal/filelock"
)

// Phase is the lease's phase ("Files on the node": lease.json).
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
	if err := atomicfile.Write(path, leaseTempPrefix+"*.tmp", append(b, '\n'), 0o644, true); err != nil {
		return fmt.Errorf("write lease: %w", err)
	}
	return nil
}

// withHandoverLock runs fn while holding PLUGIN_DIR/handover.lock, which
// serializes every state transition of every process on the node. Critical
// sections are a few file operations long.
func (l layout) withHandoverLock(fn func() error) error {
	lock, err := filelock.Acquire(context.Background(), l.handoverLockPath(), filelock.Exclusive, 0o644)
	if err != nil {
		return fmt.Errorf("handover lock: %w", err)
	}
	defer lock.Release()
	return fn()
}

// newLease is the lease that holder writes for generation g.
func (l layout) newLease(holder Holder, g uint64, info NodeInfo, phase Phase) *Lease {
	lease := &Lease{
		Generation: g,
		Holder:     holder,
		NodeInfo:   info,
		Phase:      phase,
		UpdatedAt:  time.Now(),
	}
	if name, err := l.regSocketName(g); err == nil {
		lease.RegistrationSocket = filepath.Join(l.hostRegDir, name)
	}
	return lease
}

// leaseNames reports whether the lease can be read and names generation g.
func (l layout) leaseNames(g uint64) bool {
	lease, err := readLease(l.leasePath())
	return err == nil && lease != nil && lease.Generation == g
}
