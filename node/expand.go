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
	resp, err := s.expand(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return resp, nil
}

func (s *Service) expand(ctx context.Context, req *csi.NodeExpandVolumeRequest) (*csi.NodeExpandVolumeResponse, error) {
	volumeID := req.GetVolumeId()
	if err := checkVolumeID(volumeID); err != nil {
		return nil, err
	}
	if req.GetVolumePath() == "" {
		return nil, invalidArgument("volume path missing")
	}
	var vc volumeCap
	if req.GetVolumeCapability() != nil {
		var err error
		if vc, err = checkCapability(req.GetVolumeCapability()); err != nil {
			return nil, err
		}
	}
	required, limit := req.GetCapacityRange().GetRequiredBytes(), req.GetCapacityRange().GetLimitBytes()
	if required < 0 || limit < 0 || (limit > 0 && required > limit) {
		return nil, newError(codes.OutOfRange, "capacity range required %d, limit %d is not a range", required, limit)
	}
	// A path outside the kubelet directory cannot hold one of our volumes.
	volumePath, err := s.paths.confine(req.GetVolumePath())
	if err != nil {
		return nil, notFound("volume %s is not at %q: %v", volumeID, req.GetVolumePath(), err)
	}

	unlock, err := s.lock(ctx, volumeID)
	if err != nil {
		return nil, err
	}
	defer unlock()
	info, err := s.readState(ctx, volumeID)
	if err != nil {
		return nil, err
	}
	if info == nil {
		return nil, notFound("volume %s is not staged on this node", volumeID)
	}
	if err := s.volumeAt(volumeID, info, filepath.Clean(req.GetVolumePath()), volumePath); err != nil {
		return nil, err
	}
	switch info.Protocol() {
	case tracking.ProtocolFile:
		return &csi.NodeExpandVolumeResponse{}, nil // NFS grows on ONTAP alone
	case "":
		return nil, failedPrecondition("volume %s: node state has no publish info", volumeID)
	}

	release, err := s.iscsiOps.acquire(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	// Resize waits (bounded) for the LUN to reach the required size;
	// short of it, kubelet retries.
	size, err := s.iscsi.Resize(ctx, iscsiTarget(&info.PublishInfo), required)
	if err != nil {
		return nil, fmt.Errorf("grow the LUN of volume %s: %w", volumeID, err)
	}
	if vc.block || info.FilesystemType == fsRaw {
		return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
	}
	if err := s.ensureStagingMount(ctx, volumeID, info, vc.flags); err != nil {
		return nil, err
	}
	dev, err := s.findDevice(ctx, volumeID, info)
	if err != nil {
		return nil, err
	}
	staging, err := s.paths.confine(info.StagingTargetPath)
	if err != nil {
		return nil, internal("%v", err)
	}
	if err := s.growFilesystem(ctx, dev.Path, staging, info.FilesystemType); err != nil {
		return nil, err
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": volumeID, "bytes": size}).Info("volume expanded")
	return &csi.NodeExpandVolumeResponse{CapacityBytes: size}, nil
}

// volumeAt checks that a volume path of an expand or stats call is one of
// the volume's: its staging path, or a target that holds the volume (see
// holdsVolume). Anything else is NotFound, and nothing is done there.
func (s *Service) volumeAt(volumeID string, info *tracking.Info, given, real string) error {
	if filepath.Clean(info.StagingTargetPath) == given {
		return nil
	}
	mis, err := s.mounter.mountsAt(real)
	if err != nil {
		return internal("%v", err)
	}
	if info.IsPublishedAt(given) || (len(mis) > 0 && s.holdsVolume(volumeID, info, given, mis[len(mis)-1])) {
		return nil
	}
	return notFound("the volume is not at %s", given)
}
