package ontap

import (
	"context"
	"errors"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// sanEconomyDriver is ontap-san-economy: each volume a LUN named after it
// in a pool FlexVol holding up to lunsPerFlexvol of them, published through
// the per-node igroups as ontap-san (docs/design/economy.md §5.4).
type sanEconomyDriver struct {
	*sanDriver
	eco *economy
}

// lunAttrMeta is the LUN attribute holding the volume's record (the one
// ontap-san keeps in the FlexVol comment); Trident ignores attributes it
// does not know.
const lunAttrMeta = "ontap-csi"

func newSANEconomy(d *driver) *sanEconomyDriver {
	s := &sanEconomyDriver{sanDriver: &sanDriver{driver: d}}
	s.eco = newEconomy(d, lunPools{s}, lunPoolPrefix(d.cfg.StoragePrefix), d.cfg.Economy.LUNsPerFlexvol)
	d.initProtocol = s.init
	return s
}

func (s *sanEconomyDriver) lunName(id string) string {
	return econInternalName(s.cfg.StoragePrefix, id, maxLUNName)
}

// findLUN looks a volume's LUN up in every pool (Trident's LUNExists): one
// LUN of that name, or none.
func (s *sanEconomyDriver) findLUN(ctx context.Context, name string) (*rest.LUN, error) {
	luns, err := s.client.ListLUNsWithAttributes(ctx, "/vol/"+s.eco.prefix+"*/"+name)
	if err != nil {
		return nil, s.failure(err, "looking up LUN %s", name)
	}
	switch len(luns) {
	case 0:
		return nil, backends.Errorf(backends.ErrNotFound, "LUN %s not found", name)
	case 1:
		return &luns[0], nil
	}
	return nil, backends.Errorf(backends.ErrAlreadyExists, "LUN %s exists in %d FlexVols (%s, %s): resolve it on ONTAP",
		name, len(luns), luns[0].VolumeName, luns[1].VolumeName)
}

// Volume implements backends.Backend: the LUN, with its attributes.
func (s *sanEconomyDriver) Volume(ctx context.Context, id string) (*backends.Volume, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	lun, err := s.findLUN(ctx, s.lunName(id))
	if err != nil {
		return nil, err
	}
	return s.toVolume(id, lun), nil
}

// VolumeAt implements backends.VolumeLocator: the LUN the volume's records
// name (a nameTemplate's, or one Trident named by another storagePrefix).
// Without it the ontap-san driver's, which looks for a FlexVol, would be
// promoted here. A LUN whose record names another volume is not this one.
func (s *sanEconomyDriver) VolumeAt(ctx context.Context, id, internalName string) (*backends.Volume, error) {
	if !lunNameRE.MatchString(internalName) || len(internalName) > maxLUNName || strings.Trim(internalName, ".") == "" {
		// Not a LUN name: checked before ONTAP is asked, the name
		// going into a query.
		return nil, backends.Errorf(backends.ErrNotFound, "volume %s not found (%q is no LUN name)", id, internalName)
	}
	if _, _, snap := splitSnapshotLUN(internalName); snap {
		return nil, backends.Errorf(backends.ErrNotFound, "volume %s not found (%s is a snapshot's LUN)", id, internalName)
	}
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	lun, err := s.findLUN(ctx, internalName)
	if err != nil {
		return nil, err
	}
	if _, meta := decodeComment(lun.Attributes[lunAttrMeta]); meta != nil && meta.Name != id {
		return nil, backends.Errorf(backends.ErrNotFound, "volume %s not found (LUN %s belongs to %s)", id, internalName, meta.Name)
	}
	return s.toVolume(id, lun), nil
}

// newLUNName is the LUN of a new volume: what its pool's nameTemplate
// renders, else the naming rule's, as Trident's
// SANEconomyStorageDriver.GetInternalVolumeName (getInternalVolumeNameCommon,
// ontap_common.go) names it. A rendered name over the 254 characters of a
// LUN name is refused, as Trident's SANEconomyStorageDriver.Create refuses
// it (maxLunNameLength), before anything is made.
func (s *sanEconomyDriver) newLUNName(ctx context.Context, req *backends.CreateRequest) (name string, templated bool, err error) {
	name, ok, err := s.templateName(ctx, req)
	switch {
	case err != nil:
		return "", false, err
	case !ok:
		return s.lunName(req.Name), false, nil
	case len(name) > maxLUNName:
		return "", false, s.tooLong(req, name, maxLUNName, "a LUN")
	}
	return name, true, nil
}

// toVolume describes a LUN for the controller: its size is the LUN's, its
// record the "ontap-csi" attribute (none on Trident's). A LUN whose record
// names another volume is a clone whose create stopped before it got its
// own: the retried create completes it.
func (s *sanEconomyDriver) toVolume(id string, lun *rest.LUN) *backends.Volume {
	_, meta := decodeComment(lun.Attributes[lunAttrMeta])
	name := lunLeaf(lun.Path)
	bv := &backends.Volume{
		ID: id, Backend: s.Name(), SizeBytes: lun.Size, FSType: lun.Attributes[lunAttrFSType],
		Context: map[string]string{
			"backendUUID": s.backendUUID, "name": id, "internalName": name, "protocol": string(backends.ProtocolBlock),
		},
		Handle: &handle{vol: &rest.Volume{Name: lun.VolumeName, UUID: lun.VolumeUUID}, meta: meta, lun: lun},
	}
	if meta != nil {
		bv.Incomplete = meta.Name != id
		bv.Owner, bv.Pool, bv.AccessType, bv.FSType = meta.Backend, meta.Pool, backends.AccessType(meta.AccessType), meta.FSType
		bv.SourceSnapshotID, bv.SourceVolumeID = meta.SourceSnapshotID, meta.SourceVolumeID
	}
	bv.Topologies = s.poolTopologies(bv.Pool)
	if meta != nil && meta.Topologies != nil {
		bv.Topologies = meta.Topologies
	}
	return bv
}

func lunLeaf(path string) string {
	for i := len(path) - 1; i >= 0; i-- {
		if path[i] == '/' {
			return path[i+1:]
		}
	}
	return path
}

// ListVolumes implements backends.Backend: the LUNs of every pool but
// snapshot LUNs, in one request.
func (s *sanEconomyDriver) ListVolumes(ctx context.Context) ([]*backends.Volume, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	luns, err := s.client.ListLUNsWithAttributes(ctx, "/vol/"+s.eco.prefix+"*/*")
	if err != nil {
		return nil, s.failure(err, "listing the LUNs of the pools")
	}
	var out []*backends.Volume
	for i := range luns {
		if v := s.volumeOfLUN(&luns[i]); v != nil {
			out = append(out, v)
		}
	}
	return out, nil
}

// volumeOfLUN is the volume a LUN is, nil for snapshot LUNs and LUNs whose
// name gives back no volume ID.
func (s *sanEconomyDriver) volumeOfLUN(lun *rest.LUN) *backends.Volume {
	name := lunLeaf(lun.Path)
	if _, _, snap := splitSnapshotLUN(name); snap {
		return nil
	}
	_, meta := decodeComment(lun.Attributes[lunAttrMeta])
	if meta != nil && (s.lunName(meta.Name) == name || meta.InternalName == name) {
		return s.toVolume(meta.Name, lun)
	}
	if id, ok := econVolumeID(s.cfg.StoragePrefix, name); ok {
		return s.toVolume(id, lun)
	}
	return nil
}

func (s *sanEconomyDriver) poolAttrs(aggr string, st *settings) poolAttrs {
	return poolAttrs{
		aggregate: aggr, spaceReserve: st.SpaceReserve, snapshotPolicy: st.SnapshotPolicy,
		snapshotReserve: st.snapshotReserve, tieringPolicy: st.TieringPolicy, encryption: st.Encryption,
	}
}

// CreatesFresh is false, as for ontap-nas-economy: the LUN's pool is
// picked by the create.
func (s *sanEconomyDriver) CreatesFresh() bool { return false }

// CreateVolume makes a LUN, with Trident's attributes and our record in
// the same request, in a pool with room; or, for a clone, a LUN clone in
// its source's pool.
func (s *sanEconomyDriver) CreateVolume(ctx context.Context, req *backends.CreateRequest) (*backends.Volume, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	st, err := s.resolve(req)
	if err != nil {
		return nil, err
	}
	name, templated, err := s.newLUNName(ctx, req)
	if err != nil {
		return nil, err
	}
	meta := s.meta(req, st)
	if templated {
		meta.InternalName = name // ListVolumes finds the volume's ID by it
	}
	record, err := encodeComment(nil, meta)
	if err != nil {
		return nil, backends.Errorf(backends.ErrInvalid, "%v", err)
	}
	existing, err := s.findLUN(ctx, name)
	switch {
	case err == nil && s.toVolume(req.Name, existing).Incomplete && req.Source != nil:
	case err == nil && templated && s.toVolume(req.Name, existing).Incomplete:
		// A template's name another volume's LUN has: the naming rule's
		// names are the volume's own, a template's need not be.
		return nil, backends.Errorf(backends.ErrAlreadyExists, "LUN %s, named by nameTemplate %q, belongs to another volume",
			name, s.poolDefaults(req.Pool).NameTemplate.String())
	case err == nil:
		return s.toVolume(req.Name, existing), nil
	case !errors.Is(err, backends.ErrNotFound):
		return nil, err
	}
	attrs := map[string]string{lunAttrFSType: meta.FSType, lunAttrContext: driverContext, lunAttrMeta: record}
	if req.Source != nil {
		return s.cloneLUN(ctx, req, name, attrs)
	}
	aggr, err := s.aggregateFor(ctx, req.Pool)
	if err != nil {
		return nil, err
	}
	if err := s.checkAggregateLimit(ctx, aggr, st.SpaceReserve, req.SizeBytes); err != nil {
		return nil, err
	}
	c := rest.LUNCreate{Size: req.SizeBytes, OSType: "linux", SpaceAllocation: st.SpaceAllocation, QoSPolicy: st.QoSPolicy, Attributes: attrs}
	for try := 0; try < 4; try++ {
		r, err := s.eco.place(ctx, s.poolAttrs(aggr, st), req.SizeBytes)
		if err != nil {
			return nil, err
		}
		c.Path = "/vol/" + r.p.vol.Name + "/" + name
		v, again, err := s.createIn(ctx, r, req.Name, c)
		if !again || err != nil {
			return v, err
		}
	}
	return nil, backends.Errorf(backends.ErrUnavailable, "LUN %s: the pools chosen kept filling up or going away; retry", name)
}

// createIn makes the LUN in the reserved pool. again is true when another
// pool should be tried: this one went away, holds as many LUNs as ONTAP
// allows, or another controller filled it at the same time.
func (s *sanEconomyDriver) createIn(ctx context.Context, r *poolReservation, id string, c rest.LUNCreate) (*backends.Volume, bool, error) {
	defer r.release()
	ctx, cancel := detach(ctx)
	defer cancel()
	pool := r.p.vol
	err := s.eco.ensureSize(ctx, r.p)
	var lun *rest.LUN
	if err == nil {
		lun, err = s.client.CreateLUN(ctx, c)
	}
	switch {
	case rest.IsAlreadyExists(err):
		// Made by an earlier attempt whose answer was lost: its own,
		// attributes included.
		return s.earlierLUN(ctx, r, id, lunLeaf(c.Path))
	case rest.IsLUNLimitReached(err), err != nil && s.poolGone(ctx, pool.Name):
		s.eco.markFull(r.p)
		return nil, true, nil
	case err != nil:
		return nil, false, s.createFailure(err, "creating LUN %s", c.Path)
	}
	if kept, err := s.madeOnce(ctx, lunLeaf(c.Path)); err != nil || kept == nil || kept.UUID != lun.UUID {
		// An abandoned attempt made it in another pool too, and that
		// copy is the one kept.
		r.release()
		return s.keptVolume(id, kept, err)
	}
	over, err := s.eco.check(ctx, r)
	if err != nil {
		return nil, false, err
	}
	if over {
		if err := s.client.DeleteLUN(ctx, lun.UUID); err != nil && !rest.IsNotFound(err) {
			return nil, false, s.failure(err, "moving LUN %s out of full FlexVol %s", c.Path, pool.Name)
		}
		return nil, true, nil
	}
	r.commit()
	lun.Attributes = c.Attributes
	return s.toVolume(id, lun), false, nil
}

// earlierLUN is a volume whose LUN an earlier attempt made.
func (s *sanEconomyDriver) earlierLUN(ctx context.Context, r *poolReservation, id, name string) (*backends.Volume, bool, error) {
	r.release()
	kept, err := s.madeOnce(ctx, name)
	return s.keptVolume(id, kept, err)
}

func (s *sanEconomyDriver) keptVolume(id string, lun *rest.LUN, err error) (*backends.Volume, bool, error) {
	if err == nil && lun == nil {
		err = backends.Errorf(backends.ErrUnavailable, "LUN of volume %s was gone right after its create; retry", id)
	}
	if err != nil {
		return nil, false, err
	}
	return s.toVolume(id, lun), false, nil
}

// madeOnce finds a LUN just made, nil if there is none: once, after
// deleting the copies an abandoned attempt of the same create made in other
// pools (docs/design/economy.md §4.6).
func (s *sanEconomyDriver) madeOnce(ctx context.Context, name string) (*rest.LUN, error) {
	luns, err := s.client.ListLUNsWithAttributes(ctx, "/vol/"+s.eco.prefix+"*/"+name)
	if err != nil {
		return nil, s.failure(err, "looking up LUN %s", name)
	}
	if len(luns) == 0 {
		return nil, nil
	}
	keep, drop := keepFirstPool(luns, func(l *rest.LUN) string { return l.VolumeName })
	for _, l := range drop {
		logrus.WithContext(ctx).WithFields(logrus.Fields{"lun": name, "flexvol": l.VolumeName, "kept": keep.VolumeName}).
			Warn("an earlier attempt made the LUN in another pool too: deleting that copy")
		if err := s.client.DeleteLUN(ctx, l.UUID); err != nil && !rest.IsNotFound(err) {
			return nil, s.failure(err, "deleting copy of LUN %s in %s", name, l.VolumeName)
		}
	}
	return keep, nil
}

func (s *sanEconomyDriver) poolGone(ctx context.Context, name string) bool {
	_, err := s.client.GetVolume(ctx, name)
	return rest.IsNotFound(err)
}

// cloneLUN makes a volume a LUN clone of its source: a LUN, or a snapshot
// LUN, in the source's pool, as ONTAP clones only within a volume (and
// Trident places clones there whatever lunsPerFlexvol). The clone comes
// with its source's attributes; its own record replaces the source's.
func (s *sanEconomyDriver) cloneLUN(ctx context.Context, req *backends.CreateRequest, name string, attrs map[string]string) (*backends.Volume, error) {
	ctx, cancel := detach(ctx)
	defer cancel()
	src, err := s.cloneSource(req.Source)
	if err != nil {
		return nil, err
	}
	r, err := s.eco.reserveIn(ctx, src.VolumeName, max(req.SizeBytes, src.Size))
	if err != nil {
		return nil, err
	}
	defer r.release()
	if err := s.eco.ensureSize(ctx, r.p); err != nil {
		return nil, err
	}
	path := "/vol/" + src.VolumeName + "/" + name
	lun, err := s.client.CloneLUN(ctx, src.Path, path)
	if rest.IsAlreadyExists(err) {
		lun, err = s.client.GetLUN(ctx, path) // an earlier attempt made it
	}
	if rest.IsLUNLimitReached(err) {
		return nil, backends.Errorf(backends.ErrExhausted, "FlexVol %s holds as many LUNs as ONTAP allows; clone %s does not fit: %w", src.VolumeName, path, err)
	}
	if err != nil {
		return nil, s.createFailure(err, "cloning LUN %s into %s", src.Path, path)
	}
	for _, k := range []string{lunAttrFSType, lunAttrMeta} {
		if err := s.client.SetLUNAttribute(ctx, lun.UUID, k, attrs[k]); err != nil {
			return nil, s.failure(err, "setting attribute %s of LUN %s", k, path)
		}
	}
	if req.SizeBytes > lun.Size {
		if err := s.client.ResizeLUN(ctx, lun.UUID, req.SizeBytes); err != nil {
			return nil, s.failure(err, "growing clone %s to %d bytes", path, req.SizeBytes)
		}
		lun.Size = req.SizeBytes
	}
	r.commit()
	lun.Attributes = attrs
	return s.toVolume(req.Name, lun), nil
}

// cloneSource is the LUN a clone is made from.
func (s *sanEconomyDriver) cloneSource(src *backends.Source) (*rest.LUN, error) {
	switch {
	case src.Snapshot != nil:
		sh, ok := src.Snapshot.Handle.(*lunSnapshotHandle)
		if !ok {
			return nil, backends.Errorf(backends.ErrInvalid, "snapshot %s is not an ontap-san-economy snapshot", src.Snapshot.Name)
		}
		return &sh.lun, nil
	case src.Volume != nil:
		if h := handleOf(src.Volume); h != nil && h.lun != nil {
			return h.lun, nil
		}
		return nil, backends.Errorf(backends.ErrInvalid, "volume %s is not an ontap-san-economy volume", src.Volume.ID)
	}
	return nil, backends.Errorf(backends.ErrInvalid, "clone without a source")
}
