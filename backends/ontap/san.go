package ontap

import (
	"context"
	"regexp"
	"slices"
	"strconv"
	"strings"

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
}

func (s *sanDriver) init(ctx context.Context) error {
	svc, err := s.client.ISCSIService(ctx)
	if err != nil {
		return backends.Errorf(backends.ErrUnavailable, "backend %s: reading the iSCSI service of SVM %s: %w", s.Name(), s.cfg.SVM, err)
	}
	if !svc.Enabled {
		return backends.Errorf(backends.ErrUnavailable, "backend %s: the iSCSI service of SVM %s is disabled", s.Name(), s.cfg.SVM)
	}
	s.targetIQN = svc.TargetName
	if s.cfg.UseCHAP {
		// As Trident: bidirectional CHAP becomes the SVM's default
		// initiator security.
		if err := s.client.SetCHAP(ctx, rest.CHAPCredentials{
			InboundUser: s.cfg.CHAPUsername, InboundPassword: string(s.cfg.CHAPInitiatorSecret),
			OutboundUser: s.cfg.CHAPTargetUsername, OutboundPassword: string(s.cfg.CHAPTargetInitiatorSecret),
		}); err != nil {
			return backends.Errorf(backends.ErrUnavailable, "backend %s: setting CHAP on SVM %s: %w", s.Name(), s.cfg.SVM, err)
		}
	}
	return nil
}

// Volume implements backends.Backend. It reads the LUN too: its absence
// marks a create that stopped after the FlexVol.
func (s *sanDriver) Volume(ctx context.Context, id string) (*backends.Volume, error) {
	v, meta, partial, err := s.lookup(ctx, id)
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

// ListVolumes implements backends.Backend.
func (s *sanDriver) ListVolumes(ctx context.Context) ([]*backends.Volume, error) {
	return s.listVolumes(ctx, s.listLUNSizes)
}

// lunSizes maps FlexVol names to the size of their lun0, for volumes whose
// comment does not record the size (Trident's).
func (s *sanDriver) listLUNSizes(ctx context.Context) (map[string]int64, error) {
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

// CreateVolume makes the FlexVol (unmounted, 10 % above the LUN), the LUN
// and Trident's LUN attributes; or completes what an earlier attempt made.
func (s *sanDriver) CreateVolume(ctx context.Context, req *backends.CreateRequest) (*backends.Volume, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	st, err := s.resolve(req)
	if err != nil {
		return nil, err
	}
	meta := s.meta(req, st)
	comment, err := s.newComment(meta)
	if err != nil {
		return nil, err
	}
	var v *rest.Volume
	if req.Source != nil {
		v, err = s.cloneFlexVol(ctx, req, st)
		if err == nil {
			err = s.finishClone(ctx, v, req, comment)
		}
		if err != nil {
			return nil, err
		}
	} else {
		v, err = s.createFlexVol(ctx, req, rest.VolumeCreate{
			Name: s.volumeName(req.Name), Size: flexVolSize(req.SizeBytes, st.snapshotReserve, lunHeadroom),
			SpaceReserve: st.SpaceReserve, SnapshotPolicy: st.SnapshotPolicy, SnapshotReservePercent: &st.snapshotReserve,
			Comment: comment, Encryption: st.Encryption, TieringPolicy: st.TieringPolicy,
		})
		if err != nil {
			return nil, err
		}
		if err := s.createLUN(ctx, v.Name, req.SizeBytes, st, meta.FSType); err != nil {
			return nil, err
		}
	}
	return s.toVolume(req.Name, v, meta, req.SizeBytes), nil
}

func (s *sanDriver) createLUN(ctx context.Context, volume string, size int64, st *settings, fsType string) error {
	path := lunPath(volume)
	lun, err := s.client.CreateLUN(ctx, rest.LUNCreate{
		Path: path, Size: size, OSType: "linux", SpaceAllocation: st.SpaceAllocation, QoSPolicy: st.QoSPolicy,
	})
	if rest.IsAlreadyExists(err) { // an earlier attempt made it
		lun, err = s.client.GetLUN(ctx, path)
	}
	if err != nil {
		return s.createFailure(err, "creating LUN %s", path)
	}
	for name, value := range map[string]string{lunAttrFSType: fsType, lunAttrContext: driverContext} {
		if err := s.client.SetLUNAttribute(ctx, lun.UUID, name, value); err != nil {
			return s.failure(err, "setting attribute %s of LUN %s", name, path)
		}
	}
	return nil
}

// finishClone gives a FlexClone its own record and grows it and its LUN
// to the requested size. The LUN comes with the clone, unmapped.
func (s *sanDriver) finishClone(ctx context.Context, v *rest.Volume, req *backends.CreateRequest, comment string) error {
	m := rest.VolumeModify{}
	if v.Comment != comment {
		m.Comment = &comment
	}
	if size := flexVolSize(req.SizeBytes, v.SnapshotReservePercent, lunHeadroom); size > v.Size {
		m.Size = &size
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
	if err := s.resizeFlexVol(ctx, vol, size, lunHeadroom); err != nil {
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
	if lun := handleOf(vol).lun; lun != nil {
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
	}
	return s.deleteFlexVol(ctx, vol)
}

// Publish maps the LUN to the node's igroup "<node>-<installationID>",
// creating the igroup and adding the node's IQN as needed, and returns
// Trident's publish_context. A LUN already mapped to another igroup that
// holds the node's IQN (Trident 20.10's shared igroup, or Trident's own
// per-node igroup) is served through that map.
func (s *sanDriver) Publish(ctx context.Context, vol *backends.Volume, req *backends.PublishRequest) (map[string]string, error) {
	h := handleOf(vol)
	if h.lun == nil {
		return nil, backends.Errorf(backends.ErrNotFound, "volume %s has no LUN", vol.ID)
	}
	node := req.Node
	if node.IQN == "" {
		return nil, backends.Errorf(backends.ErrInvalid, "node %s has no iSCSI initiator name", node.Name)
	}
	igName := igroupName(node.Name, s.installationID)
	unlock, err := s.igroupLocks.lock(ctx, igName)
	if err != nil {
		return nil, err
	}
	defer unlock()

	m, err := s.existingMap(ctx, h.lun, igName, node.IQN)
	if err != nil {
		return nil, err
	}
	if m == nil || m.IgroupName == igName {
		if err := s.ensureIgroup(ctx, igName, node.IQN); err != nil {
			return nil, err
		}
	}
	if m == nil {
		m, err = s.client.CreateLUNMap(ctx, rest.LUNMapCreate{LUNPath: h.lun.Path, IgroupName: igName})
		if rest.IsAlreadyExists(err) {
			var maps []rest.LUNMap
			if maps, err = s.client.ListLUNMaps(ctx, h.lun.Path, igName); err == nil && len(maps) > 0 {
				m = &maps[0]
			}
		}
		if err != nil || m == nil {
			return nil, s.failure(err, "mapping LUN %s to igroup %s", h.lun.Path, igName)
		}
	}
	portals, err := s.portals(ctx, m)
	if err != nil {
		return nil, err
	}
	fsType, err := s.fsType(ctx, vol, req)
	if err != nil {
		return nil, err
	}
	pc := map[string]string{
		"protocol":               string(backends.ProtocolBlock),
		"iscsiTargetPortalCount": strconv.Itoa(len(portals)),
		"iscsiTargetIqn":         s.targetIQN,
		"iscsiLunNumber":         strconv.Itoa(m.LUNID),
		"iscsiLunSerial":         h.lun.SerialNumber,
		"iscsiIgroup":            m.IgroupName,
		"iscsiInterface":         "default",
		"filesystemType":         fsType,
		"useCHAP":                strconv.FormatBool(s.cfg.UseCHAP),
		"sharedTarget":           "true", // ONTAP: one target per SVM
	}
	for i, p := range portals {
		pc["p"+strconv.Itoa(i+1)] = p
	}
	if len(req.MountOptions) > 0 {
		pc["mountOptions"] = strings.Join(req.MountOptions, ",")
	}
	if s.cfg.UseCHAP {
		// Trident 20.10's plaintext keys; 21.01+ encrypts them with a key
		// shared through Trident's REST server, which we do not run.
		pc["iscsiUsername"] = s.cfg.CHAPUsername
		pc["iscsiInitiatorSecret"] = string(s.cfg.CHAPInitiatorSecret)
		pc["iscsiTargetUsername"] = s.cfg.CHAPTargetUsername
		pc["iscsiTargetSecret"] = string(s.cfg.CHAPTargetInitiatorSecret)
	}
	return pc, nil
}

// existingMap returns the map through which the node already reaches the
// LUN: to its own igroup, or to another igroup holding its IQN.
func (s *sanDriver) existingMap(ctx context.Context, lun *rest.LUN, igName, iqn string) (*rest.LUNMap, error) {
	maps, err := s.client.ListLUNMaps(ctx, lun.Path, "")
	if err != nil {
		return nil, s.failure(err, "reading the maps of LUN %s", lun.Path)
	}
	for i := range maps {
		if maps[i].IgroupName == igName {
			return &maps[i], nil
		}
	}
	for i := range maps {
		ig, err := s.client.GetIgroup(ctx, maps[i].IgroupName)
		if err != nil {
			continue
		}
		if slices.Contains(ig.Initiators, iqn) {
			return &maps[i], nil
		}
	}
	return nil, nil
}

// ensureIgroup makes the node's igroup exist and hold its IQN. Other IQNs
// are left alone: removing one from a mapped igroup would cut a live path.
// A new igroup is created with the IQN; one that exists without it (made
// by another controller, or by Trident) gets it added.
func (s *sanDriver) ensureIgroup(ctx context.Context, name, iqn string) error {
	ig, err := s.client.GetIgroup(ctx, name)
	if rest.IsNotFound(err) {
		ig, err = s.client.CreateIgroup(ctx, name, iqn)
		if rest.IsAlreadyExists(err) {
			ig, err = s.client.GetIgroup(ctx, name)
		}
	}
	if err != nil {
		return s.failure(err, "creating igroup %s", name)
	}
	if slices.Contains(ig.Initiators, iqn) {
		return nil
	}
	if err := s.client.AddInitiator(ctx, ig.UUID, iqn); err != nil && !rest.IsAlreadyExists(err) {
		return s.failure(err, "adding initiator %s to igroup %s", iqn, name)
	}
	return nil
}

// portals are the up iSCSI LIFs on the nodes that report the LUN (SLM), as
// Trident publishes them: addresses without port. The nodes are read only
// if the map does not carry them (a map that existed before).
func (s *sanDriver) portals(ctx context.Context, m *rest.LUNMap) ([]string, error) {
	nodes := m.ReportingNodes
	if nodes == nil {
		var err error
		if nodes, err = s.client.LUNMapReportingNodes(ctx, m.LUNUUID, m.IgroupUUID); err != nil {
			return nil, s.failure(err, "reading the reporting nodes of the LUN map")
		}
	}
	lifs, err := s.client.DataLIFs(ctx, rest.ServiceDataISCSI)
	if err != nil {
		return nil, s.failure(err, "listing iSCSI data LIFs")
	}
	var out []string
	for _, l := range lifs {
		if l.State == "up" && (len(nodes) == 0 || slices.Contains(nodes, l.CurrentNode)) {
			out = append(out, l.Address)
		}
	}
	if len(out) == 0 {
		return nil, backends.Errorf(backends.ErrUnavailable, "no iSCSI data LIF is up on the nodes reporting the LUN (%v)", nodes)
	}
	return out, nil
}

// fsType is the filesystem the node should find or make: the capability's,
// else the one recorded at creation, else Trident's LUN attribute.
func (s *sanDriver) fsType(ctx context.Context, vol *backends.Volume, req *backends.PublishRequest) (string, error) {
	switch {
	case req.AccessType == backends.AccessBlock:
		return backends.FSTypeRaw, nil
	case req.FSType != "":
		return req.FSType, nil
	case vol.FSType != "":
		return vol.FSType, nil
	}
	attrs, err := s.client.LUNAttributes(ctx, handleOf(vol).lun.UUID)
	if err != nil {
		return "", s.failure(err, "reading the attributes of the LUN of volume %s", vol.ID)
	}
	if fs := attrs[lunAttrFSType]; fs != "" {
		return fs, nil
	}
	return s.cfg.Defaults.FileSystemType, nil
}

// Unpublish unmaps the LUN from the node's per-node igroups (ours and
// Trident's) and deletes an igroup left without LUNs. It needs only the
// node's name, so nodes that are gone can be detached (Trident #691).
// Shared igroups (Trident 20.10's "trident") are left as they are.
func (s *sanDriver) Unpublish(ctx context.Context, vol *backends.Volume, nodeName string, _ *backends.Node) error {
	h := handleOf(vol)
	if h.lun == nil {
		return nil
	}
	maps, err := s.client.ListLUNMaps(ctx, h.lun.Path, "")
	if err != nil {
		return s.failure(err, "reading the maps of LUN %s", h.lun.Path)
	}
	match := anyNodeIgroupRE(s.installationID)
	own := ""
	if nodeName != "" {
		match = nodeIgroupRE(nodeName, s.installationID)
		own = igroupName(nodeName, s.installationID)
	}
	for _, m := range maps {
		if !match.MatchString(m.IgroupName) {
			continue
		}
		if err := s.unmap(ctx, m); err != nil {
			return err
		}
		if m.IgroupName == own {
			own = ""
		}
	}
	if own == "" {
		return nil
	}
	// Nothing was mapped to the node's igroup: a publish may have made
	// the igroup and stopped before the map. Do not leave it behind.
	unlock, err := s.igroupLocks.lock(ctx, own)
	if err != nil {
		return err
	}
	defer unlock()
	return s.deleteIgroupIfUnmapped(ctx, own)
}

func (s *sanDriver) unmap(ctx context.Context, m rest.LUNMap) error {
	unlock, err := s.igroupLocks.lock(ctx, m.IgroupName)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.client.DeleteLUNMap(ctx, m.LUNUUID, m.IgroupUUID); err != nil && !rest.IsNotFound(err) {
		return s.failure(err, "unmapping LUN %s from igroup %s", m.LUNPath, m.IgroupName)
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"lun": m.LUNPath, "igroup": m.IgroupName}).Debug("LUN unmapped")
	return s.deleteIgroupIfUnmapped(ctx, m.IgroupName)
}

// deleteIgroupIfUnmapped runs with the igroup's lock held.
func (s *sanDriver) deleteIgroupIfUnmapped(ctx context.Context, name string) error {
	maps, err := s.client.ListLUNMaps(ctx, "", name)
	if err != nil {
		return s.failure(err, "reading the maps of igroup %s", name)
	}
	if len(maps) > 0 {
		return nil
	}
	ig, err := s.client.GetIgroup(ctx, name)
	if rest.IsNotFound(err) {
		return nil
	}
	if err == nil {
		err = s.client.DeleteIgroup(ctx, ig.UUID)
	}
	// In use: another controller mapped a LUN to it meanwhile; it stays.
	// A transient refusal (a configuration lock) is throttled, not in use:
	// it fails the call, so that its retry deletes the igroup.
	if err != nil && !rest.IsNotFound(err) && !rest.IsInUse(err) {
		return s.failure(err, "deleting igroup %s", name)
	}
	return nil
}
