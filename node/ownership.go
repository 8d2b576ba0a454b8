package node

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"

	"github.com/ontap-csi/ontap-csi/node/tracking"
)

// Ownership. The plugin runs as root in the host's mount namespace: a call
// for one volume that unmounted, removed or bound another volume's path
// would pull data from under a running pod or hand it to another tenant. So
// before a call changes a path it checks that the path holds this volume:
//
//   - the path is the volume's: its tracking record names it (the staging
//     path, a target), or, for targets Trident 20.10 did not record and for
//     a lost record, it is the path kubelet makes for this volume;
//   - no other volume's record names the path or made the mount there;
//   - every mount stacked on the path is this volume's: an NFS mount of its
//     export (the mount's source), a mount of its LUN (the device number),
//     or the very mount its stage or publish recorded making (Info.Mounts).
//     A corrupted mount on top — its server or device is gone — holds
//     nothing a pod can still use, and may go.
//
// A path that holds another volume, or a mount the node cannot tell is this
// volume's, is FailedPrecondition, and nothing is changed (docs/errors.md).

// mountID identifies one mount: the device number of its file system and
// the root of the mount in it. A bind mount shares the identity of what it
// binds.
func mountID(mi mount.MountInfo) string { return fmt.Sprintf("%d:%d:%s", mi.Major, mi.Minor, mi.Root) }

// ownership is what the node knows of whose a path or a mount is.
type ownership struct {
	volumeID string
	info     *tracking.Info            // this volume's state; nil if there is none
	others   map[string]*tracking.Info // every other volume's state on the node
	// lun is an iSCSI volume's LUN as attached now, nil if not; findLUN,
	// when set, looks it up on first use (attachedLUN).
	lun     *lunDevice
	findLUN func() *lunDevice
}

// attachedLUN is o.lun, looked up now if that was left for later.
func (o *ownership) attachedLUN() *lunDevice {
	if o.findLUN != nil {
		o.lun, o.findLUN = o.findLUN(), nil
	}
	return o.lun
}

// lunDevice is an attached LUN's device.
type lunDevice struct {
	path  string
	rdev  uint64
	block bool // a block device; only a test's stand-in is not
}

// ownership gathers it for volumeID. With strict, a LUN that cannot be
// looked up is an error; otherwise (a cleanup, which must not depend on
// iscsiadm answering) it only leaves the LUN unknown, and is looked up
// only if a mount needs it: one that the record does not identify (mine).
// An unpublish or unstage of what the record made asks sysfs for nothing.
func (s *Service) ownership(ctx context.Context, volumeID string, info *tracking.Info, strict bool) (*ownership, error) {
	others, err := s.state.Others(volumeID)
	if err != nil {
		return nil, internal("read the node's tracking files: %v", err)
	}
	o := &ownership{volumeID: volumeID, info: info, others: others}
	if info == nil || info.Protocol() != tracking.ProtocolBlock {
		return o, nil
	}
	if !strict {
		o.findLUN = func() *lunDevice {
			lun, err := s.findLUN(ctx, info)
			if err != nil {
				logrus.WithContext(ctx).WithField("volume", volumeID).WithError(err).Warn("cannot look up the LUN; telling its mounts by their record alone")
			}
			return lun
		}
		return o, nil
	}
	if o.lun, err = s.findLUN(ctx, info); err != nil {
		return nil, fmt.Errorf("find the LUN of volume %s: %w", volumeID, err)
	}
	return o, nil
}

// findLUN returns the volume's LUN as attached now, nil if it is not.
func (s *Service) findLUN(ctx context.Context, info *tracking.Info) (*lunDevice, error) {
	dev, err := s.iscsi.Find(ctx, iscsiTarget(&info.PublishInfo))
	if err != nil || dev == nil {
		return nil, err
	}
	lun := &lunDevice{path: dev.Path}
	var st unix.Stat_t
	if unix.Stat(dev.Path, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK {
		lun.rdev, lun.block = st.Rdev, true
	}
	return lun, nil
}

// another returns the other volume whose record names path, or whose record
// made, or whose export or device is, the mount mi at it (nil: the path
// alone); "" when there is none.
func (o *ownership) another(path string, mi *mount.MountInfo) string {
	ids := make([]string, 0, len(o.others))
	for id := range o.others {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		info := o.others[id]
		if info.Claims(path) {
			return id
		}
		if mi == nil {
			continue
		}
		if info.MadeMount(mountID(*mi)) || info.Device() != "" && mi.Source == info.Device() ||
			info.Protocol() == tracking.ProtocolFile && mi.Source == nfsSource(info.NfsServerIP, info.NfsPath) {
			return id
		}
	}
	return ""
}

// mine reports whether mi, mounted at path (seen at seenPath by this
// process), is this volume's mount.
func (o *ownership) mine(path, seenPath string, mi mount.MountInfo) bool {
	if o.info == nil {
		return false
	}
	if o.info.MadeMount(mountID(mi)) {
		return true
	}
	switch o.info.Protocol() {
	case tracking.ProtocolFile:
		return mi.Source == nfsSource(o.info.NfsServerIP, o.info.NfsPath)
	case tracking.ProtocolBlock:
		return o.lunMounted(seenPath, mi)
	}
	return false
}

// lunMounted reports a mount of the LUN's file system, or a bind of its
// device (raw block) on the path.
func (o *ownership) lunMounted(seenPath string, mi mount.MountInfo) bool {
	lun := o.attachedLUN()
	if lun == nil {
		// Not attached (any more): only the device path it was mounted
		// from names it. Multipath names (/dev/mapper/<WWID>) are the
		// LUN's own.
		return o.info.Device() != "" && mi.Source == o.info.Device()
	}
	if !lun.block {
		return mi.Source == lun.path
	}
	if uint32(mi.Major) == unix.Major(lun.rdev) && uint32(mi.Minor) == unix.Minor(lun.rdev) {
		return true
	}
	if o.info.FilesystemType != fsRaw {
		return false
	}
	// A device bound on a file: the mount is /dev's, the node is the LUN's.
	var st unix.Stat_t
	return unix.Stat(seenPath, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == lun.rdev
}

// mountCheck is what checkMounts found at a path.
type mountCheck struct {
	mounts int // mounts stacked there
	mine   int // of them, this volume's
}

// checkMounts checks every mount stacked on p before the caller changes p.
// trustPath (a path kubelet made for this volume) takes any mount that no
// other volume lays claim to as this volume's. A mount of another volume,
// or one that cannot be told to be this volume's and is not dead, is
// FailedPrecondition.
func (s *Service) checkMounts(ctx context.Context, o *ownership, p requestPath, trustPath bool) (mountCheck, error) {
	if id := o.another(p.given, nil); id != "" {
		return mountCheck{}, failedPrecondition("%s is volume %s's, not %s's; nothing was changed", p.given, id, o.volumeID)
	}
	mis, err := s.mounter.mountsAt(p.real)
	if err != nil {
		return mountCheck{}, internal("%v", err)
	}
	c := mountCheck{mounts: len(mis)}
	for i, mi := range mis {
		if id := o.another(p.given, &mi); id != "" {
			return mountCheck{}, failedPrecondition("%s holds volume %s, not %s; nothing was changed", p.given, id, o.volumeID)
		}
		switch {
		case trustPath || o.mine(p.given, s.mounter.seen(p.real), mi):
			c.mine++
		case i == len(mis)-1 && s.mounter.corrupted(ctx, p.real):
			// Dead: nobody's any more.
		default:
			return mountCheck{}, failedPrecondition("%s holds a mount of %s that is not volume %s's; nothing was changed", p.given, mi.Source, o.volumeID)
		}
	}
	return c, nil
}

// trustKubeletPath reports whether a mount at target that cannot be told to
// be this volume's is taken to be: only at kubelet's path for this volume,
// and only where no record says what this volume mounted there (Trident
// 20.10 recorded no targets, Trident 23.01 no mounts, and the state may be
// gone). A mount the record identifies must be that mount.
func (s *Service) trustKubeletPath(volumeID string, info *tracking.Info, target string) bool {
	return s.isKubeletPathOf(volumeID, target) && (info == nil || info.MountAt(target) == "")
}

// recordMount notes in info the identity of the mount now on top of p.
func (s *Service) recordMount(info *tracking.Info, p requestPath) error {
	mis, err := s.mounter.mountsAt(p.real)
	if err != nil {
		return internal("%v", err)
	}
	if len(mis) == 0 {
		return internal("nothing is mounted at %s after mounting it", p.given)
	}
	info.RecordMount(p.given, mountID(mis[len(mis)-1]))
	return nil
}

// csiDriverName is the driver name kubelet puts in staging paths.
const csiDriverName = "csi.trident.netapp.io"

// isKubeletStagingPathOf reports whether staging is where kubelet stages the
// volume: <kubelet>/plugins/kubernetes.io/csi/<driver>/<sha256 of the volume
// handle>/globalmount (1.24+), or .../csi/pv/<pv>/globalmount before, where
// the PV name is the volume id in Trident.
func (s *Service) isKubeletStagingPathOf(volumeID, staging string) bool {
	rel, err := filepath.Rel(s.paths.base, staging)
	if err != nil {
		return false
	}
	el := strings.Split(rel, "/")
	if len(el) != 6 || strings.Join(el[:3], "/") != "plugins/kubernetes.io/csi" || el[5] != "globalmount" {
		return false
	}
	sum := sha256.Sum256([]byte(volumeID))
	return el[3] == "pv" && el[4] == volumeID || el[3] == csiDriverName && el[4] == hex.EncodeToString(sum[:])
}
