package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"

	"github.com/ontap-csi/ontap-csi/node/tracking"
)

// NodeGetVolumeStats reports usage and health of a published or staged
// volume. It takes no volume lock: it only reads (the tracking file is
// replaced atomically), and kubelet polls it; queueing it behind a long
// stage would only make the poll time out.
func (s *Service) NodeGetVolumeStats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	resp, err := s.stats(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

func (s *Service) stats(ctx context.Context, req *csi.NodeGetVolumeStatsRequest) (*csi.NodeGetVolumeStatsResponse, error) {
	volumeID := req.GetVolumeId()
	if err := checkVolumeID(volumeID); err != nil {
		return nil, err
	}
	if req.GetVolumePath() == "" {
		return nil, invalidArgument("volume path missing")
	}
	real, err := s.paths.confine(req.GetVolumePath())
	if err != nil {
		return nil, notFound("volume %s is not at %q: %v", volumeID, req.GetVolumePath(), err)
	}
	info, err := s.state.Read(volumeID)
	if errors.Is(err, tracking.ErrNotFound) {
		return nil, notFound("volume %s is not staged on this node", volumeID)
	}
	if err != nil {
		return nil, internal("volume %s: %v", volumeID, err)
	}
	if err := s.volumeAt(ctx, volumeID, info, requestPath{given: filepath.Clean(req.GetVolumePath()), real: real}); err != nil {
		return nil, err
	}

	// Where the mount shows in this process (see mounter.seen).
	at := s.mounter.seen(real)
	// Bounded by hungTimeout, not the CO's deadline: over a hung NFS
	// server stat blocks for ever, and an answer sent when kubelet's own
	// deadline ends never reaches it, abnormal condition and all
	// (docs/design/architecture.md §7.4).
	sctx, cancel := context.WithTimeout(ctx, hungTimeout)
	defer cancel()
	var st unix.Stat_t
	err = statWithContext(sctx, at, func() error { return unix.Stat(at, &st) })
	switch {
	case errors.Is(err, unix.ENOENT):
		return nil, notFound("volume path %s does not exist", req.GetVolumePath())
	case mount.IsCorruptedMnt(err), errors.Is(err, context.DeadlineExceeded):
		return inaccessible(req.GetVolumePath(), err), nil
	case err != nil:
		return nil, internal("stat %s: %v", req.GetVolumePath(), err)
	}
	cond := s.condition(ctx, info, real)

	if st.Mode&unix.S_IFMT == unix.S_IFBLK {
		size, err := blockDeviceSize(at)
		if err != nil {
			return nil, internal("%v", err)
		}
		return &csi.NodeGetVolumeStatsResponse{
			Usage:           []*csi.VolumeUsage{{Unit: csi.VolumeUsage_BYTES, Total: size}},
			VolumeCondition: cond,
		}, nil
	}
	var fs unix.Statfs_t
	if err := statWithContext(sctx, at, func() error { return unix.Statfs(at, &fs) }); err != nil {
		if mount.IsCorruptedMnt(err) || errors.Is(err, context.DeadlineExceeded) {
			return inaccessible(req.GetVolumePath(), err), nil
		}
		return nil, internal("statfs %s: %v", req.GetVolumePath(), err)
	}
	bsize := int64(fs.Bsize)
	return &csi.NodeGetVolumeStatsResponse{
		Usage: []*csi.VolumeUsage{
			{
				Unit:      csi.VolumeUsage_BYTES,
				Total:     int64(fs.Blocks) * bsize,
				Available: int64(fs.Bavail) * bsize,
				Used:      int64(fs.Blocks-fs.Bfree) * bsize,
			},
			{
				Unit:      csi.VolumeUsage_INODES,
				Total:     int64(fs.Files),
				Available: int64(fs.Ffree),
				Used:      int64(fs.Files - fs.Ffree),
			},
		},
		VolumeCondition: cond,
	}, nil
}

// inaccessible is the condition of a volume whose stat failed as a
// corrupted mount does, or did not return in time.
func inaccessible(path string, err error) *csi.NodeGetVolumeStatsResponse {
	if errors.Is(err, context.DeadlineExceeded) {
		return abnormal("the file system at %s does not answer (no reply within %s): the NFS server or the LUN may be unreachable", path, hungTimeout)
	}
	return abnormal("the mount at %s is not accessible (%v); the storage may be unreachable", path, err)
}

func abnormal(format string, args ...any) *csi.NodeGetVolumeStatsResponse {
	return &csi.NodeGetVolumeStatsResponse{
		VolumeCondition: &csi.VolumeCondition{Abnormal: true, Message: fmt.Sprintf(format, args...)},
	}
}

// condition judges the health of a volume at path: mounted at all; for
// iSCSI, the LUN still attached; and a file system the kernel has not turned
// read-only after errors (ext4's errors=remount-ro, Trident #1039).
func (s *Service) condition(ctx context.Context, info *tracking.Info, path string) *csi.VolumeCondition {
	mis, err := s.mounter.mountsAt(path)
	if err != nil {
		return &csi.VolumeCondition{Abnormal: true, Message: err.Error()}
	}
	if len(mis) == 0 {
		return &csi.VolumeCondition{Abnormal: true, Message: "the volume is not mounted at " + path}
	}
	if info.Protocol() == tracking.ProtocolBlock {
		dev, err := s.iscsi.Find(ctx, iscsiTarget(&info.PublishInfo))
		switch {
		case err != nil:
			return &csi.VolumeCondition{Abnormal: true, Message: "the LUN cannot be found on this node: " + err.Error()}
		case dev == nil:
			return &csi.VolumeCondition{Abnormal: true, Message: "the LUN is no longer attached to this node"}
		}
	}
	top := mis[len(mis)-1]
	if !slices.Contains(top.MountOptions, "ro") && slices.Contains(top.SuperOptions, "ro") {
		logrus.WithContext(ctx).WithField("path", path).Warn("file system is read-only under a read-write mount")
		return &csi.VolumeCondition{Abnormal: true, Message: "the file system has been made read-only, likely after I/O errors; check the kernel log"}
	}
	return &csi.VolumeCondition{Message: "volume is healthy"}
}

// statWithContext runs a stat-like call of path that a hung NFS server
// can block in the kernel; the call returns when ctx ends, leaving the
// syscall behind. While one is left behind, further calls for the same
// path fail at once instead of leaving a thread each (kubelet polls the
// stats of every volume every minute).
func statWithContext(ctx context.Context, path string, f func() error) error {
	if _, blocked := hungStats.Load(path); blocked {
		return errStillHung
	}
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		hungStats.Store(path, true)
		go func() {
			<-done
			hungStats.Delete(path)
		}()
		return ctx.Err()
	}
}

// hungStats holds the paths with a stat still blocked in the kernel.
var hungStats sync.Map

// errStillHung is a stat not even tried: an earlier one of the same path
// has not returned. It reads as a timed-out one.
var errStillHung = fmt.Errorf("an earlier stat of this path is still blocked: %w", context.DeadlineExceeded)

func blockDeviceSize(path string) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	size, err := unix.IoctlGetUint64(int(f.Fd()), unix.BLKGETSIZE64)
	if err != nil {
		return 0, fmt.Errorf("size of block device %s: %w", path, err)
	}
	return int64(size), nil
}
