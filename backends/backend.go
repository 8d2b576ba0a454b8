// Package backends is the seam between the CSI controller and a storage
// system. The controller speaks CSI and knows nothing of ONTAP; a Backend
// knows its storage system and nothing of CSI or gRPC.
//
// A Backend keeps no state that the storage system does not hold: two
// controller replicas, or one restarted, see exactly the same volumes.
package backends

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Protocol is how a volume reaches a node, with Trident's publish_context
// values ("protocol" key).
type Protocol string

const (
	ProtocolFile  Protocol = "file"  // NFS
	ProtocolBlock Protocol = "block" // iSCSI
)

// AccessType is how the workload consumes a volume.
type AccessType string

const (
	AccessMount AccessType = "mount" // a filesystem
	AccessBlock AccessType = "block" // a raw block device
)

// FSTypeRaw is the filesystem type Trident records for raw block volumes.
const FSTypeRaw = "raw"

// Backend is one configured storage backend (one Trident backend config).
// One that holds connections may implement io.Closer: whoever replaces or
// removes a Backend at run time calls Close, which must not disturb calls
// still in flight.
type Backend interface {
	// Name is the backend's unique name (Trident's backendName).
	Name() string
	// Driver is Trident's storage driver name, e.g. "ontap-nas".
	Driver() string
	// Protocol is what every volume of this backend speaks.
	Protocol() Protocol
	// Limits are the sizes the backend accepts.
	Limits() Limits
	// Pools lists where volumes can be placed.
	Pools(ctx context.Context) ([]Pool, error)
	// Capacity reports the space available for new volumes in pool, and
	// the largest one volume with opts (thin or thick, snapshot reserve)
	// can get there.
	Capacity(ctx context.Context, pool string, opts VolumeOptions) (*Capacity, error)

	// CreateVolume creates a volume, or completes one that an earlier
	// attempt with the same request left half-made. It fails with
	// ErrAlreadyExists if the name is taken by an incompatible volume.
	CreateVolume(ctx context.Context, req *CreateRequest) (*Volume, error)
	// Volume returns the volume with the given CSI volume ID, or ErrNotFound.
	Volume(ctx context.Context, id string) (*Volume, error)
	// ListVolumes returns every volume this backend manages.
	ListVolumes(ctx context.Context) ([]*Volume, error)
	// DeleteVolume deletes a volume and everything the backend made for it.
	// A volume that others depend on fails with ErrInUse.
	DeleteVolume(ctx context.Context, vol *Volume) error
	// ExpandVolume grows a volume to at least size bytes (never shrinks it).
	ExpandVolume(ctx context.Context, vol *Volume, size int64) (*Volume, error)

	// Publish makes a volume reachable from a node and returns Trident's
	// publish_context. It repairs access that drifted on the storage system.
	Publish(ctx context.Context, vol *Volume, req *PublishRequest) (map[string]string, error)
	// Unpublish revokes a node's access. node is nil when the node is no
	// longer known; the backend then does what it can from the node's name.
	Unpublish(ctx context.Context, vol *Volume, nodeName string, node *Node) error

	// SnapshotName maps a CSI snapshot name to the backend's name for it
	// (Snapshot.Name).
	SnapshotName(csiName string) string
	// CreateSnapshot takes a snapshot of vol named after the CSI name.
	CreateSnapshot(ctx context.Context, vol *Volume, name string) (*Snapshot, error)
	// Snapshots lists snapshots matching f.
	Snapshots(ctx context.Context, f SnapshotFilter) ([]*Snapshot, error)
	// DeleteSnapshot deletes a snapshot. One that a clone depends on fails
	// with ErrInUse.
	DeleteSnapshot(ctx context.Context, snap *Snapshot) error
}

// FreshCreator is a Backend whose CreateVolume may honour
// CreateRequest.Fresh: it does when CreatesFresh is true.
type FreshCreator interface {
	CreatesFresh() bool
}

// VolumeLocator is a Backend that finds a volume under the name on the
// storage system that the volume's records give (its PersistentVolume's
// internalName, Trident's TridentVolume), for volumes its naming rule does
// not name: a nameTemplate's, an import kept under its own name, one made
// under another storagePrefix.
type VolumeLocator interface {
	// VolumeAt returns volume id at internalName, or ErrNotFound (also
	// for a name this backend could not have: it is not this backend's).
	VolumeAt(ctx context.Context, id, internalName string) (*Volume, error)
}

// IdentityCache is a Backend that remembers where its volumes are on the
// storage system, so that the calls that come soon after a lookup (publish,
// unpublish, delete) need not look the volume up again. A call on a
// remembered volume that finds it gone or moved looks it up afresh and
// retries once; one that fails otherwise makes the backend forget it.
type IdentityCache interface {
	// KnownVolume returns volume id, at internalName ("" : the naming
	// rule's name), as remembered, without asking the storage system; false
	// when it is not remembered (or no longer: entries expire).
	KnownVolume(id, internalName string) (*Volume, bool)
	// Remember keeps vol, which a lookup of this backend just returned.
	Remember(vol *Volume)
}

// Description is what a backend tells about itself for status and
// metrics, once it has reached its storage system; fields it does not know
// yet are empty.
type Description struct {
	// UUID is Trident's backendUUID as the backend reports it in volume
	// contexts.
	UUID          string
	SVM           string
	ManagementLIF string
}

// Describer is a Backend that describes itself.
type Describer interface {
	Describe() Description
}

// Limits are a backend's volume size bounds in bytes; 0 means no bound.
type Limits struct {
	MinVolumeSize int64
	MaxVolumeSize int64
	// DefaultVolumeSize is used when the request gives no capacity.
	DefaultVolumeSize int64
}

// Pool is a place for volumes: a Trident virtual pool, or an aggregate of a
// backend without virtual pools.
type Pool struct {
	Name string
	// Labels are matched by a StorageClass selector.
	Labels map[string]string
	// Topologies are the segments volumes of this pool are reachable from;
	// nil means everywhere.
	Topologies []map[string]string
	// Media is hdd, ssd or hybrid; "" when unknown.
	Media string
	// Region and Zone are Trident's pool attributes of the same names,
	// which a StorageClass may request; "" offers none.
	Region, Zone string
	// ProvisioningTypes lists what the pool offers: "thin", "thick".
	ProvisioningTypes []string
	// NoSnapshots and NoClones: the pool does not offer them, so a
	// StorageClass asking for snapshots or clones "true" skips it, as
	// Trident's bool offers match (ontap-nas-economy offers neither).
	NoSnapshots, NoClones bool
}

// Capacity is the space of a pool in bytes.
type Capacity struct {
	Available int64
	// MaxVolumeSize is the largest size one CreateVolume with the same
	// options can ask for, when Bounded: it may be below Available (a
	// thick volume's snapshot reserve and headroom come out of it) or
	// above (a thin volume needs no free space). It may be 0: nothing
	// fits. Not Bounded: nothing bounds a volume but the free space.
	MaxVolumeSize int64
	Bounded       bool
}

// VolumeOptions are the per-volume settings a StorageClass may request.
// Empty values and nil pointers take the backend's defaults.
type VolumeOptions struct {
	SpaceReserve    string // "none" (thin) or "volume" (thick)
	SnapshotPolicy  string
	SnapshotReserve *int // percent
	SnapshotDir     *bool
	UnixPermissions string
	ExportPolicy    string
	SecurityStyle   string
	Encryption      *bool
	SplitOnClone    *bool
	TieringPolicy   string
	QoSPolicy       string
	// SkipRecoveryQueue: delete the volume without ONTAP's recovery queue
	// (Trident's per-claim annotation); nil takes the pool's default.
	SkipRecoveryQueue *bool
}

// CreateRequest asks for a new volume.
type CreateRequest struct {
	// Name is the CSI name; it becomes the volume ID.
	Name       string
	Pool       string
	SizeBytes  int64
	AccessType AccessType
	// FSType is the filesystem of a block-protocol volume ("raw" for raw
	// block); file-protocol volumes ignore it.
	FSType  string
	Options VolumeOptions
	// Source is set for clones.
	Source *Source
	// Topologies are the requisite topologies the volume must be
	// reachable from; nil means no constraint.
	Topologies []map[string]string
	// Claim is what the CO told of the claim the volume is for; backends
	// that name volumes after it (Trident's nameTemplate) read it.
	Claim Claim
	// Fresh says that the controller did not look for what an earlier
	// attempt of this request made. A FreshCreator that finds the name
	// taken then fails with ErrNameTaken, changing nothing, and the
	// controller looks the volume up and asks again without Fresh.
	Fresh bool
}

// Claim is the Kubernetes PersistentVolumeClaim a volume is created for,
// as csi-provisioner's --extra-create-metadata or the claim itself tells;
// "" where unknown.
type Claim struct {
	Name, Namespace, StorageClass string
}

// Source is where a clone comes from: exactly one field is set.
type Source struct {
	Snapshot *Snapshot
	Volume   *Volume
}

// Volume is a volume as the controller sees it.
type Volume struct {
	// ID is the CSI volume ID, the CSI name it was created with (Trident:
	// the PV name).
	ID      string
	Backend string
	// Owner is the backend name recorded at creation, "" when unknown.
	// When several backends see the same volume, the owner serves it.
	Owner string
	Pool  string
	// SizeBytes is the usable size the CO asked for.
	SizeBytes  int64
	AccessType AccessType // "" when unknown (volumes made by others)
	FSType     string
	// SourceSnapshotID or SourceVolumeID is set for clones.
	SourceSnapshotID string
	SourceVolumeID   string
	Topologies       []map[string]string
	// Context is the CSI volume_context.
	Context map[string]string
	// Incomplete marks a volume that an interrupted create left half-made;
	// CreateVolume with the same request completes it.
	Incomplete bool
	// Handle is the backend's own reference; the controller never reads it.
	Handle any
}

// Snapshot is a snapshot of a volume.
type Snapshot struct {
	// Name is the backend's snapshot name; the CSI snapshot ID is
	// "<VolumeID>/<Name>".
	Name      string
	VolumeID  string
	CreatedAt time.Time
	// SizeBytes is the size a volume restored from it has.
	SizeBytes int64
	Ready     bool
	Handle    any
}

// SnapshotFilter selects snapshots. Zero fields match anything.
type SnapshotFilter struct {
	Volume *Volume
	Name   string
}

// Node is what a backend needs to know of a node to grant it access. It is
// the one type for that fact: the node plugin discovers and reports it
// (package nodeinfo carries it), the controller's node registries return
// it.
type Node struct {
	// Name is the node ID: the Kubernetes node name (--csi_node_name).
	Name string
	// IQN is the node's iSCSI initiator name, "" if it has none.
	IQN string
	// IPs are the node's addresses, for NFS export rules.
	IPs []string
}

// PublishRequest asks for a node's access to a volume.
type PublishRequest struct {
	Node       Node
	AccessType AccessType
	ReadOnly   bool
	// MountOptions come from the volume capability; they replace the
	// backend's configured mount options when set (as in Trident).
	MountOptions []string
	// FSType is the capability's fs_type, "" if not given.
	FSType string
}

// Error kinds. Backends wrap their failures so that errors.Is(err, kind)
// holds; the controller maps kinds to gRPC codes in one place.
var (
	ErrNotFound      = errors.New("not found")
	ErrAlreadyExists = errors.New("already exists")
	// ErrInUse: another object depends on it (clones of a volume or
	// snapshot); the operation may succeed later.
	ErrInUse = errors.New("in use")
	// ErrInvalid: the request asks for something the backend refuses.
	ErrInvalid = errors.New("invalid request")
	// ErrOutOfRange: a size outside the backend's limits.
	ErrOutOfRange = errors.New("size out of range")
	// ErrExhausted: not enough space.
	ErrExhausted = errors.New("not enough space")
	// ErrUnavailable: the storage system is unreachable, busy or rejects
	// our credentials; retrying later may succeed.
	ErrUnavailable = errors.New("storage system unavailable")
	// ErrPending: an earlier operation on the object (e.g. a create whose
	// caller gave up) is still running on the storage system.
	ErrPending = errors.New("operation pending")
	// ErrNameTaken: a Fresh create found its name taken (see
	// CreateRequest.Fresh). It never reaches a CO.
	ErrNameTaken = errors.New("name taken")
)

// kindError carries a kind next to the error it classifies.
type kindError struct {
	kind error
	err  error
}

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// Errorf formats an error of the given kind. A %w verb in format keeps the
// wrapped error reachable with errors.Is and errors.As.
func Errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, err: fmt.Errorf(format, args...)}
}

// Kind returns the kind of err (one of the Err* values), or nil. When kinds
// are nested the outermost wins: it was decided with the most context.
func Kind(err error) error {
	var ke *kindError
	if errors.As(err, &ke) {
		return ke.kind
	}
	return nil
}

// namedError says which backend an error is about.
type namedError struct {
	backend string
	err     error
}

func (e *namedError) Error() string { return "backend " + e.backend + ": " + e.err.Error() }
func (e *namedError) Unwrap() error { return e.err }

// Named prefixes err with its backend's name, unless it already names that
// backend: a backend names itself in the failures every call can meet
// (cannot reach its storage), and callers name the backend of whatever a
// call returned, so the name shows once, not twice.
func Named(backend string, err error) error {
	if err == nil {
		return nil
	}
	var ne *namedError
	if errors.As(err, &ne) && ne.backend == backend {
		return err
	}
	return &namedError{backend: backend, err: err}
}
