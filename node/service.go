// Package node implements the CSI Node service for ONTAP NFS (publish
// context protocol "file") and iSCSI ("block") volumes, compatible with the
// state Trident leaves on nodes (docs/design/trident-compat.md §3).
//
// Stage and publish split:
//   - NFS: NodeStage only records the export (Trident does the same);
//     NodePublish mounts server:path on the target.
//   - iSCSI: NodeStage attaches the LUN, formats it if it is provably empty
//     and mounts it on the staging path; NodePublish bind-mounts the staging
//     path (or, for raw block, the device) on the target. Trident instead
//     mounted the device on every target, which cannot mix read-only and
//     read-write publishes of one file system (the kernel refuses a second
//     mount of a block device with a different read-only flag). A volume
//     staged by Trident has no staging mount; publish and expand add it on
//     first use ("adopt"), and unstage removes it.
//
// Every call that changes a volume holds its cross-process lock (I8): during
// a handover two plugin generations serve kubelet at once.
package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/internal/sharedread"
	"github.com/ontap-csi/ontap-csi/node/hostexec"
	"github.com/ontap-csi/ontap-csi/node/iscsi"
	"github.com/ontap-csi/ontap-csi/node/tracking"
	"github.com/ontap-csi/ontap-csi/node/volumelock"
)

// Config is what the node service needs to know of its node.
type Config struct {
	// NodeID is --csi_node_name, the Kubernetes node name, as in Trident.
	NodeID string
	// Topology is reported as the node's accessible topology.
	Topology map[string]string
	// MaxVolumesPerNode is reported in NodeGetInfo: kubelet's scheduler
	// places no more of this driver's volumes on the node (CSINode
	// allocatable). 0 means no limit.
	MaxVolumesPerNode int64

	// KubeletDir is --kubelet-dir. Staging and target paths of requests
	// must lie below it.
	KubeletDir string
	// TrackingDir holds the per-volume state files; Trident's is
	// /var/lib/trident/tracking (DefaultTrackingDir).
	TrackingDir string
	// LockDir holds the per-volume lock files. It must be shared by every
	// plugin generation on the node (the plugin dir on the host).
	LockDir string
	// HostRoot is --host-root: where the host's / is mounted in the
	// container ("" when running on the host). Host tools run chrooted into
	// it, and the initiator name is read below it.
	HostRoot string
	// DevDir and SysRoot are where /dev and /sys are (tests point them at
	// fakes); default /dev and /sys.
	DevDir  string
	SysRoot string

	// Exec runs host tools; nil means hostexec.Host chrooted into HostRoot.
	Exec hostexec.Executor
	// Reporter receives the node's IQN and IPs for the controller; nil
	// means nobody needs them.
	Reporter Reporter
	// InitiatorName, if set, is the IQN reported instead of the one in
	// <HostRoot>/etc/iscsi/initiatorname.iscsi (--iscsi-initiator-name).
	InitiatorName string
	// IPs, if set, are the addresses reported instead of those of the
	// default-route interfaces (--node-ips).
	IPs []string

	// ISCSIDeviceTimeout bounds each wait for the kernel in iSCSI attach,
	// detach and resize (a LUN's device, its multipath map, a new size).
	ISCSIDeviceTimeout time.Duration
	// ISCSIDeadPathGrace is how long an unstage lets a LUN's multipath map
	// with no usable path queue I/O before failing it
	// (iscsi.Config.DeadPathGrace).
	ISCSIDeadPathGrace time.Duration
	// MaxISCSIOperations caps concurrent iSCSI attach, detach and resize
	// (Trident: 5 concurrent iSCSI stages, 10 unstages). Excess callers
	// wait. Detaches share the cap: ten of them at once did not end a
	// pod's stop sooner where it was measured (docs/benchmarks.md, *iSCSI
	// detaches under a cap of their own*).
	MaxISCSIOperations int
	// MaxNFSMounts caps concurrent NFS mounts (Trident: 10).
	MaxNFSMounts int
	// MaxFormats caps concurrent mkfs runs, which are CPU and I/O heavy
	// (GCP PD serializes them).
	MaxFormats int
}

// Defaults, following Trident where it has one.
const (
	DefaultTrackingDir        = "/var/lib/trident/tracking"
	DefaultMaxISCSIOperations = 5
	DefaultMaxNFSMounts       = 10
	DefaultISCSIDeviceTimeout = 20 * time.Second
	DefaultISCSIDeadPathGrace = iscsi.DefaultDeadPathGrace
)

// DefaultMaxFormats is the mkfs cap: one per CPU, at least 2 (Trident's
// fixed 2). mkfs of a fresh LUN is mostly CPU (zeroing inode tables
// lazily, building bitmaps), so a fixed cap left large nodes idle while
// pods waited, and a higher one than the CPUs only makes them contend.
var DefaultMaxFormats = max(2, runtime.NumCPU())

func (c *Config) setDefaults() error {
	if c.TrackingDir == "" {
		c.TrackingDir = DefaultTrackingDir
	}
	if c.DevDir == "" {
		c.DevDir = "/dev"
	}
	if c.SysRoot == "" {
		c.SysRoot = "/sys"
	}
	if c.ISCSIDeviceTimeout <= 0 {
		c.ISCSIDeviceTimeout = DefaultISCSIDeviceTimeout
	}
	if c.MaxISCSIOperations <= 0 {
		c.MaxISCSIOperations = DefaultMaxISCSIOperations
	}
	if c.MaxNFSMounts <= 0 {
		c.MaxNFSMounts = DefaultMaxNFSMounts
	}
	if c.MaxFormats <= 0 {
		c.MaxFormats = DefaultMaxFormats
	}
	if c.Exec == nil {
		c.Exec = &hostexec.Host{Root: c.HostRoot}
	}
	for name, dir := range map[string]string{"kubelet dir": c.KubeletDir, "tracking dir": c.TrackingDir, "lock dir": c.LockDir} {
		if !filepath.IsAbs(dir) {
			return fmt.Errorf("node: %s %q must be an absolute path", name, dir)
		}
	}
	if c.InitiatorName != "" {
		// Vetted as if read from initiatorname.iscsi: it ends up in argv.
		if name, err := iscsi.ParseInitiatorName([]byte("InitiatorName=" + c.InitiatorName)); err != nil || name != c.InitiatorName {
			return fmt.Errorf("node: initiator name %q is not an iSCSI name", c.InitiatorName)
		}
	}
	return nil
}

// initiator is what the service needs of node/iscsi; tests fake it.
type initiator interface {
	Attach(ctx context.Context, t iscsi.Target) (*iscsi.Device, error)
	Detach(ctx context.Context, t iscsi.Target) error
	ReleaseDeadMapsDuring(ctx context.Context, t iscsi.Target, unmount func() error) error
	Find(ctx context.Context, t iscsi.Target) (*iscsi.Device, error)
	Resize(ctx context.Context, t iscsi.Target, minBytes int64) (int64, error)
}

// Service implements csi.NodeServer.
type Service struct {
	csi.UnimplementedNodeServer
	cfg     Config
	paths   paths
	state   *tracking.Store
	locks   *volumelock.Locker
	mounter *mounter
	exec    hostexec.Executor
	iscsi   initiator

	iscsiOps *limiter
	nfsMount *limiter
	formats  *limiter
}

// New returns the node service for cfg. It only prepares: nothing runs in
// the background until Start.
func New(cfg Config) (*Service, error) {
	if err := cfg.setDefaults(); err != nil {
		return nil, err
	}
	ini, err := iscsi.New(iscsi.Config{
		Exec:        cfg.Exec,
		DevDir:      cfg.DevDir,
		SysRoot:     cfg.SysRoot,
		UdevDataDir: udevDataDir(cfg),
		// Its per-target locks must not share names with the volume locks.
		LockDir:       filepath.Join(cfg.LockDir, "iscsi"),
		DeviceTimeout: cfg.ISCSIDeviceTimeout,
		DeadPathGrace: cfg.ISCSIDeadPathGrace,
	})
	if err != nil {
		return nil, err
	}
	return newService(cfg, ini)
}

// udevDataDir is the host's udev database, below the host root; none when
// /sys is not the kernel's (tests' emulated sysfs), whose devices udev
// never sees.
func udevDataDir(cfg Config) string {
	if filepath.Clean(cfg.SysRoot) != "/sys" {
		return ""
	}
	return filepath.Join("/", cfg.HostRoot, "run", "udev", "data")
}

// newService builds the service around ini; cfg must have its defaults set.
func newService(cfg Config, ini initiator) (*Service, error) {
	m := &mounter{exec: cfg.Exec, mountInfo: "/proc/self/mountinfo", hostRoot: cfg.HostRoot, statx: true}
	m.table = sharedread.New(func() ([]byte, error) { return os.ReadFile(m.mountInfo) })
	p := paths{base: filepath.Clean(cfg.KubeletDir), isMountPoint: m.mountedHere}
	store, err := tracking.NewStore(cfg.TrackingDir, p.confine)
	if err != nil {
		return nil, err
	}
	locks, err := volumelock.New(cfg.LockDir)
	if err != nil {
		return nil, err
	}
	return &Service{
		cfg:      cfg,
		paths:    p,
		state:    store,
		locks:    locks,
		mounter:  m,
		exec:     cfg.Exec,
		iscsi:    ini,
		iscsiOps: newLimiter("iscsi", cfg.MaxISCSIOperations),
		nfsMount: newLimiter("nfs_mount", cfg.MaxNFSMounts),
		formats:  newLimiter("mkfs", cfg.MaxFormats),
	}, nil
}

// NodeGetInfo answers from local state only and never fails: kubelet calls it
// during registration, and an error there drops the driver by name (K5, I6).
func (s *Service) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	resp := &csi.NodeGetInfoResponse{NodeId: s.cfg.NodeID, MaxVolumesPerNode: s.cfg.MaxVolumesPerNode}
	if len(s.cfg.Topology) > 0 {
		segments := make(map[string]string, len(s.cfg.Topology))
		for k, v := range s.cfg.Topology {
			segments[k] = v
		}
		resp.AccessibleTopology = &csi.Topology{Segments: segments}
	}
	return resp, nil
}

// nodeCapabilities are Trident 26.06's (Linux) plus VOLUME_CONDITION.
var nodeCapabilities = []csi.NodeServiceCapability_RPC_Type{
	csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME,
	csi.NodeServiceCapability_RPC_EXPAND_VOLUME,
	csi.NodeServiceCapability_RPC_GET_VOLUME_STATS,
	csi.NodeServiceCapability_RPC_VOLUME_CONDITION,
	csi.NodeServiceCapability_RPC_SINGLE_NODE_MULTI_WRITER,
}

// NodeGetCapabilities advertises what this service implements.
func (s *Service) NodeGetCapabilities(context.Context, *csi.NodeGetCapabilitiesRequest) (*csi.NodeGetCapabilitiesResponse, error) {
	resp := &csi.NodeGetCapabilitiesResponse{}
	for _, c := range nodeCapabilities {
		resp.Capabilities = append(resp.Capabilities, &csi.NodeServiceCapability{
			Type: &csi.NodeServiceCapability_Rpc{Rpc: &csi.NodeServiceCapability_RPC{Type: c}},
		})
	}
	return resp, nil
}

// lock takes volumeID's cross-process lock. A caller that cannot get it
// before its deadline gets Aborted, the spec's "operation pending for
// volume".
func (s *Service) lock(ctx context.Context, volumeID string) (func(), error) {
	unlock, err := s.locks.Lock(ctx, volumeID)
	if err != nil {
		return nil, aborted("another operation on volume %s is in progress: %v", volumeID, err)
	}
	return unlock, nil
}

// readState returns the volume's node state, nil if there is none. A legacy
// (Trident < 23.01) state is upgraded to the 23.01+ layout at once, so that
// it survives the staging path being mounted over (which hides the legacy
// volumePublishInfo.json) and Trident 23.01+ can read it after a rollback.
func (s *Service) readState(ctx context.Context, volumeID string) (*tracking.Info, error) {
	info, err := s.state.Read(volumeID)
	if errors.Is(err, tracking.ErrNotFound) {
		return nil, nil
	}
	if err != nil {
		return nil, internal("volume %s: %v", volumeID, err)
	}
	return s.upgrade(ctx, volumeID, info)
}

// readStateForStage is readState for NodeStage, which carries everything
// the state holds in its publish context: an unreadable state file is moved
// aside and the stage writes a new one, rather than fail forever.
func (s *Service) readStateForStage(ctx context.Context, volumeID string) (*tracking.Info, error) {
	info, err := s.state.Read(volumeID)
	switch {
	case errors.Is(err, tracking.ErrNotFound):
		return nil, nil
	case errors.Is(err, tracking.ErrCorrupt):
		logrus.WithContext(ctx).WithField("volume", volumeID).WithError(err).Error("node state unreadable; staging afresh from the publish context")
		s.quarantine(ctx, volumeID)
		return nil, nil
	case err != nil:
		return nil, internal("volume %s: %v", volumeID, err)
	}
	return s.upgrade(ctx, volumeID, info)
}

func (s *Service) upgrade(ctx context.Context, volumeID string, info *tracking.Info) (*tracking.Info, error) {
	if info.Legacy && info.Protocol() != "" {
		if err := s.state.Write(volumeID, info); err != nil {
			return nil, internal("volume %s: upgrade Trident's tracking file: %v", volumeID, err)
		}
		logrus.WithContext(ctx).WithField("volume", volumeID).Info("upgraded Trident's pre-23.01 node state to the 23.01 tracking file")
	}
	return info, nil
}

func (s *Service) writeState(volumeID string, info *tracking.Info) error {
	if err := s.state.Write(volumeID, info); err != nil {
		return internal("volume %s: write tracking file: %v", volumeID, err)
	}
	return nil
}

// writeStateDurable is writeState for a record that must survive a power
// loss (tracking.Store.Write says which).
func (s *Service) writeStateDurable(volumeID string, info *tracking.Info) error {
	if err := s.state.WriteDurable(volumeID, info); err != nil {
		return internal("volume %s: write tracking file: %v", volumeID, err)
	}
	return nil
}

// requestPath is a path from a request: as given (cleaned; what Trident's
// files record and what kubelet sends again) and as mount acts on it.
type requestPath struct {
	given string
	real  string
}

func (s *Service) confine(p, what string) (requestPath, error) {
	if p == "" {
		return requestPath{}, invalidArgument("%s missing", what)
	}
	real, err := s.paths.confine(p)
	if err != nil {
		return requestPath{}, invalidArgument("%s: %v", what, err)
	}
	return requestPath{given: filepath.Clean(p), real: real}, nil
}
