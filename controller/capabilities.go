package controller

import (
	"fmt"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/backends"
)

// blockFSTypes are the filesystems a node formats on a LUN (Trident's set).
var blockFSTypes = map[string]bool{"ext3": true, "ext4": true, "xfs": true}

// volumeUse sums up a request's volume capabilities.
type volumeUse struct {
	access backends.AccessType
	// fsType is the capability's fs_type, lower case; "" when not given.
	fsType     string
	mountFlags []string
	// multiNodeWriter: several nodes may write (RWX). Trident serves it
	// from file volumes, or from block volumes used raw.
	multiNodeWriter bool
}

// parseCapabilities checks the capabilities of one request. They must all
// have an access mode and agree on block versus mount.
func parseCapabilities(caps []*csi.VolumeCapability) (*volumeUse, error) {
	if len(caps) == 0 {
		return nil, invalidArg("volume capabilities are required")
	}
	u := &volumeUse{}
	for i, c := range caps {
		if c == nil {
			return nil, invalidArg("volume capability %d is empty", i)
		}
		var access backends.AccessType
		switch t := c.GetAccessType().(type) {
		case *csi.VolumeCapability_Block:
			access = backends.AccessBlock
		case *csi.VolumeCapability_Mount:
			access = backends.AccessMount
			fs := strings.ToLower(t.Mount.GetFsType())
			if fs != "" && u.fsType != "" && fs != u.fsType {
				return nil, invalidArg("volume capabilities ask for two filesystem types, %q and %q", u.fsType, fs)
			}
			if fs != "" {
				u.fsType = fs
			}
			u.mountFlags = append(u.mountFlags, t.Mount.GetMountFlags()...)
		default:
			return nil, invalidArg("volume capability %d has no access type (block or mount)", i)
		}
		if u.access != "" && u.access != access {
			return nil, invalidArg("volume capabilities mix block and mount access")
		}
		u.access = access
		mode := c.GetAccessMode().GetMode()
		if err := checkAccessMode(fmt.Sprintf("volume capability %d: access_mode.mode", i), mode); err != nil {
			return nil, err
		}
		switch mode {
		case csi.VolumeCapability_AccessMode_MULTI_NODE_SINGLE_WRITER, csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER:
			u.multiNodeWriter = true
		}
	}
	return u, nil
}

// supportedBy reports why a backend protocol cannot serve this use, or nil.
func (u *volumeUse) supportedBy(p backends.Protocol) error {
	switch p {
	case backends.ProtocolFile:
		if u.access == backends.AccessBlock {
			return fmt.Errorf("raw block access needs an iSCSI (ontap-san) backend")
		}
		// Trident ignores fs_type on NFS volumes: a StorageClass with
		// fsType ext4 is common and harmless there.
	case backends.ProtocolBlock:
		if u.access == backends.AccessMount {
			if u.multiNodeWriter {
				return fmt.Errorf("a filesystem on an iSCSI LUN cannot be written from several nodes; use an NFS (ontap-nas) backend or raw block")
			}
			if u.fsType != "" && !blockFSTypes[u.fsType] {
				return fmt.Errorf("filesystem type %q is not supported on iSCSI LUNs (ext3, ext4, xfs)", u.fsType)
			}
		}
	default:
		return fmt.Errorf("unknown protocol %q", p)
	}
	return nil
}

// fitsVolume reports why an existing volume cannot be used this way, or nil.
func (u *volumeUse) fitsVolume(protocol backends.Protocol, v *backends.Volume) error {
	if err := u.supportedBy(protocol); err != nil {
		return err
	}
	if protocol != backends.ProtocolBlock || v.AccessType == "" {
		return nil
	}
	if u.access != v.AccessType {
		return fmt.Errorf("volume %s was created for %s access, not %s", v.ID, v.AccessType, u.access)
	}
	if u.access == backends.AccessMount && u.fsType != "" && v.FSType != "" && u.fsType != v.FSType {
		return fmt.Errorf("volume %s holds a %s filesystem, not %s", v.ID, v.FSType, u.fsType)
	}
	return nil
}
