package ontap

import (
	"context"
	"slices"
	"strconv"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Publish maps the LUN to the node's igroup "<node>-<installationID>",
// creating the igroup and adding the node's IQN as needed, and returns
// Trident's publish_context. A LUN already mapped to another igroup that
// holds the node's IQN (Trident 20.10's shared igroup, or Trident's own
// per-node igroup) is served through that map.
func (s *sanDriver) Publish(ctx context.Context, vol *backends.Volume, req *backends.PublishRequest) (map[string]string, error) {
	var pc map[string]string
	err := s.onVolume(ctx, vol, true, s.VolumeAt, func(vol *backends.Volume) (err error) {
		pc, err = s.publish(ctx, vol, req)
		return err
	})
	return pc, err
}

func (s *sanDriver) publish(ctx context.Context, vol *backends.Volume, req *backends.PublishRequest) (map[string]string, error) {
	h := handleOf(vol)
	if h.lun == nil {
		return nil, backends.Errorf(backends.ErrNotFound, "volume %s has no LUN", vol.ID)
	}
	node := req.Node
	if node.IQN == "" {
		return nil, backends.Errorf(backends.ErrInvalid, "node %s has no iSCSI initiator name", node.Name)
	}
	igName := igroupName(node.Name, s.installationID)
	// Without the igroup's lock: every LUN of a node maps through its one
	// igroup, and the lock put a pod's publishes in a row, one map's POST
	// after another. ONTAP settles every race with an unpublish: it refuses
	// to delete a mapped igroup (1254213, docs/design/ontap-rest.md §10.2),
	// and a map's POST to an igroup deleted meanwhile answers "not found",
	// which makes the igroup again (mapLUN). Only reading or making the
	// igroup is done under the lock (ensureIgroup).
	var err error
	// The LUN was read by this call (the lookup that made vol), or is
	// remembered as our calls left it: one unmapped has no map to find.
	// One mapped meanwhile makes CreateLUNMap answer "already exists",
	// handled below.
	var m *rest.LUNMap
	if h.lun.Mapped {
		if m, err = s.existingMap(ctx, h.lun, igName, node.IQN); err != nil {
			return nil, err
		}
	}
	if m == nil || m.IgroupName == igName {
		if err := s.ensureIgroup(ctx, igName, node.IQN); err != nil {
			return nil, err
		}
	}
	if m == nil {
		if m, err = s.mapLUN(ctx, h.lun, igName, node.IQN); err != nil {
			return nil, err
		}
	}
	h.lun.Mapped = true
	// The ID the node sees the LUN at, through its igroup or another one
	// holding its IQN (Trident's): a map made again goes to its igroup.
	s.lunIDs.put(h.lun.UUID, igName, m.LUNID)
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

// mapLUN maps the LUN to the node's igroup, which ensureIgroup has just
// made sure of, at the LUN ID the node last reached the LUN at if this
// process knows it (docs/design/ontap-rest.md §10.4): a map removed on
// ONTAP by hand (csi-attacher's reconcile then publishes again) comes back
// where the node's device still sits. Without a known ID, ONTAP picks the
// lowest free one, as before and as Trident does.
//
// Why only this process's memory: the request carries nothing of the
// previous publish (CSI's ControllerPublishVolumeRequest has no publish
// context), the VolumeAttachment that holds it (iscsiLunNumber) is the
// controller service's to read only through Kubernetes, which the
// backends do not talk to, and recording the ID on ONTAP (a LUN attribute
// per igroup) would add a request to every publish and unpublish. The
// memory is filled by one listing of the SVM's maps at the backend's start
// (seedLUNIDs), so a restarted or newly elected controller knows the IDs
// of the maps that existed when it started; then for free, by the map this
// publish makes or finds, and by every ListVolumes (PublishedNodes reads
// every map with its ID), which csi-attacher calls each --reconcile-sync.
func (s *sanDriver) mapLUN(ctx context.Context, lun *rest.LUN, igName, iqn string) (*rest.LUNMap, error) {
	var want *int
	id, ok := s.lunIDs.get(lun.UUID, igName)
	if !ok && !s.lunIDs.isSeeded() {
		// The start's reading failed: read now, once it succeeds.
		s.seedLUNIDs(ctx)
		id, ok = s.lunIDs.get(lun.UUID, igName)
	}
	if ok {
		want = &id
	}
	m, err := s.postMap(ctx, lun.Path, igName, want)
	if rest.IsNotFound(err) {
		// The igroup may be gone: remembered and deleted by hand, or
		// deleted by an unpublish of the node's last other LUN meanwhile
		// (unmapKnown does not take the igroup's lock). Make it again and
		// map once more (docs/design/ontap-rest.md §10.2).
		s.igroups.forget(igName)
		if err := s.ensureIgroup(ctx, igName, iqn); err != nil {
			return nil, err
		}
		m, err = s.postMap(ctx, lun.Path, igName, want)
	}
	if rest.IsAlreadyExists(err) {
		var maps []rest.LUNMap
		if maps, err = s.client.ListLUNMaps(ctx, lun.Path, igName); err == nil && len(maps) > 0 {
			m = &maps[0]
		}
	}
	if err != nil || m == nil {
		return nil, s.failure(err, "mapping LUN %s to igroup %s", lun.Path, igName)
	}
	return m, nil
}

// postMap sends the map's POST, asking for LUN ID want when known. ONTAP
// refuses an ID that the igroup, or one of its initiators through another
// igroup, already uses: another LUN got it since. Its code for that is a
// guess (rest.IsLUNIDTaken, docs/design/ontap-rest.md §3.10), so any
// refusal of the POST that asked for an ID (an "in use", an "invalid" or
// an "already exists" — a 409 of unknown code to a POST reads as that)
// is taken for one, unless the map turns out to exist (made meanwhile, or
// by an earlier attempt whose answer was lost): the map is made again
// without an ID, at the lowest free one, as it was before the ID was
// remembered. Failing the publish instead would leave the node without
// the LUN for good, since every retry would ask for the same ID. The node
// whose device still sits at the old ID must stage the volume again to
// reach it: the warning says so. Not found, throttling, authentication
// and transport failures are returned as they are (their retry asks for
// the ID again).
func (s *sanDriver) postMap(ctx context.Context, lunPath, igName string, want *int) (*rest.LUNMap, error) {
	m, err := s.client.CreateLUNMap(ctx, rest.LUNMapCreate{LUNPath: lunPath, IgroupName: igName, LUNID: want})
	if want == nil || err == nil {
		return m, err
	}
	switch rest.ClassOf(err) {
	case rest.ClassInUse, rest.ClassInvalid, rest.ClassAlreadyExists:
	default:
		return nil, err
	}
	maps, lerr := s.client.ListLUNMaps(ctx, lunPath, igName)
	if lerr != nil {
		return nil, lerr
	}
	if len(maps) > 0 {
		return &maps[0], nil
	}
	m, err2 := s.client.CreateLUNMap(ctx, rest.LUNMapCreate{LUNPath: lunPath, IgroupName: igName})
	if err2 != nil {
		return nil, err2
	}
	reason := "refused"
	if rest.IsLUNIDTaken(err) {
		reason = "taken by another LUN"
	}
	logrus.WithContext(ctx).WithError(err).WithFields(logrus.Fields{
		"lun": lunPath, "igroup": igName, "lunID": m.LUNID, "previousLunID": *want,
	}).Warnf("LUN map made again at LUN %d, not at LUN %d where the node last had it (%s): "+
		"a node that still has the volume staged keeps its device at LUN %d and does not reach the LUN "+
		"until the volume is staged again (restart the pod using it)", m.LUNID, *want, reason, *want)
	return m, nil
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
//
// A node's first publishes come together (a pod's volumes): the first
// reads or makes the igroup under its lock, the others wait for it and
// find it remembered, instead of each reading it and making it again.
func (s *sanDriver) ensureIgroup(ctx context.Context, name, iqn string) error {
	if _, ok := s.igroups.get(name, iqn); ok {
		return nil
	}
	unlock, err := s.igroupLocks.Lock(ctx, name)
	if err != nil {
		return err
	}
	defer unlock()
	if _, ok := s.igroups.get(name, iqn); ok {
		return nil
	}
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
	if !slices.Contains(ig.Initiators, iqn) {
		if err := s.client.AddInitiator(ctx, ig.UUID, iqn); err != nil && !rest.IsAlreadyExists(err) {
			return s.failure(err, "adding initiator %s to igroup %s", iqn, name)
		}
	}
	s.igroups.put(name, ig.UUID, iqn)
	return nil
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
	return s.onGone(ctx, vol, true, s.VolumeAt, func(vol *backends.Volume) error {
		return s.unpublish(ctx, vol, nodeName)
	})
}

func (s *sanDriver) unpublish(ctx context.Context, vol *backends.Volume, nodeName string) error {
	h := handleOf(vol)
	if h.lun == nil {
		return nil
	}
	// An unpublish follows the node's unstage (or a fence): no device of
	// the node sits at the old ID any more, and the next publish to the
	// node takes the lowest free one, as a first publish does.
	ownIgroup := ""
	if nodeName != "" {
		ownIgroup = igroupName(nodeName, s.installationID)
	}
	s.lunIDs.forget(h.lun.UUID, ownIgroup)
	if h.cached && nodeName != "" {
		if done, err := s.unmapKnown(ctx, h.lun, igroupName(nodeName, s.installationID)); done || err != nil {
			return err
		}
	}
	maps, err := s.client.ListLUNMaps(ctx, h.lun.Path, "")
	if err != nil {
		return s.failure(err, "reading the maps of LUN %s", h.lun.Path)
	}
	if len(maps) == 0 && h.cached && h.lun.Mapped {
		// Remembered mapped, listed unmapped: the LUN's path may have
		// changed (the volume renamed by hand). Look it up again.
		return errStale
	}
	h.lun.Mapped = false
	for _, m := range maps {
		if !isAnyNodeIgroup(m.IgroupName, s.installationID) || nodeName != "" && !isNodeIgroup(m.IgroupName, nodeName, s.installationID) {
			h.lun.Mapped = true // another node's map, or a shared igroup's
		}
	}
	match := func(ig string) bool { return isAnyNodeIgroup(ig, s.installationID) }
	own := ""
	if nodeName != "" {
		match = func(ig string) bool { return isNodeIgroup(ig, nodeName, s.installationID) }
		own = igroupName(nodeName, s.installationID)
	}
	for _, m := range maps {
		if !match(m.IgroupName) {
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
	unlock, err := s.igroupLocks.Lock(ctx, own)
	if err != nil {
		return err
	}
	defer unlock()
	return s.deleteIgroupIfUnmapped(ctx, own)
}

func (s *sanDriver) unmap(ctx context.Context, m rest.LUNMap) error {
	unlock, err := s.igroupLocks.Lock(ctx, m.IgroupName)
	if err != nil {
		return err
	}
	defer unlock()
	if err := s.client.DeleteLUNMap(ctx, m.LUNUUID, m.IgroupUUID); err != nil && !rest.IsNotFound(err) {
		return s.failure(err, "unmapping LUN %s from igroup %s", m.LUNPath, m.IgroupName)
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"lun": m.LUNPath, "igroup": m.IgroupName}).Debug("LUN unmapped")
	return s.deleteIgroupUnlessMapped(ctx, m.IgroupName, m.IgroupUUID)
}

// deleteIgroupUnlessMapped deletes an igroup whose UUID is known if no LUN
// is mapped to it, in one request: ONTAP refuses to delete a mapped igroup
// without allow_delete_while_mapped (1254213, docs/design/ontap-rest.md
// §3.9, §10.2): it needs no lock of the igroup to be right.
func (s *sanDriver) deleteIgroupUnlessMapped(ctx context.Context, name, uuid string) error {
	err := s.client.DeleteIgroup(ctx, uuid)
	switch {
	case err == nil || rest.IsNotFound(err):
		s.igroups.forget(name)
	case rest.IsInUse(err):
		// Still mapped: other LUNs of the node, or another controller
		// mapped one meanwhile. A transient refusal (a configuration
		// lock) is throttled, not in use: it fails the call, so that its
		// retry deletes the igroup.
	default:
		s.igroups.forget(name)
		return s.failure(err, "deleting igroup %s", name)
	}
	return nil
}

// unmapKnown unmaps a remembered LUN from the node's igroup, remembered
// too, by their UUIDs, without reading the LUN's maps, and deletes the
// igroup if no LUN is left mapped to it, relying on ONTAP refusing to
// delete a mapped igroup (1254213, docs/design/ontap-rest.md §3.9, §10.2).
// done is false when the map was not there: the caller then reads the
// LUN's maps (the node may reach the LUN through Trident's igroup).
func (s *sanDriver) unmapKnown(ctx context.Context, lun *rest.LUN, igName string) (done bool, err error) {
	igUUID, ok := s.igroups.get(igName, "")
	if !ok || lun.UUID == "" {
		return false, nil
	}
	// Without the igroup's lock: ONTAP decides whether the igroup is
	// mapped in the DELETE itself, so no publish can map a LUN between a
	// check and the delete; a publish whose igroup went meanwhile makes
	// it again. Every LUN of a node shares its igroup, and the lock would
	// put the node's unpublishes in a row.
	err = s.client.DeleteLUNMap(ctx, lun.UUID, igUUID)
	switch {
	case rest.IsNotFound(err):
		s.igroups.forget(igName)
		return false, nil
	case err != nil:
		s.igroups.forget(igName)
		return false, s.failure(err, "unmapping LUN %s from igroup %s", lun.Path, igName)
	}
	// Other nodes' maps are not known without a read.
	lun.Mapped = true
	return true, s.deleteIgroupUnlessMapped(ctx, igName, igUUID)
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
	if err == nil || rest.IsNotFound(err) {
		s.igroups.forget(name)
	}
	// In use: another controller mapped a LUN to it meanwhile; it stays.
	// A transient refusal (a configuration lock) is throttled, not in use:
	// it fails the call, so that its retry deletes the igroup.
	if err != nil && !rest.IsNotFound(err) && !rest.IsInUse(err) {
		return s.failure(err, "deleting igroup %s", name)
	}
	return nil
}
