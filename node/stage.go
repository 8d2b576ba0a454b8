package node

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/node/tracking"
)

// stageRequest is a NodeStageVolume request after validation.
type stageRequest struct {
	volumeID string
	staging  requestPath
	cap      volumeCap
	access   *tracking.PublishInfo // from the publish context
	fsType   string                // iSCSI: file system to find or make; fsRaw for block access
}

// NodeStageVolume prepares a volume for publishing on this node: NFS records
// the export; iSCSI attaches the LUN, makes sure it carries the file system
// and mounts it on the staging path (raw block: attach only).
func (s *Service) NodeStageVolume(ctx context.Context, req *csi.NodeStageVolumeRequest) (*csi.NodeStageVolumeResponse, error) {
	r, err := s.checkStage(req)
	if err != nil {
		return nil, toStatus(err)
	}
	unlock, err := s.lock(ctx, r.volumeID)
	if err != nil {
		return nil, toStatus(err)
	}
	defer unlock()
	if r.access.Protocol() == tracking.ProtocolFile {
		err = s.stageNFS(ctx, r)
	} else {
		err = s.stageISCSI(ctx, r)
	}
	if err != nil {
		return nil, toStatus(err)
	}
	return &csi.NodeStageVolumeResponse{}, nil
}

// checkStage validates everything in the request before anything is looked
// up or changed.
func (s *Service) checkStage(req *csi.NodeStageVolumeRequest) (*stageRequest, error) {
	if err := checkVolumeID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	staging, err := s.confine(req.GetStagingTargetPath(), "staging target path")
	if err != nil {
		return nil, err
	}
	vc, err := checkCapability(req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	access, err := parsePublishContext(req.GetPublishContext())
	if err != nil {
		return nil, err
	}
	r := &stageRequest{volumeID: req.GetVolumeId(), staging: staging, cap: vc, access: access}
	if access.Protocol() == tracking.ProtocolFile {
		if vc.block {
			return nil, invalidArgument("raw block access is not supported for NFS volumes")
		}
		return r, nil
	}
	if r.fsType, err = chooseFilesystem(vc, access.FilesystemType); err != nil {
		return nil, err
	}
	if vc.multiNodeWriter() && !vc.block {
		return nil, invalidArgument("a file system on an iSCSI LUN cannot be written from several nodes")
	}
	return r, nil
}

// chooseFilesystem picks the iSCSI volume's file system: the capability's
// fs_type wins over the publish context's filesystemType (Trident 26.06);
// ext4 when neither says.
func chooseFilesystem(vc volumeCap, fromContext string) (string, error) {
	if vc.block {
		return fsRaw, nil
	}
	fs := vc.fsType
	if fs == "" {
		fs = fromContext
	}
	switch fs {
	case "":
		return fsExt4, nil
	case fsExt3, fsExt4, fsXFS:
		return fs, nil
	case fsRaw:
		return "", invalidArgument("file system type raw needs a block capability")
	}
	return "", invalidArgument("unsupported file system type %q", fs)
}

// stagedAt checks that an existing state belongs to this staging path and
// protocol: kubelet stages a volume once per node, at one path.
func stagedAt(info *tracking.Info, r *stageRequest) error {
	if filepath.Clean(info.StagingTargetPath) != r.staging.given {
		return failedPrecondition("volume %s is already staged at %s", r.volumeID, info.StagingTargetPath)
	}
	if p := info.Protocol(); p != "" && p != r.access.Protocol() {
		return failedPrecondition("volume %s is staged with protocol %s, not %s", r.volumeID, p, r.access.Protocol())
	}
	return nil
}

// newStage reads the volume's state and returns it (prev, nil if none) with
// the record this stage writes. It refuses a staging path that another
// volume's record names, or that holds a mount which is not this volume's:
// an NFS stage mounts nothing there, an iSCSI stage only the LUN's file
// system (compared by device, before anything is attached).
func (s *Service) newStage(ctx context.Context, r *stageRequest) (prev, rec *tracking.Info, err error) {
	prev, err = s.readStateForStage(ctx, r.volumeID)
	if err != nil {
		return nil, nil, err
	}
	rec = &tracking.Info{PublishInfo: *r.access, StagingTargetPath: r.staging.given}
	if r.access.Protocol() == tracking.ProtocolBlock {
		rec.FilesystemType = r.fsType
	}
	if prev != nil {
		if err := stagedAt(prev, r); err != nil {
			return nil, nil, err
		}
		rec.PublishedPaths, rec.Mounts = prev.PublishedPaths, prev.Mounts
	}
	// What this stage may find mounted is told by the request's LUN or
	// export, and by what the last stage recorded (device, mounts).
	known := *rec
	if prev != nil {
		known.DevicePath = prev.Device()
	}
	o, err := s.ownership(ctx, r.volumeID, &known, true)
	if err != nil {
		return nil, nil, err
	}
	if _, err := s.checkMounts(ctx, o, r.staging, false); err != nil {
		return nil, nil, err
	}
	return prev, rec, nil
}

// stageNFS records the export, as Trident does; the mount happens at
// publish. A repeated stage rewrites the same record.
func (s *Service) stageNFS(ctx context.Context, r *stageRequest) error {
	_, rec, err := s.newStage(ctx, r)
	if err != nil {
		return err
	}
	return s.writeState(r.volumeID, rec)
}

// stageISCSI attaches, formats if provably empty, and mounts on the staging
// path. The state is written before the attach, so that an unstage after a
// crash at any later step knows what to detach; each step is idempotent, so
// a retried stage picks up where the last one stopped.
func (s *Service) stageISCSI(ctx context.Context, r *stageRequest) error {
	log := logrus.WithContext(ctx).WithField("volume", r.volumeID)
	prev, rec, err := s.newStage(ctx, r)
	if err != nil {
		return err
	}
	if prev != nil {
		if prev.FilesystemType != "" && (prev.FilesystemType == fsRaw) != (r.fsType == fsRaw) {
			return alreadyExists("volume %s is staged with file system type %s, asked %s", r.volumeID, prev.FilesystemType, r.fsType)
		}
		rec.FormattingSerial = prev.FormattingSerial
		// A repeated stage of a staged volume: nothing to do, not even a
		// slot under the iSCSI cap. A record without a device is from a
		// stage that did not finish; it goes the whole way again.
		if prev.Device() != "" {
			done, err := s.staged(ctx, prev, r)
			if done || err != nil {
				return err
			}
		}
	}

	if err := s.writeState(r.volumeID, rec); err != nil {
		return err
	}
	crashpoint("NodeStageVolume/recorded")

	// The slot caps what loads iscsiadm, the kernel's scans and
	// multipathd: the attach only. blkid, mkfs and the mount have caps or
	// costs of their own, and holding the slot through them made the other
	// stages queue behind a format.
	release, err := s.iscsiOps.acquire(ctx)
	if err != nil {
		return err
	}
	dev, err := s.iscsi.Attach(ctx, iscsiTarget(&rec.PublishInfo))
	release()
	if err != nil {
		return fmt.Errorf("attach LUN: %w", err)
	}
	crashpoint("NodeStageVolume/attached")
	log.WithField("device", dev.Path).Info("LUN attached")
	rec.DevicePath = dev.Path
	if r.fsType == fsRaw {
		return s.writeState(r.volumeID, rec)
	}

	// A stage that died after its mount left it in place: keep it.
	mounted, err := s.stagingMounted(ctx, r)
	if err != nil {
		return err
	}
	if !mounted {
		// Only a format of this very LUN, started by this node's record,
		// may be resumed; Attach has checked the device's serial.
		resume := rec.FormattingSerial != "" && rec.FormattingSerial == rec.IscsiLunSerial
		if err := s.ensureFilesystem(ctx, dev.Path, r.fsType, resume, func() error {
			// The format is on the LUN, which outlives a power loss: so
			// must the record that lets a retry format again.
			rec.FormattingSerial = rec.IscsiLunSerial
			return s.writeStateDurable(r.volumeID, rec)
		}); err != nil {
			return err
		}
		crashpoint("NodeStageVolume/formatted")
		opts, err := mountOptions(rec.MountOptions, r.cap.flags)
		if err != nil {
			return err
		}
		if err := s.mounter.mount(ctx, dev.Path, r.staging.real, r.fsType, opts); err != nil {
			return internal("mount %s on %s: %v", dev.Path, r.staging.given, err)
		}
		crashpoint("NodeStageVolume/mounted")
	}
	if err := s.recordMount(rec, r.staging); err != nil {
		return err
	}
	if rec.FormattingSerial != "" {
		// Ending the permission to format again must be as durable as
		// granting it: after a power loss a record that still carried it
		// would have the next stage format a file system in use.
		rec.FormattingSerial = ""
		return s.writeStateDurable(r.volumeID, rec)
	}
	return s.writeState(r.volumeID, rec)
}

// staged reports whether a volume with a complete record is staged as
// asked: for raw block, its LUN attached; for a file system, mounted on the
// staging path.
func (s *Service) staged(ctx context.Context, prev *tracking.Info, r *stageRequest) (bool, error) {
	if r.fsType == fsRaw {
		dev, err := s.iscsi.Find(ctx, iscsiTarget(&prev.PublishInfo))
		return err == nil && dev != nil, nil
	}
	return s.stagingMounted(ctx, r)
}

// stagingMounted reports whether the staging path holds a healthy mount of
// the asked-for file system type; whose the mount is, newStage checked. A
// mount of another type is the spec's "staged incompatibly"
// (AlreadyExists); a corrupted one (its device went away) is removed so
// that it is mounted afresh.
func (s *Service) stagingMounted(ctx context.Context, r *stageRequest) (bool, error) {
	mis, err := s.mounter.mountsAt(r.staging.real)
	if err != nil || len(mis) == 0 {
		return false, err
	}
	if s.mounter.corrupted(ctx, r.staging.real) {
		return false, s.mounter.unmount(ctx, r.staging.real)
	}
	if got := mis[len(mis)-1].FsType; got != r.fsType {
		return false, alreadyExists("volume %s is staged at %s with a %s file system, not %s", r.volumeID, r.staging.given, got, r.fsType)
	}
	return true, nil
}

// mountOptions joins the publish context's options — as parsed at stage,
// or as Trident stored them ("-o nfsvers=3"), which are checked here like
// any other — and the capability's flags.
func mountOptions(fromContext string, flags []string) ([]string, error) {
	opts, err := parseOptionList(fromContext)
	if err == nil {
		opts, err = splitOptions(append(opts, flags...))
	}
	if err != nil {
		return nil, invalidArgument("mount options: %v", err)
	}
	return opts, nil
}

// NodeUnstageVolume undoes NodeStageVolume. A volume that is not staged, or
// whose state is gone, succeeds: kubelet retries a failed unstage forever
// (Trident #706, #572).
func (s *Service) NodeUnstageVolume(ctx context.Context, req *csi.NodeUnstageVolumeRequest) (*csi.NodeUnstageVolumeResponse, error) {
	if err := checkVolumeID(req.GetVolumeId()); err != nil {
		return nil, toStatus(err)
	}
	staging, err := s.confine(req.GetStagingTargetPath(), "staging target path")
	if err != nil {
		return nil, toStatus(err)
	}
	unlock, err := s.lock(ctx, req.GetVolumeId())
	if err != nil {
		return nil, toStatus(err)
	}
	defer unlock()
	if err := s.unstage(ctx, req.GetVolumeId(), staging); err != nil {
		return nil, toStatus(err)
	}
	return &csi.NodeUnstageVolumeResponse{}, nil
}

// unstage undoes a stage at staging, if the volume is staged there (see
// ownership.go). A volume that is not staged there succeeds and nothing is
// done: the spec's idempotent unstage.
func (s *Service) unstage(ctx context.Context, volumeID string, staging requestPath) error {
	log := logrus.WithContext(ctx).WithField("volume", volumeID)
	info, err := s.state.Read(volumeID)
	// Without a record only kubelet's staging path for the volume names it.
	trustPath := false
	switch {
	case errors.Is(err, tracking.ErrNotFound):
		info = nil
	case errors.Is(err, tracking.ErrCorrupt):
		// Without the state nothing can be detached; keeping kubelet in a
		// retry loop would not bring it back. Keep the file for the operator.
		log.WithError(err).Error("node state unreadable; unstaging without it, the LUN may stay attached")
		s.quarantine(ctx, volumeID)
		info = nil
	case err != nil:
		return internal("volume %s: %v", volumeID, err)
	}
	switch {
	case info == nil:
		trustPath = s.isKubeletStagingPathOf(volumeID, staging.given)
		if !trustPath {
			return nil
		}
	case filepath.Clean(info.StagingTargetPath) != staging.given:
		log.WithField("stagedAt", info.StagingTargetPath).Warn("unstage of a path the volume is not staged at; nothing to do")
		return nil
	default:
		// The CO unpublishes first (spec); a LUN detached under a live
		// mount would lose the pod's writes.
		if published := s.mountedTargets(info, ""); len(published) > 0 {
			return failedPrecondition("volume %s is still published at %s", volumeID, published[0])
		}
	}
	o, err := s.ownership(ctx, volumeID, info, false)
	if err != nil {
		return err
	}
	if _, err := s.checkMounts(ctx, o, staging, trustPath); err != nil {
		return err
	}
	unmount := func() error { return s.unmountStaging(ctx, staging) }
	if info != nil && info.Protocol() == tracking.ProtocolBlock {
		// The unmount writes: to a LUN whose every path is gone (unmapped on
		// ONTAP) it would wait for ever, queued by dm-multipath (docs/design/architecture.md §7.3).
		staged := unmount
		unmount = func() error { return s.iscsi.ReleaseDeadMapsDuring(ctx, iscsiTarget(&info.PublishInfo), staged) }
	}
	if err := unmount(); err != nil {
		return err
	}
	if info != nil {
		if err := s.detach(ctx, info); err != nil {
			return err
		}
	}
	if err := tracking.RemoveLegacy(staging.real); err != nil {
		return internal("remove Trident's %s: %v", tracking.LegacyPublishInfoFile, err)
	}
	if info != nil {
		if err := s.state.Delete(volumeID); err != nil {
			return internal("delete tracking file: %v", err)
		}
	}
	return nil
}

// unmountStaging removes what a stage mounted at the staging path.
func (s *Service) unmountStaging(ctx context.Context, staging requestPath) error {
	if err := s.mounter.unmount(ctx, staging.real); err != nil {
		return internal("unmount staging path %s: %v", staging.given, err)
	}
	crashpoint("NodeUnstageVolume/unmounted")
	// Trident 20.10 grew XFS on a temporary mount below the staging path.
	if err := s.mounter.cleanupPath(ctx, filepath.Join(staging.real, "tmp_mnt")); err != nil {
		return internal("clean up %s/tmp_mnt: %v", staging.given, err)
	}
	return nil
}

// detach logs out of an iSCSI volume's LUN.
func (s *Service) detach(ctx context.Context, info *tracking.Info) error {
	switch info.Protocol() {
	case tracking.ProtocolBlock:
		release, err := s.iscsiOps.acquire(ctx)
		if err != nil {
			return err
		}
		err = s.iscsi.Detach(ctx, iscsiTarget(&info.PublishInfo))
		release()
		if err != nil {
			return fmt.Errorf("detach LUN: %w", err)
		}
		crashpoint("NodeUnstageVolume/detached")
	case "":
		logrus.WithContext(ctx).Warn("node state has no publish info; nothing to detach, the LUN may stay attached")
	}
	return nil
}

// quarantine moves an unreadable tracking file aside (its name no longer
// ends in .json, so neither ontap-csi nor Trident reads it again).
func (s *Service) quarantine(ctx context.Context, volumeID string) {
	p, err := s.state.Path(volumeID)
	if err != nil {
		return
	}
	if err := os.Rename(p, p+".unreadable"); err != nil && !errors.Is(err, os.ErrNotExist) {
		logrus.WithContext(ctx).WithError(err).Warn("could not move the unreadable tracking file aside")
	}
}
