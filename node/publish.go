package node

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
	"github.com/ontap-csi/ontap-csi/node/tracking"
)

// publishRequest is a NodePublishVolume request after validation.
type publishRequest struct {
	volumeID string
	target   requestPath
	staging  requestPath
	cap      volumeCap
	readOnly bool
}

// NodePublishVolume makes a staged volume available at the target path:
// NFS mounts the export there; iSCSI bind-mounts the staging mount (or the
// device, for raw block).
func (s *Service) NodePublishVolume(ctx context.Context, req *csi.NodePublishVolumeRequest) (*csi.NodePublishVolumeResponse, error) {
	r, err := s.checkPublish(req)
	if err != nil {
		return nil, toStatus(err)
	}
	unlock, err := s.lock(ctx, r.volumeID)
	if err != nil {
		return nil, toStatus(err)
	}
	defer unlock()
	if err := s.publish(ctx, r); err != nil {
		return nil, toStatus(err)
	}
	return &csi.NodePublishVolumeResponse{}, nil
}

func (s *Service) checkPublish(req *csi.NodePublishVolumeRequest) (*publishRequest, error) {
	if err := checkVolumeID(req.GetVolumeId()); err != nil {
		return nil, err
	}
	target, err := s.confine(req.GetTargetPath(), "target path")
	if err != nil {
		return nil, err
	}
	vc, err := checkCapability(req.GetVolumeCapability())
	if err != nil {
		return nil, err
	}
	if req.GetStagingTargetPath() == "" {
		// The plugin has STAGE_UNSTAGE_VOLUME: the spec's answer to a
		// publish without a staging path.
		return nil, failedPrecondition("staging target path missing; this plugin stages volumes")
	}
	staging, err := s.confine(req.GetStagingTargetPath(), "staging target path")
	if err != nil {
		return nil, err
	}
	if target.given == staging.given {
		return nil, invalidArgument("target path and staging target path are the same")
	}
	// The state recorded at stage is what publish uses; a publish context
	// that came along is still checked, so nothing unsafe passes unseen.
	if len(req.GetPublishContext()) > 0 {
		if _, err := parsePublishContext(req.GetPublishContext()); err != nil {
			return nil, err
		}
	}
	return &publishRequest{
		volumeID: req.GetVolumeId(), target: target, staging: staging, cap: vc, readOnly: req.GetReadonly() || vc.readerOnly(),
	}, nil
}

func (s *Service) publish(ctx context.Context, r *publishRequest) error {
	info, err := s.readState(ctx, r.volumeID)
	if err != nil {
		return err
	}
	if info == nil {
		return failedPrecondition("volume %s is not staged on this node", r.volumeID)
	}
	if filepath.Clean(info.StagingTargetPath) != r.staging.given {
		return failedPrecondition("volume %s is staged at %s, not %s", r.volumeID, info.StagingTargetPath, r.staging.given)
	}
	protocol := info.Protocol()
	rawBlock := protocol == tracking.ProtocolBlock && info.FilesystemType == fsRaw
	switch {
	case protocol == "":
		return failedPrecondition("volume %s: node state has no publish info; stage it again", r.volumeID)
	case r.cap.block && !rawBlock:
		return invalidArgument("volume %s is not staged for raw block access", r.volumeID)
	case !r.cap.block && rawBlock:
		return invalidArgument("volume %s is staged for raw block access; a mount capability cannot publish it", r.volumeID)
	}

	o, err := s.ownership(ctx, r.volumeID, info, true)
	if err != nil {
		return err
	}
	if done, err := s.alreadyPublished(ctx, o, r); done || err != nil {
		return err
	}
	if r.cap.mode == csi.VolumeCapability_AccessMode_SINGLE_NODE_SINGLE_WRITER {
		if others := s.mountedTargets(info, r.target.given); len(others) > 0 {
			return failedPrecondition("volume %s has SINGLE_NODE_SINGLE_WRITER access and is already published at %s", r.volumeID, others[0])
		}
	}

	if !rawBlock && protocol == tracking.ProtocolBlock {
		// What the target will bind must be this volume's file system.
		if err := s.ensureStagingMount(ctx, o, r.cap.flags); err != nil {
			return err
		}
	}
	// Record first: a crash after the mount must not leave a mount that
	// the next publish takes for another volume's.
	info.AddPublished(r.target.given)
	if err := s.writeState(r.volumeID, info); err != nil {
		return err
	}
	_, statErr := os.Lstat(r.target.real)
	existed := statErr == nil
	var perr error
	switch {
	case protocol == tracking.ProtocolFile:
		perr = s.publishNFS(ctx, info, r)
	case rawBlock:
		perr = s.publishRawBlock(ctx, info, r)
	default:
		perr = s.publishFilesystem(ctx, info, r)
	}
	if perr == nil {
		if perr = s.recordMount(info, r.target); perr == nil {
			return s.writeState(r.volumeID, info)
		}
	}
	// Leave no half-made target or stale record behind; kubelet retries
	// from scratch. A target that was there before stays.
	cleanup := s.mounter.cleanupPath
	if existed {
		cleanup = s.mounter.unmount
	}
	if err := cleanup(ctx, r.target.real); err != nil {
		logrus.WithContext(ctx).WithError(err).Warn("could not clean up the target after a failed publish")
	} else {
		info.RemovePublished(r.target.given)
		_ = s.state.Write(r.volumeID, info)
	}
	return perr
}

// mountedTargets returns the volume's recorded targets, but except, that are
// still mounted.
func (s *Service) mountedTargets(info *tracking.Info, except string) []string {
	var out []string
	for p := range info.PublishedPaths {
		if p == except {
			continue
		}
		if real, err := s.paths.confine(p); err == nil {
			if mounted, _ := s.mounter.isMountPoint(real); mounted {
				out = append(out, p)
			}
		}
	}
	slices.Sort(out)
	return out
}

// alreadyPublished handles a target that already has a mount. What is
// mounted there must be this volume's (checkMounts; a target kubelet made
// for this volume counts, for mounts Trident 20.10 made without a record),
// and then publish succeeds, after making a writable mount read-only if
// that was asked and a crash interrupted it. A corrupted mount is removed
// and the target published afresh. The target must not be another volume's
// either: named in its record, or kubelet's path for it.
func (s *Service) alreadyPublished(ctx context.Context, o *ownership, r *publishRequest) (bool, error) {
	if id := s.kubeletPathVolume(r.target.given); id != "" && id != r.volumeID && o.others[id] != nil {
		return false, failedPrecondition("%s is where kubelet publishes volume %s, not %s; nothing was changed", r.target.given, id, r.volumeID)
	}
	c, err := s.checkMounts(ctx, o, r.target, s.trustKubeletPath(r.volumeID, o.info, r.target.given))
	if err != nil || c.mounts == 0 {
		return false, err
	}
	if s.mounter.corrupted(ctx, r.target.real) {
		logrus.WithContext(ctx).WithField("target", r.target.given).Warn("target is a corrupted mount; remounting")
		return false, s.mounter.unmount(ctx, r.target.real)
	}
	mis, err := s.mounter.mountsAt(r.target.real)
	if err != nil || len(mis) == 0 {
		return false, err
	}
	ro := slices.Contains(mis[len(mis)-1].MountOptions, "ro")
	switch {
	case r.readOnly && !ro:
		if err := s.mounter.remountReadOnly(ctx, r.target.real); err != nil {
			return false, internal("make %s read-only: %v", r.target.given, err)
		}
	case !r.readOnly && ro:
		return false, alreadyExists("volume %s is published read-only at %s; asked read-write", r.volumeID, r.target.given)
	}
	if !o.info.IsPublishedAt(r.target.given) {
		o.info.AddPublished(r.target.given)
		return true, s.writeState(r.volumeID, o.info)
	}
	return true, nil
}

// kubeletPathVolume returns the volume (PV name) a kubelet target path is
// for, "" for any other path.
func (s *Service) kubeletPathVolume(target string) string {
	rel, err := filepath.Rel(s.paths.base, target)
	if err != nil {
		return ""
	}
	el := strings.Split(rel, "/")
	switch {
	case len(el) == 6 && el[0] == "pods" && el[2] == "volumes" && el[3] == "kubernetes.io~csi" && el[5] == "mount":
		return el[4]
	case len(el) == 7 && strings.Join(el[:5], "/") == "plugins/kubernetes.io/csi/volumeDevices/publish":
		return el[5]
	}
	return ""
}

// isKubeletPathOf reports whether target is where kubelet publishes the
// volume for a pod: <kubelet>/pods/<uid>/volumes/kubernetes.io~csi/<pv>/mount
// for a file system, <kubelet>/plugins/kubernetes.io/csi/volumeDevices/
// publish/<pv>/<uid> for raw block (the volume id is the PV name in
// Trident).
func (s *Service) isKubeletPathOf(volumeID, target string) bool {
	return s.kubeletPathVolume(target) == volumeID
}

func (s *Service) publishNFS(ctx context.Context, info *tracking.Info, r *publishRequest) error {
	opts, err := mountOptions(info.MountOptions, r.cap.flags)
	if err != nil {
		return err
	}
	if r.readOnly {
		opts = append(slices.DeleteFunc(opts, func(o string) bool { return o == "rw" }), "ro")
	}
	if err := os.Mkdir(r.target.real, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return internal("create target %s: %v", r.target.given, err)
	}
	release, err := s.nfsMount.acquire(ctx)
	if err != nil {
		return err
	}
	defer release()
	source := nfsSource(info.NfsServerIP, info.NfsPath)
	if err := s.mounter.mount(ctx, source, r.target.real, "nfs", opts); err != nil {
		return nfsMountError(source, err)
	}
	return nil
}

// nfsMountError maps mount.nfs failures the way Trident does: access denied
// (the export policy does not admit this node, Trident #965) is
// PermissionDenied, a rejected option InvalidArgument, the rest Internal.
func nfsMountError(source string, err error) error {
	var ee *hostexec.ExitError
	msg := err.Error()
	if errors.As(err, &ee) {
		msg = strings.ToLower(ee.Stderr)
	}
	switch {
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return err
	case strings.Contains(msg, "access denied"), strings.Contains(msg, "permission denied"):
		return permissionDenied("mount %s: %v", source, err)
	case strings.Contains(msg, "invalid argument"), strings.Contains(msg, "incorrect mount option"):
		return invalidArgument("mount %s: %v", source, err)
	}
	return internal("mount %s: %v", source, err)
}

// publishFilesystem binds the staging mount, which publish has checked, on
// the target.
func (s *Service) publishFilesystem(ctx context.Context, info *tracking.Info, r *publishRequest) error {
	staging, err := s.paths.confine(info.StagingTargetPath)
	if err != nil {
		return internal("%v", err)
	}
	if err := os.Mkdir(r.target.real, 0o750); err != nil && !errors.Is(err, os.ErrExist) {
		return internal("create target %s: %v", r.target.given, err)
	}
	if err := s.mounter.bind(ctx, staging, r.target.real, r.readOnly); err != nil {
		return internal("bind %s on %s: %v", info.StagingTargetPath, r.target.given, err)
	}
	return nil
}

// publishRawBlock binds the device onto a file at the target path.
func (s *Service) publishRawBlock(ctx context.Context, info *tracking.Info, r *publishRequest) error {
	dev, err := s.findDevice(ctx, r.volumeID, info)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(r.target.real), 0o750); err != nil {
		return internal("create parent of %s: %v", r.target.given, err)
	}
	f, err := os.OpenFile(r.target.real, os.O_CREATE|os.O_WRONLY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o640)
	if err != nil {
		return internal("create target file %s: %v", r.target.given, err)
	}
	f.Close()
	if err := s.mounter.bind(ctx, dev.Path, r.target.real, r.readOnly); err != nil {
		return internal("bind %s on %s: %v", dev.Path, r.target.given, err)
	}
	return nil
}

// NodeUnpublishVolume unmounts the target and removes it. A target that is
// gone or not mounted succeeds (Trident #572 answered NotFound and left pods
// Terminating forever).
func (s *Service) NodeUnpublishVolume(ctx context.Context, req *csi.NodeUnpublishVolumeRequest) (*csi.NodeUnpublishVolumeResponse, error) {
	if err := checkVolumeID(req.GetVolumeId()); err != nil {
		return nil, toStatus(err)
	}
	target, err := s.confine(req.GetTargetPath(), "target path")
	if err != nil {
		return nil, toStatus(err)
	}
	unlock, err := s.lock(ctx, req.GetVolumeId())
	if err != nil {
		return nil, toStatus(err)
	}
	defer unlock()
	if err := s.unpublish(ctx, req.GetVolumeId(), target); err != nil {
		return nil, toStatus(err)
	}
	return &csi.NodeUnpublishVolumeResponse{}, nil
}

// unpublish undoes a publish at target, if the target holds this volume
// (see ownership.go). A target with nothing of this volume succeeds and is
// left as it is: the spec's idempotent unpublish.
func (s *Service) unpublish(ctx context.Context, volumeID string, target requestPath) error {
	info, err := s.state.Read(volumeID)
	switch {
	case errors.Is(err, tracking.ErrNotFound), errors.Is(err, tracking.ErrCorrupt):
		info = nil // no record: only kubelet's path for the volume names it
	case err != nil:
		return internal("volume %s: %v", volumeID, err)
	}
	// Trident 20.10 recorded no targets: kubelet's path for this volume
	// is the volume's too.
	claimed := s.isKubeletPathOf(volumeID, target.given) || info != nil && info.IsPublishedAt(target.given)
	if !claimed {
		if mounted, err := s.mounter.isMountPoint(target.real); err != nil || !mounted {
			return err // nothing of this volume here: nothing to undo
		}
	}
	o, err := s.ownership(ctx, volumeID, info, false)
	if err != nil {
		return err
	}
	c, err := s.checkMounts(ctx, o, target, s.trustKubeletPath(volumeID, info, target.given))
	if err != nil {
		return err
	}
	if !claimed && c.mine == 0 {
		return nil // only a dead mount that is not this volume's
	}
	if err := s.mounter.unmount(ctx, target.real); err != nil {
		return internal("unmount %s: %v", target.given, err)
	}
	if err := os.Remove(target.real); err != nil && !errors.Is(err, os.ErrNotExist) {
		if !errors.Is(err, unix.ENOTEMPTY) {
			return internal("remove target %s: %v", target.given, err)
		}
		// Not ours to delete: something wrote into the directory while
		// nothing was mounted on it. Trident also only tries.
		logrus.WithContext(ctx).WithField("target", target.given).Warn("target directory is not empty after unmount; leaving it")
	}
	if info == nil || !info.IsPublishedAt(target.given) {
		return nil
	}
	info.RemovePublished(target.given)
	return s.writeState(volumeID, info)
}
