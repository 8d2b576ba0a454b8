package ontap

import (
	"context"
	"regexp"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

const (
	// lunHeadroom sizes the FlexVol of a LUN 10 % above the LUN for LUN
	// metadata (Trident's LUNMetadataBufferMultiplier).
	lunHeadroom = 1.1
	// Trident's LUN attributes: the filesystem the node formats and the
	// driver context.
	lunAttrFSType  = "com.netapp.ndvp.fstype"
	lunAttrContext = "context"
	driverContext  = "csi"
)

// perNodeIgroupRE matches a per-node igroup of any installation:
// "<node>-<uuid>".
var perNodeIgroupRE = regexp.MustCompile(`^.+-` + uuidRE + `$`)

// sanDriver is ontap-san: a FlexVol per volume holding one LUN, lun0,
// reached over iSCSI through per-node igroups.
type sanDriver struct {
	*driver
	targetIQN string
	lifs      lifCache    // san_lifs.go
	igroups   igroupCache // identities.go
	lunIDs    lunIDCache  // identities.go
}

func (s *sanDriver) init(ctx context.Context) error {
	svc, err := s.client.ISCSIService(ctx)
	if err != nil {
		return backends.Errorf(backends.ErrUnavailable, "reading the iSCSI service of SVM %s: %w", s.cfg.SVM, err)
	}
	if !svc.Enabled {
		return backends.Errorf(backends.ErrUnavailable, "the iSCSI service of SVM %s is disabled", s.cfg.SVM)
	}
	s.targetIQN = svc.TargetName
	if s.cfg.UseCHAP {
		// As Trident: bidirectional CHAP becomes the SVM's default
		// initiator security.
		if err := s.client.SetCHAP(ctx, rest.CHAPCredentials{
			InboundUser: s.cfg.CHAPUsername, InboundPassword: string(s.cfg.CHAPInitiatorSecret),
			OutboundUser: s.cfg.CHAPTargetUsername, OutboundPassword: string(s.cfg.CHAPTargetInitiatorSecret),
		}); err != nil {
			return backends.Errorf(backends.ErrUnavailable, "setting CHAP on SVM %s: %w", s.cfg.SVM, err)
		}
	}
	s.seedLUNIDs(ctx)
	return nil
}

// seedLUNIDs reads the SVM's LUN maps once, at the backend's start check
// (the controller's inventory connects every backend when it starts), so
// that a map removed by hand after a restart, before the first
// ListVolumes, is made again at the ID the node's device sits at
// (docs/design/ontap-rest.md §10.4). One request per start, none per
// publish. A failure costs only that: a publish that needs an ID it does
// not know reads the maps then (mapLUN), and they may be gone by then.
func (s *sanDriver) seedLUNIDs(ctx context.Context) {
	maps, err := s.client.ListLUNMaps(ctx, "", "")
	if err != nil {
		logrus.WithContext(ctx).WithField("backend", s.Name()).WithError(err).
			Warn("cannot read the LUN maps: a map removed by hand before the next ListVolumes comes back at the lowest free LUN ID")
		return
	}
	s.lunIDs.seed(maps, s.installationID)
}

// Volume implements backends.Backend. It reads the LUN too: its absence
// marks a create that stopped after the FlexVol.
func (s *sanDriver) Volume(ctx context.Context, id string) (*backends.Volume, error) {
	return s.VolumeAt(ctx, id, s.volumeName(id))
}

// VolumeAt implements backends.VolumeLocator.
func (s *sanDriver) VolumeAt(ctx context.Context, id, internalName string) (*backends.Volume, error) {
	s.forget(id) // an uncached lookup: see identities.go
	v, meta, partial, err := s.lookup(ctx, id, internalName)
	if err != nil {
		return nil, err
	}
	lun, err := s.client.GetLUN(ctx, lunPath(v.Name))
	if err != nil && !rest.IsNotFound(err) {
		return nil, s.failure(err, "reading the LUN of volume %s", id)
	}
	var size int64
	if lun != nil {
		size = lun.Size
	}
	bv := s.toVolume(id, v, meta, size)
	bv.Incomplete = partial || lun == nil && meta != nil
	handleOf(bv).lun = lun
	return bv, nil
}

// readLUNSizes maps FlexVol names to the size of their lun0, for volumes
// whose comment does not record the size (Trident's).
func (s *sanDriver) readLUNSizes(ctx context.Context) (map[string]int64, error) {
	luns, err := s.client.ListLUNs(ctx, "/vol/"+tridentName(s.cfg.StoragePrefix)+"*/lun0")
	if err != nil {
		return nil, s.failure(err, "listing LUNs")
	}
	out := make(map[string]int64, len(luns))
	for _, l := range luns {
		out[l.VolumeName] = l.Size
	}
	return out, nil
}

// CreatesFresh implements backends.FreshCreator, as for ontap-nas: a
// half-made volume (a FlexVol without its LUN) takes the name too.
func (s *sanDriver) CreatesFresh() bool { return true }

// CreateVolume makes the FlexVol (unmounted, 10 % above the LUN), the LUN
// and Trident's LUN attributes; or completes what an earlier attempt made.
func (s *sanDriver) CreateVolume(ctx context.Context, req *backends.CreateRequest) (*backends.Volume, error) {
	name, err := s.newVolumeName(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	st, err := s.resolve(req)
	if err != nil {
		return nil, err
	}
	volSize, large, err := s.fitFlexVol(req.SizeBytes, st.snapshotReserve, lunHeadroom, true)
	if err != nil {
		return nil, err
	}
	meta := s.meta(req, st)
	if name != s.volumeName(req.Name) {
		meta.InternalName = name // a nameTemplate's
	}
	comment, err := s.newComment(meta)
	if err != nil {
		return nil, err
	}
	var v *rest.Volume
	if req.Source != nil {
		v, err = s.cloneFlexVol(ctx, req, st, name)
		if err == nil {
			err = s.finishClone(ctx, v, req, comment)
		}
		if err != nil {
			return nil, err
		}
	} else {
		v, err = s.createFlexVol(ctx, req, rest.VolumeCreate{
			Name: name, Size: volSize, LargeSize: large,
			SpaceReserve: st.SpaceReserve, SnapshotPolicy: st.SnapshotPolicy, SnapshotReservePercent: &st.snapshotReserve,
			Comment: comment, Encryption: st.Encryption, TieringPolicy: st.TieringPolicy,
			// As Trident's ontap-san: the FlexVol gets the NAS defaults
			// too, though iSCSI access does not use them.
			UnixPermissions: st.UnixPermissions, ExportPolicy: st.ExportPolicy, SecurityStyle: st.SecurityStyle,
		})
		if err != nil {
			return nil, err
		}
		lun, err := s.createLUN(ctx, v.Name, req.SizeBytes, st, meta.FSType)
		if err != nil {
			return nil, err
		}
		bv := s.toVolume(req.Name, v, meta, req.SizeBytes)
		if lun != nil && lun.VolumeUUID != "" && lun.SerialNumber != "" {
			// The LUN's POST echoes its UUID and serial and its FlexVol's
			// UUID: all that publish, unpublish and delete address
			// (docs/design/ontap-rest.md §10.1).
			v.UUID = lun.VolumeUUID
			handleOf(bv).lun = lun
			s.Remember(bv)
		}
		return bv, nil
	}
	return s.toVolume(req.Name, v, meta, req.SizeBytes), nil
}

func (s *sanDriver) createLUN(ctx context.Context, volume string, size int64, st *settings, fsType string) (*rest.LUN, error) {
	path := lunPath(volume)
	attrs := map[string]string{lunAttrFSType: fsType, lunAttrContext: driverContext}
	// The attributes go in the LUN's POST: one request instead of three.
	// ONTAP takes them there wherever it has LUN attributes at all (9.10,
	// as the attributes endpoint; ontap-san-economy relies on the same).
	created, err := s.client.CreateLUN(ctx, rest.LUNCreate{
		Path: path, Size: size, OSType: "linux", SpaceAllocation: st.SpaceAllocation, QoSPolicy: st.QoSPolicy,
		Attributes: attrs,
	})
	if err == nil {
		return created, nil
	}
	if !rest.IsAlreadyExists(err) {
		return nil, s.createFailure(err, "creating LUN %s", path)
	}
	// An earlier attempt made it; one made by a version that set the
	// attributes one by one may lack them.
	lun, err := s.client.GetLUN(ctx, path)
	if err != nil {
		return nil, s.createFailure(err, "creating LUN %s", path)
	}
	for name, value := range attrs {
		if err := s.client.SetLUNAttribute(ctx, lun.UUID, name, value); err != nil {
			return nil, s.failure(err, "setting attribute %s of LUN %s", name, path)
		}
	}
	return lun, nil
}

// finishClone gives a FlexClone its own record and grows it and its LUN
// to the requested size. The LUN comes with the clone, unmapped.
func (s *sanDriver) finishClone(ctx context.Context, v *rest.Volume, req *backends.CreateRequest, comment string) error {
	m := rest.VolumeModify{}
	if v.Comment != comment {
		m.Comment = &comment
	}
	size, large, err := s.fitFlexVol(req.SizeBytes, v.SnapshotReservePercent, lunHeadroom, true)
	if err != nil {
		return err
	}
	if size > v.Size {
		m.Size, m.LargeSize = &size, large
	}
	if m != (rest.VolumeModify{}) {
		if err := s.client.ModifyVolume(ctx, v.UUID, m); err != nil {
			return s.failure(err, "setting up clone %s", v.Name)
		}
	}
	lun, err := s.client.GetLUN(ctx, lunPath(v.Name))
	if err != nil {
		return s.failure(err, "reading the LUN of clone %s", v.Name)
	}
	if req.SizeBytes > lun.Size {
		if err := s.client.ResizeLUN(ctx, lun.UUID, req.SizeBytes); err != nil {
			return s.failure(err, "resizing the LUN of clone %s", v.Name)
		}
	}
	return nil
}

// ExpandVolume grows the FlexVol (keeping the headroom) and then the LUN,
// and records the new size. The node rescans and grows the filesystem.
func (s *sanDriver) ExpandVolume(ctx context.Context, vol *backends.Volume, size int64) (*backends.Volume, error) {
	h := handleOf(vol)
	if h.lun == nil {
		return nil, backends.Errorf(backends.ErrNotFound, "volume %s has no LUN", vol.ID)
	}
	if err := s.resizeFlexVol(ctx, vol, size, lunHeadroom, true); err != nil {
		return nil, err
	}
	if size > h.lun.Size {
		if err := s.client.ResizeLUN(ctx, h.lun.UUID, size); err != nil {
			return nil, s.failure(err, "resizing the LUN of volume %s", vol.ID)
		}
	}
	out := *vol
	out.SizeBytes = size
	return &out, nil
}

// DeleteVolume unmaps the LUN (a CO normally unpublished it already),
// deletes per-node igroups left empty, then the FlexVol with its LUN. In
// this order a delete interrupted half way leaves the volume, so the retry
// finds it and finishes, rather than an orphaned igroup.
func (s *sanDriver) DeleteVolume(ctx context.Context, vol *backends.Volume) error {
	return s.onGone(ctx, vol, false, s.VolumeAt, func(vol *backends.Volume) error {
		// A LUN read by this call (the lookup that made vol) has maps to
		// read and remove only if ONTAP reported it mapped; a remembered
		// one may have been mapped since (by hand): its maps are read.
		h := handleOf(vol)
		if lun := h.lun; lun != nil && (lun.Mapped || h.cached) {
			if err := s.unmapAll(ctx, lun); err != nil {
				return err
			}
		}
		return s.deleteFlexVol(ctx, vol)
	})
}

// unmapAll removes every map of a LUN, and per-node igroups left empty.
func (s *sanDriver) unmapAll(ctx context.Context, lun *rest.LUN) error {
	s.lunIDs.forget(lun.UUID, "")
	maps, err := s.client.ListLUNMaps(ctx, lun.Path, "")
	if err != nil {
		return s.failure(err, "reading the maps of LUN %s", lun.Path)
	}
	for _, m := range maps {
		if perNodeIgroupRE.MatchString(m.IgroupName) {
			err = s.unmap(ctx, m)
		} else if err = s.client.DeleteLUNMap(ctx, m.LUNUUID, m.IgroupUUID); rest.IsNotFound(err) {
			err = nil
		}
		if err != nil {
			return s.failure(err, "unmapping LUN %s from igroup %s", lun.Path, m.IgroupName)
		}
	}
	return nil
}
