// Package tracking reads and writes the node's per-volume state in the
// formats Trident leaves on nodes, so that volumes staged by Trident can be
// published, expanded and unstaged by ontap-csi after an image swap, and the
// other way round for the 23.01+ format (docs/design/trident-compat.md §3.4).
//
// Two layouts exist on nodes:
//   - Trident 19.10–22.10: <tracking-dir>/<volumeID>.json holds only
//     {"stagingTargetPath": ...}; the publish info is in
//     <stagingTargetPath>/volumePublishInfo.json.
//   - Trident 23.01+: <tracking-dir>/<volumeID>.json holds everything: the
//     publish info, the staging path and the published target paths.
//
// Both are read; only the 23.01+ layout is written.
package tracking

import (
	"encoding/json"
	"path/filepath"
)

// PublishInfo is Trident's VolumePublishInfo as serialized on nodes. Trident
// nests several structs with embedded fields; the JSON is flat, and so is this
// type. It holds CHAP secrets: never log it.
type PublishInfo struct {
	Localhost         bool            `json:"localhost,omitempty"`
	HostIQN           []string        `json:"hostIQN,omitempty"`
	HostIP            []string        `json:"hostIP,omitempty"`
	BackendUUID       string          `json:"backendUUID,omitempty"`
	Nodes             json.RawMessage `json:"nodes,omitempty"` // kept verbatim, unused on the node
	HostName          string          `json:"hostName,omitempty"`
	FilesystemType    string          `json:"fstype,omitempty"`
	SharedTarget      bool            `json:"sharedTarget,omitempty"`
	DevicePath        string          `json:"devicePath,omitempty"`
	RawDevicePath     string          `json:"rawDevicePath,omitempty"` // 23.01–23.04 name of devicePath
	Unmanaged         bool            `json:"unmanaged,omitempty"`
	StagingMountpoint string          `json:"stagingMountpoint,omitempty"`
	TridentUUID       string          `json:"tridentUUID,omitempty"`
	LUKSEncryption    string          `json:"LUKSEncryption,omitempty"`
	SANType           string          `json:"SANType,omitempty"`

	// iSCSI access.
	IscsiTargetPortal string   `json:"iscsiTargetPortal,omitempty"`
	IscsiPortals      []string `json:"iscsiPortals,omitempty"`
	IscsiTargetIQN    string   `json:"iscsiTargetIqn,omitempty"`
	IscsiLunNumber    int32    `json:"iscsiLunNumber,omitempty"`
	IscsiInterface    string   `json:"iscsiInterface,omitempty"`
	IscsiIgroup       string   `json:"iscsiIgroup,omitempty"`
	IscsiLunSerial    string   `json:"iscsiLunSerial,omitempty"`
	// Trident writes useCHAP without omitempty.
	UseCHAP              bool   `json:"useCHAP"`
	IscsiUsername        string `json:"iscsiUsername,omitempty"`
	IscsiInitiatorSecret string `json:"iscsiInitiatorSecret,omitempty"`
	IscsiTargetUsername  string `json:"iscsiTargetUsername,omitempty"`
	IscsiTargetSecret    string `json:"iscsiTargetSecret,omitempty"`

	// NFS access.
	NfsServerIP string `json:"nfsServerIp,omitempty"`
	NfsPath     string `json:"nfsPath,omitempty"`
	NfsUniqueID string `json:"nfsUniqueID,omitempty"`

	MountOptions  string `json:"mountOptions,omitempty"`
	FormatOptions string `json:"formatOptions,omitempty"`
	ReadOnly      bool   `json:"readOnly,omitempty"`
	AccessMode    int32  `json:"accessMode,omitempty"`
}

// Protocols, as Trident's publish_context "protocol" key names them.
const (
	ProtocolFile  = "file"
	ProtocolBlock = "block"
)

// FilesystemNFS is the fstype Trident records for NFS volumes.
const FilesystemNFS = "nfs"

// Protocol derives the volume's protocol from what Trident records: NFS
// volumes have an NFS server, iSCSI volumes a target IQN.
func (p *PublishInfo) Protocol() string {
	switch {
	case p.NfsServerIP != "" || p.FilesystemType == FilesystemNFS:
		return ProtocolFile
	case p.IscsiTargetIQN != "":
		return ProtocolBlock
	}
	return ""
}

// Device returns the device path Trident or ontap-csi recorded at stage.
func (p *PublishInfo) Device() string {
	if p.DevicePath != "" {
		return p.DevicePath
	}
	return p.RawDevicePath
}

// Portals returns every iSCSI portal: Trident stores the first one apart.
func (p *PublishInfo) Portals() []string {
	out := make([]string, 0, 1+len(p.IscsiPortals))
	if p.IscsiTargetPortal != "" {
		out = append(out, p.IscsiTargetPortal)
	}
	for _, q := range p.IscsiPortals {
		if q != "" && q != p.IscsiTargetPortal {
			out = append(out, q)
		}
	}
	return out
}

// Info is one volume's node state: Trident's 23.01+ VolumeTrackingInfo.
type Info struct {
	PublishInfo
	// VolumeTrackingInfoPath is written by Trident (an untagged field); it is
	// kept so that files round-trip, and not used.
	VolumeTrackingInfoPath string `json:"VolumeTrackingInfoPath"`
	StagingTargetPath      string `json:"stagingTargetPath"`
	// PublishedPaths are the target paths the volume is published at. Each
	// is recorded before its mount is made and dropped after it is gone, so
	// a crash between the two leaves a record the next call reconciles.
	PublishedPaths map[string]struct{} `json:"publishedTargetPaths"`
	// FormattingSerial is the LUN's serial while a stage formats it. The
	// device was provably empty when that mkfs started, so a stage retried
	// after a crash in the middle of it may format again, although what the
	// interrupted mkfs left now makes the device look used. Trident ignores
	// the key.
	FormattingSerial string `json:"ontapCsiFormatting,omitempty"`
	// Mounts identifies, by path (the staging path, targets), each mount a
	// stage or publish made: "<major>:<minor>:<root>" of its mountinfo line.
	// Unpublish and unstage compare what is mounted there with it, so that
	// they remove this volume's mount and never another's (docs/errors.md).
	// Trident ignores the key, and a Trident that rewrites the file drops
	// it; the node then recognises the mount by its source or device.
	Mounts map[string]string `json:"ontapCsiMounts,omitempty"`

	// Legacy is set when the state was read from Trident's pre-23.01 layout;
	// the next Write upgrades it and Delete removes the legacy file too.
	Legacy bool `json:"-"`
}

// IsPublishedAt reports whether target is recorded as published.
func (i *Info) IsPublishedAt(target string) bool {
	_, ok := i.PublishedPaths[target]
	return ok
}

// AddPublished records target as published.
func (i *Info) AddPublished(target string) {
	if i.PublishedPaths == nil {
		i.PublishedPaths = map[string]struct{}{}
	}
	i.PublishedPaths[target] = struct{}{}
}

// RemovePublished forgets target and the mount made there.
func (i *Info) RemovePublished(target string) {
	delete(i.PublishedPaths, target)
	delete(i.Mounts, target)
}

// RecordMount notes the identity of the mount made at path.
func (i *Info) RecordMount(path, id string) {
	if i.Mounts == nil {
		i.Mounts = map[string]string{}
	}
	i.Mounts[path] = id
}

// MountAt returns the identity of the mount recorded at path, "" if none.
func (i *Info) MountAt(path string) string { return i.Mounts[path] }

// MadeMount reports whether id is a mount this volume's stage or publish
// recorded making, at any of its paths (a target's bind shares the
// identity of the staging mount it binds).
func (i *Info) MadeMount(id string) bool {
	for _, m := range i.Mounts {
		if m == id {
			return true
		}
	}
	return false
}

// Claims reports whether the state names path as the volume's staging path
// or one of its targets.
func (i *Info) Claims(path string) bool {
	return filepath.Clean(i.StagingTargetPath) == path || i.IsPublishedAt(path)
}
