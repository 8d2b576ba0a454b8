package node

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc/codes"

	"github.com/ontap-csi/ontap-csi/node/tracking"
)

// NodeExpandVolume grows an iSCSI volume's device and file system after the
// controller grew the LUN. NFS volumes need nothing on the node.
func (s *Service) NodeExpandVolume(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	r, err := s.checkExpand(req)
	if err != nil {
		return nil, toStatus(err)
	}
	resp, err := s.expand(ctx, r)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

// expandRequest is a NodeExpandVolume request after validation.
type expandRequest struct {
	volumeID string
	path     requestPath // the volume path
	cap      volumeCap   // zero when the request has none
	required int64       // bytes; 0 when not given
}

// checkExpand validates everything in the request before anything is
// looked up or changed.
func (s *Service) checkExpand(req *csi.NodeExpandVolumeRequest) (*expandRequest, error) {
	r := &expandRequest{volumeID: req.GetVolumeId()}
	if err := checkVolumeID(r.volumeID); err != nil {
		return nil, err
	}
	if req.GetVolumePath() == "" {
		return nil, invalidArgument("volume path missing")
	}
	if req.GetVolumeCapability() != nil {
		var err error
		if r.cap, err = checkCapability(req.GetVolumeCapability()); err != nil {
			return nil, err
		}
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	if required < 0 || limit < 0 || (limit > 0 && required > limit) {
		return nil, newError(codes.OutOfRange, "capacity range required %d, limit %d is not a range", required, limit)
	}
	r.required = required
	// A path outside the kubelet directory cannot hold one of our volumes.
	real, err := s.paths.confine(req.GetVolumePath())
	if err != nil {
		return nil, notFound("volume %s is not at %q: %v", r.volumeID, req.GetVolumePath(), err)
	}
	r.path = requestPath{given: filepath.Clean(req.GetVolumePath()), real: real}
	return r, nil
}

func (s *Service) expand(ctx context.Context, r *expandRequest) (*csi.NodeExpandVolumeResponse, error) {
	unlock, err := s.lock(ctx, r.volumeID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	info, err := s.readState(ctx, r.volumeID)
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, notFound("volume %s is not staged on this node", r.volumeID)
	}
	if err := s.volumeAt(ctx, r.volumeID, info, r.path); err != nil {
		return nil, err
	}
	switch info.Protocol() {
	case tracking.ProtocolFile:
		return &csi.NodeExpandVolumeResponse{}, nil // NFS grows on ONTAP alone
	case "":
		return nil, failedPrecondition("volume %s: node state has no publish info", r.volumeID)
	}

	release, err := s.iscsiOps.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	// Resize waits (bounded) for the LUN to reach the required size;
	// short of it, kubelet retries.
	size, err := s.iscsi.Resize(ctx, iscsiTarget(&info.PublishInfo), r.required)
	if err != nil {
		return nil, fmt.Errorf("grow the LUN of volume %s: %w", r.volumeID, err)
	}
	if r.cap.block || info.FilesystemType == fsRaw {
		return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
	}
	if err := s.growStagedFilesystem(ctx, r, info); err != nil {
		return nil, err
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": r.volumeID, "bytes": size}).Info("volume expanded")
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

// growStagedFilesystem grows the file system of an iSCSI volume, mounted on
// its staging path (a volume Trident staged is mounted there first), to its
// grown device.
func (s *Service) growStagedFilesystem(ctx context.Context, r *expandRequest, info *tracking.Info) error {
	o, err := s.ownership(ctx, r.volumeID, info, true)
	if err != nil {
		return err
	}
	if err := s.ensureStagingMount(ctx, o, r.cap.flags); err != nil {
		return err
	}
	dev, err := s.findDevice(ctx, r.volumeID, info)
	if err != nil {
		return err
	}
	staging, err := s.paths.confine(info.StagingTargetPath)
	if err != nil {
		return internal("%v", err)
	}
	return s.growFilesystem(ctx, dev.Path, staging, info.FilesystemType)
}

// volumeAt checks that a volume path of an expand or stats call is one of
// the volume's: its staging path, a target its record names, or a target
// whose mount is this volume's (see ownership.go; Trident 20.10 recorded no
// targets). Anything else is NotFound, and nothing is done there.
func (s *Service) volumeAt(ctx context.Context, volumeID string, info *tracking.Info, p requestPath) error {
	if filepath.Clean(info.StagingTargetPath) == p.given || info.IsPublishedAt(p.given) {
		return nil
	}
	mis, err := s.mounter.mountsAt(p.real)
	if err != nil {
		return internal("%v", err)
	}
	if len(mis) > 0 {
		o, err := s.ownership(ctx, volumeID, info, false)
		if err != nil {
			return err
		}
		top := mis[len(mis)-1]
		if o.another(p.given, &top) == "" && (s.isKubeletPathOf(volumeID, p.given) || o.mine(p.given, s.mounter.seen(p.real), top)) {
			return nil
		}
	}
	return notFound("the volume is not at %s", p.given)
}
