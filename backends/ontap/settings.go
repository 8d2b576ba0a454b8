package ontap

import (
	"maps"
	"math"
	"slices"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
)

// settings are the resolved attributes of a new volume.
type settings struct {
	config.VolumeDefaults
	snapshotReserve int
}

// resolve lays a request's options over the pool's defaults.
func (d *driver) resolve(req *backends.CreateRequest) (*settings, error) {
	s := &settings{VolumeDefaults: d.poolDefaults(req.Pool)}
	o := req.Options
	set := func(dst *string, v string) {
		if v != "" {
			*dst = v
		}
	}
	set(&s.SpaceReserve, o.SpaceReserve)
	set(&s.SnapshotPolicy, o.SnapshotPolicy)
	set(&s.ExportPolicy, o.ExportPolicy)
	set(&s.SecurityStyle, o.SecurityStyle)
	set(&s.TieringPolicy, o.TieringPolicy)
	set(&s.QoSPolicy, o.QoSPolicy)
	if o.UnixPermissions != "" {
		perms, err := config.ParseUnixPermissions(o.UnixPermissions)
		if err != nil {
			return nil, backends.Errorf(backends.ErrInvalid, "unixPermissions %q: want octal (0755) or symbolic (---rwxr-xr-x)", o.UnixPermissions)
		}
		s.UnixPermissions = perms
	}
	if o.SnapshotDir != nil {
		s.SnapshotDir = *o.SnapshotDir
	}
	if o.Encryption != nil {
		s.Encryption = o.Encryption
	}
	if o.SplitOnClone != nil {
		s.SplitOnClone = *o.SplitOnClone
	}
	if o.SkipRecoveryQueue != nil {
		s.SkipRecoveryQueue = *o.SkipRecoveryQueue
	}
	switch {
	case o.SnapshotReserve != nil:
		s.snapshotReserve = *o.SnapshotReserve
	case o.SnapshotPolicy != "":
		// Trident 26.06: no reserve without snapshots, else 5 %.
		s.snapshotReserve = 5
		if o.SnapshotPolicy == "none" {
			s.snapshotReserve = 0
		}
	case s.SnapshotReserve != nil:
		s.snapshotReserve = *s.SnapshotReserve
	default:
		s.snapshotReserve = 5
	}
	if req.FSType != "" && req.FSType != backends.FSTypeRaw {
		s.FileSystemType = req.FSType
	}
	return s, nil
}

// meta builds the record of a new volume.
func (d *driver) meta(req *backends.CreateRequest, s *settings) *volumeMeta {
	m := &volumeMeta{Name: req.Name, Size: req.SizeBytes, AccessType: string(req.AccessType), Pool: req.Pool, Backend: d.Name()}
	if req.Options.SkipRecoveryQueue != nil {
		// Per volume (the claim's annotation): DeleteVolume has only
		// the volume to go by.
		m.SkipRecoveryQueue = req.Options.SkipRecoveryQueue
	}
	if req.Topologies != nil && !sameTopologies(req.Topologies, d.poolTopologies(req.Pool)) {
		m.Topologies = req.Topologies
	}
	if d.protocol() == backends.ProtocolBlock {
		m.FSType = s.FileSystemType
		if req.AccessType == backends.AccessBlock {
			m.FSType = backends.FSTypeRaw
		}
	}
	if src := req.Source; src != nil {
		switch {
		case src.Snapshot != nil:
			m.SourceSnapshotID = src.Snapshot.VolumeID + "/" + src.Snapshot.Name
		case src.Volume != nil:
			m.SourceVolumeID = src.Volume.ID
		}
	}
	return m
}

// flexVolSize is the FlexVol size that leaves want bytes usable after the
// snapshot reserve (Trident's calculation), times factor (the LUN
// metadata headroom of ontap-san), rounded up to ONTAP's 4 KiB blocks.
func flexVolSize(want int64, reservePercent int, factor float64) int64 {
	size := float64(want) * factor
	if reservePercent > 0 && reservePercent < 100 {
		size = size / (1 - float64(reservePercent)/100)
	}
	n := int64(math.Ceil(size))
	n = (n + 4095) &^ 4095
	return max(n, MinimumVolumeSize)
}

func sameTopologies(a, b []map[string]string) bool {
	return slices.EqualFunc(a, b, maps.Equal)
}
