package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"

	"github.com/ontap-csi/ontap-csi/internal/sharedread"
	"github.com/ontap-csi/ontap-csi/node/hostexec"
)

// mounter makes and removes mounts with the host's mount(8) and umount(8),
// and reads this process's mount table.
//
// It does not implement mount-utils' mount.Interface: that interface has no
// context (a hung NFS mount must be bounded by the CSI call's deadline) and
// its Mounter runs the tools with os/exec in this mount namespace, not
// through hostexec (chroot into --host-root, the test shims in PATH). What
// mount-utils gets right and needs no tool — parsing mountinfo, recognising
// a corrupted mount — is used from it.
type mounter struct {
	exec      hostexec.Executor
	mountInfo string // /proc/self/mountinfo
	// hostRoot is where the host tools run chrooted (--host-root; "" =
	// here). A mount they make at P lands in this process's mount table at
	// hostRoot+P, and shows at P as well only where the kubelet dir reaches
	// the container with mount propagation. Trident 20.10's DaemonSet
	// mounts <kubelet-dir>/plugins without it (docs/design/trident-compat.md §2.1), so
	// there a staging mount is seen under the host root only.
	hostRoot string
	// statx: mountInfo is this process's own mount table, so a statx of a
	// path may answer for it that nothing is mounted there (notMountRoot).
	statx bool
	// unmountHere unmounts path in this process's own mount namespace
	// (unmountCopies); nil is unmountInNamespace.
	unmountHere func(path string) error
	// table, when set, reads mountInfo for the calls whose reads overlap
	// (newService). Twenty unstages at once on the real kernel, with 500
	// mounts on the node, each spent 150 ms in their read under the
	// load they made together (issue 18, docs/benchmarks.md); a read they
	// share still starts after each caller asked, so it sees every mount
	// and unmount that finished before, as a read of its own would.
	table *sharedread.Read[[]byte]
}

// mountsOf returns the entries of this process's mount table whose mount
// point is path exactly, bottom first (the package's mountsOf), through
// the shared read when there is one.
func (m *mounter) mountsOf(path string) ([]mount.MountInfo, error) {
	if m.table == nil || tornMountinfo() {
		return mountsOf(m.mountInfo, path)
	}
	data, err := m.table.Get()
	if err != nil {
		return nil, fmt.Errorf("read mount table: %w", err)
	}
	return mountsIn(data, path)
}

// seen is where this process sees what the host tools see at path.
func (m *mounter) seen(path string) string {
	if m.hostRoot == "" || m.hostRoot == "/" {
		return path
	}
	return filepath.Join(m.hostRoot, path)
}

// mount runs mount [-t fstype] [-o opts] source target. Every piece is its
// own argv item; options were checked one by one before they got here.
func (m *mounter) mount(ctx context.Context, source, target, fstype string, opts []string) error {
	var args []string
	if fstype != "" {
		args = append(args, "-t", fstype)
	}
	if len(opts) > 0 {
		args = append(args, "-o", strings.Join(opts, ","))
	}
	args = append(args, source, target)
	_, err := m.exec.Run(ctx, "mount", args...)
	return err
}

// bind bind-mounts source on target, read-only if asked. A read-only bind
// takes two mount calls (the kernel ignores MS_RDONLY on MS_BIND); a crash
// between them leaves a writable bind, which publish repairs on retry (see
// ensureReadOnly).
func (m *mounter) bind(ctx context.Context, source, target string, readOnly bool) error {
	if err := m.mount(ctx, source, target, "", []string{"bind"}); err != nil {
		return err
	}
	if readOnly {
		return m.remountReadOnly(ctx, target)
	}
	return nil
}

func (m *mounter) remountReadOnly(ctx context.Context, target string) error {
	return m.mount(ctx, "", target, "", []string{"remount", "bind", "ro"})
}

// mountsAt returns the mount table entries whose mount point is path as the
// host tools see it, bottom first (several when mounts are stacked).
func (m *mounter) mountsAt(path string) ([]mount.MountInfo, error) {
	if m.statx && notMountRoot(m.seen(path)) {
		return nil, nil
	}
	return m.mountsOf(m.seen(path))
}

// notMountRootTimeout bounds the statx of notMountRoot; a path that takes
// longer is left to the mount table.
const notMountRootTimeout = time.Second

// notMountRoot reports, without reading the mount table, that nothing is
// mounted at path: it does not exist, or statx says it is not the root of
// a mount (STATX_ATTR_MOUNT_ROOT, Linux 5.8). Reading and parsing
// mountinfo costs 73 µs with 20 mounts and 1.8 ms with 520, takes the
// kernel's mount lock, and most checks are of a path where nothing is
// mounted yet (issue 18). Unlike a comparison of st_dev with the parent's,
// the attribute also sees a bind mount from the same file system.
//
// false means "ask the mount table": a mount root, a kernel without the
// attribute, or any error, such as ENOTCONN or ESTALE from a corrupted
// mount. AT_STATX_DONT_SYNC keeps NFS from asking its server for
// attributes, and the statx runs aside, bounded, like every stat of a
// path that may be a mount of a dead server (statWithContext). A mount
// hidden under a later mount on a parent directory is not seen here; it
// cannot be reached at path anyway.
func notMountRoot(path string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), notMountRootTimeout)
	defer cancel()
	var stx unix.Statx_t
	err := statWithContext(ctx, path, func() error {
		return unix.Statx(unix.AT_FDCWD, path, unix.AT_SYMLINK_NOFOLLOW|unix.AT_NO_AUTOMOUNT|unix.AT_STATX_DONT_SYNC, unix.STATX_TYPE, &stx)
	})
	switch {
	case errors.Is(err, unix.ENOENT):
		return true
	case err != nil:
		return false
	}
	return stx.Attributes_mask&unix.STATX_ATTR_MOUNT_ROOT != 0 && stx.Attributes&unix.STATX_ATTR_MOUNT_ROOT == 0
}

// isMountPoint reports whether something is mounted at path. It reads the
// mount table rather than comparing st_dev with the parent's, which misses
// bind mounts from the same filesystem and hangs on a dead NFS server.
func (m *mounter) isMountPoint(path string) (bool, error) {
	mis, err := m.mountsAt(path)
	return len(mis) > 0, err
}

// deviceMounted reports whether the block device dev is mounted anywhere.
func (m *mounter) deviceMounted(dev string) (bool, error) {
	var st unix.Stat_t
	if err := unix.Stat(dev, &st); err != nil {
		return false, fmt.Errorf("stat %s: %w", dev, err)
	}
	if st.Mode&unix.S_IFMT != unix.S_IFBLK {
		return false, nil // not a device: nothing mounts it by number
	}
	infos, err := mount.ParseMountInfo(m.mountInfo)
	if err != nil {
		return false, fmt.Errorf("read mount table: %w", err)
	}
	major, minor := int(unix.Major(st.Rdev)), int(unix.Minor(st.Rdev))
	for _, mi := range infos {
		if mi.Major == major && mi.Minor == minor {
			return true, nil
		}
	}
	return false, nil
}

// maxStacked bounds how many mounts stacked at one path unmount removes; more
// than one only happens after a crash between a mount and its record.
const maxStacked = 8

// unmount removes every mount at path. A corrupted mount (ENOTCONN, ESTALE:
// a dead NFS server, a gone device) that a plain umount cannot remove is
// unmounted with force and, failing that, lazily, so kubelet is never stuck
// on it (Trident #812). Then it removes this process's own copies of the
// mount, which a mount of the kubelet dir without propagation holds
// (unmountCopies).
func (m *mounter) unmount(ctx context.Context, path string) error {
	if err := m.unmountHost(ctx, path); err != nil {
		return err
	}
	return m.unmountCopies(ctx, path)
}

// unmountCopies removes the mounts left at path in this process's own
// mount namespace once the host has none there. They are copies the
// container got when it started: Trident 20.10's DaemonSet mounts
// <kubelet-dir>/plugins without propagation (docs/design/trident-compat.md §2.1), so
// a container started after a volume was staged holds the staging mount
// privately, and the host tools' umount (under --host-root) does not reach
// it. Left there it keeps the file system and the device open: the detach
// of the LUN after the unmount finds the multipath map in use, and every
// retry of NodeUnstageVolume fails for as long as the container lives.
// With propagation (Trident 22.04+, deploy/) the host's umount removes them
// too and there is nothing to do. Without a host root the tools run here
// and unmountHost already removed everything.
func (m *mounter) unmountCopies(ctx context.Context, path string) error {
	if m.seen(path) == path {
		return nil // no host root: the host's mounts are this process's
	}
	here := m.unmountHere
	if here == nil {
		here = unmountInNamespace
	}
	for i := 0; i < maxStacked; i++ {
		if m.statx && notMountRoot(path) {
			return nil
		}
		mis, err := m.mountsOf(path)
		if err != nil || len(mis) == 0 {
			return err
		}
		logrus.WithContext(ctx).WithFields(logrus.Fields{"path": path, "source": mis[len(mis)-1].Source}).
			Info("unmounting this container's copy of a mount the host no longer has (its kubelet dir mount has no propagation)")
		if err := here(path); err != nil {
			return fmt.Errorf("unmount this container's copy of %s: %w", path, err)
		}
	}
	return fmt.Errorf("%s still mounted in this container after %d unmounts", path, maxStacked)
}

// unmountInNamespace unmounts path in this process's mount namespace; a
// busy copy (a file of it still open here) is detached.
func unmountInNamespace(path string) error {
	err := unix.Unmount(path, 0)
	if errors.Is(err, unix.EBUSY) {
		err = unix.Unmount(path, unix.MNT_DETACH)
	}
	if errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOENT) {
		return nil // not (or no longer) a mount point
	}
	return err
}

// unmountHost removes every mount at path as the host tools see it.
func (m *mounter) unmountHost(ctx context.Context, path string) error {
	for i := 0; i < maxStacked; i++ {
		mounted, err := m.mountedHere(path)
		if err != nil || !mounted {
			return err
		}
		uctx, cancel := context.WithTimeout(ctx, umountTimeout)
		_, err = m.exec.Run(uctx, "umount", path)
		cancel()
		if err == nil {
			continue
		}
		if ctx.Err() != nil {
			return err
		}
		// Gone all the same: another unmount raced with ours, or a slow
		// umount was timed out after all but finished (killing umount does
		// not stop its umount.nfs helper: a real kernel showed it, with 20
		// NFS unmounts at once on a busy node).
		still, perr := m.isMountPoint(path)
		if perr != nil || !still {
			return perr
		}
		// A timed-out umount means a hung server; stat would hang too.
		if !isTimeout(err) && !m.corrupted(ctx, path) {
			return fmt.Errorf("unmount %s: %w", path, err)
		}
		logrus.WithContext(ctx).WithField("path", path).WithError(err).Warn("mount is corrupted; unmounting with force")
		if ferr := m.umountCorrupted(ctx, "-f", path); ferr != nil {
			if lerr := m.umountCorrupted(ctx, "-l", path); lerr != nil {
				if still, _ := m.isMountPoint(path); still {
					return fmt.Errorf("unmount corrupted mount %s: %w", path, lerr)
				}
			}
		}
	}
	return fmt.Errorf("%s still mounted after %d unmounts", path, maxStacked)
}

// mountedHere is isMountPoint for unmount and for the path checks of
// requests (paths.resolve), which do not need the mount table's word that
// a mount root is a mount: umount asks the kernel, and its failure is
// checked against the table; resolve only must not stat a mount point.
// The callers that need the mounts themselves read the table (checkMounts),
// so this spares a parse per unmount and per path of a request, and after
// the last umount statx alone says that nothing is left.
func (m *mounter) mountedHere(path string) (bool, error) {
	if !m.statx {
		return m.isMountPoint(path)
	}
	return !notMountRoot(m.seen(path)), nil
}

func isTimeout(err error) bool { return errors.Is(err, context.DeadlineExceeded) }

// umountCorrupted runs a forced (-f) or lazy (-l) umount of a corrupted
// mount, bounded like every umount. Without --no-canonicalize umount
// resolves the path (a stat), and without --internal-only it runs
// umount.nfs, which stats it too: over an NFS server that does not answer
// both block, and a lazy unmount of a busy mount then never returned
// (docs/design/architecture.md §7.7). The kernel's own detach does not
// wait for the server. The path is the one the mount table shows.
func (m *mounter) umountCorrupted(ctx context.Context, mode, path string) error {
	uctx, cancel := context.WithTimeout(ctx, umountTimeout)
	defer cancel()
	_, err := m.exec.Run(uctx, "umount", "--no-canonicalize", "--internal-only", mode, path)
	return err
}

// hungTimeout is how long a stat of a mount point may take before the mount
// counts as hung (an NFS server that does not answer).
const hungTimeout = 5 * time.Second

// corrupted reports a mount point that cannot be stat'ed because what is
// mounted there is gone or does not answer. The stat runs aside: a hung one
// stays blocked in the kernel until the mount is forced away, the caller
// does not.
func (m *mounter) corrupted(ctx context.Context, path string) bool {
	ctx, cancel := context.WithTimeout(ctx, hungTimeout)
	defer cancel()
	err := statWithContext(ctx, m.seen(path), func() error {
		_, err := os.Stat(m.seen(path))
		return err
	})
	return mount.IsCorruptedMnt(err) || errors.Is(err, context.DeadlineExceeded)
}

// cleanupPath unmounts whatever is at path and removes the path itself
// (the directory or file a publish created). It never removes anything
// recursively: a directory that is not empty once unmounted holds data that
// is not ours to delete.
func (m *mounter) cleanupPath(ctx context.Context, path string) error {
	if err := m.unmount(ctx, path); err != nil {
		return err
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("remove %s: %w", path, err)
	}
	return nil
}

// umountTimeout bounds a single umount of a target: a hung NFS server must
// not eat the whole CSI deadline before the forced unmount is tried.
const umountTimeout = 10 * time.Second
