package node

import (
	"context"
	"fmt"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/node/iscsi"
	"github.com/ontap-csi/ontap-csi/node/tracking"
)

// iscsiTarget is the LUN a publish info describes.
func iscsiTarget(pi *tracking.PublishInfo) iscsi.Target {
	t := iscsi.Target{
		IQN:       pi.IscsiTargetIQN,
		Portals:   pi.Portals(),
		LUN:       pi.IscsiLunNumber,
		Serial:    pi.IscsiLunSerial,
		Interface: pi.IscsiInterface,
		Shared:    pi.SharedTarget,
	}
	if pi.UseCHAP {
		t.CHAP = &iscsi.CHAP{
			Username:        pi.IscsiUsername,
			InitiatorSecret: pi.IscsiInitiatorSecret,
			TargetUsername:  pi.IscsiTargetUsername,
			TargetSecret:    pi.IscsiTargetSecret,
		}
	}
	return t
}

// findDevice returns the attached device of an iSCSI volume. Not attached is
// FailedPrecondition: only a new NodeStage can attach it.
func (s *Service) findDevice(ctx context.Context, volumeID string, info *tracking.Info) (*iscsi.Device, error) {
	dev, err := s.iscsi.Find(ctx, iscsiTarget(&info.PublishInfo))
	if err != nil {
		return nil, fmt.Errorf("find the LUN of volume %s: %w", volumeID, err)
	}
	if dev == nil {
		return nil, failedPrecondition("the LUN of volume %s is not attached to this node", volumeID)
	}
	return dev, nil
}

// ensureStagingMount makes sure an iSCSI volume's file system is mounted on
// its staging path. It is a no-op for volumes ontap-csi staged, once the
// mount there is known to be this volume's LUN: a publish must never bind
// another volume's file system into a pod. A volume staged by Trident
// (which never mounted the staging path) is adopted here. It never
// formats: a device without the recorded file system is an error.
func (s *Service) ensureStagingMount(ctx context.Context, o *ownership, flags []string) error {
	info, volumeID := o.info, o.volumeID
	staging, err := s.confine(info.StagingTargetPath, "recorded staging path")
	if err != nil {
		return internal("volume %s: %v", volumeID, err)
	}
	c, err := s.checkMounts(ctx, o, staging, false)
	if err != nil {
		return err
	}
	if c.mine > 0 && !s.mounter.corrupted(ctx, staging.real) {
		return nil
	}
	if c.mounts > 0 {
		if err := s.mounter.unmount(ctx, staging.real); err != nil {
			return internal("unmount corrupted staging mount %s: %v", staging.given, err)
		}
	}
	dev, err := s.findDevice(ctx, volumeID, info)
	if err != nil {
		return err
	}
	fsType, _, err := s.signatures(ctx, dev.Path)
	if err != nil {
		return internal("%v", err)
	}
	if fsType == "" || (info.FilesystemType != "" && fsType != info.FilesystemType) {
		return failedPrecondition("device %s of volume %s has file system %q, the node state says %q", dev.Path, volumeID, fsType, info.FilesystemType)
	}
	opts, err := mountOptions(info.MountOptions, flags)
	if err != nil {
		return err
	}
	if err := s.mounter.mount(ctx, dev.Path, staging.real, fsType, opts); err != nil {
		return internal("mount %s on staging path %s: %v", dev.Path, staging.given, err)
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": volumeID, "device": dev.Path}).Info("mounted the staging path of a volume staged without it (Trident)")
	return nil
}
