package ontap

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// handle is what a driver keeps in backends.Volume.Handle: the FlexVol as
// read by the lookup, so the rest of the call needs no second read.
type handle struct {
	vol  *rest.Volume
	meta *volumeMeta // nil for volumes made by Trident or by hand
	lun  *rest.LUN   // ontap-san, when read
	// cached: the volume came from the identity cache (identities.go), not
	// from a lookup made for this call.
	cached bool
}

func handleOf(v *backends.Volume) *handle {
	h, _ := v.Handle.(*handle)
	return h
}

func (d *driver) volumeName(csiName string) string { return volumeName(d.cfg.StoragePrefix, csiName) }

// recordedName is the FlexVol name of the volume meta records: the one it
// was created under when that was not the naming rule's.
func (d *driver) recordedName(meta *volumeMeta) string {
	if meta.InternalName != "" {
		return meta.InternalName
	}
	return d.volumeName(meta.Name)
}

// lookup reads the FlexVol of a volume ID. A FlexVol under the right name
// whose record names another CSI volume belongs to that one (two names
// mapping to one ONTAP name), so for this ID it does not exist. A FlexClone
// without a record of its own is reported partial: a clone whose create
// stopped before it got its comment (ONTAP leaves it empty or copies the
// parent's), or one Trident made; the retried create completes it.
//
// name is the FlexVol's name: the naming rule's, or what the volume's
// records say (VolumeAt).
func (d *driver) lookup(ctx context.Context, id, name string) (*rest.Volume, *volumeMeta, bool, error) {
	if !volumeNameRE.MatchString(name) || len(name) > maxVolumeName {
		// Not a FlexVol name: checked before ONTAP is asked.
		return nil, nil, false, backends.Errorf(backends.ErrNotFound, "volume %s not found (%q is no ONTAP volume name)", id, name)
	}
	if err := d.ready(ctx); err != nil {
		return nil, nil, false, err
	}
	v, err := d.client.GetVolume(ctx, name)
	if err != nil {
		return nil, nil, false, d.failure(err, "looking up volume %s", id)
	}
	_, meta := decodeComment(v.Comment)
	switch {
	case meta != nil && meta.Name == id:
		return v, meta, false, nil
	case v.IsClone && (meta == nil || v.CloneParentVolume == d.recordedName(meta)):
		parentID := ""
		if meta != nil {
			parentID = meta.Name
		} else if parentID, err = d.parentID(ctx, v.CloneParentVolume); err != nil {
			return nil, nil, false, err
		}
		if parentID == "" {
			return v, nil, false, nil // a clone of something not ours
		}
		// Describe it from ONTAP's clone information, so the retried
		// create can tell it asked for this very clone.
		m := &volumeMeta{Name: id, SourceVolumeID: parentID}
		if v.CloneParentSnapshot != v.Name {
			m.SourceVolumeID, m.SourceSnapshotID = "", parentID+"/"+v.CloneParentSnapshot
		}
		return v, m, true, nil
	case meta != nil:
		return nil, nil, false, backends.Errorf(backends.ErrNotFound,
			"volume %s not found (ONTAP volume %s belongs to %s)", id, name, meta.Name)
	}
	return v, nil, false, nil
}

// parentID returns the volume ID of a clone's parent FlexVol, "" if the
// parent is not a volume of this backend.
func (d *driver) parentID(ctx context.Context, parent string) (string, error) {
	p, err := d.client.GetVolume(ctx, parent)
	if rest.IsNotFound(err) {
		return "", nil
	}
	if err != nil {
		return "", d.failure(err, "reading clone parent %s", parent)
	}
	_, meta := decodeComment(p.Comment)
	id, ok := d.volumeID(p, meta)
	if !ok {
		return "", nil
	}
	return id, nil
}

// toVolume describes a FlexVol for the controller. usable is the size to
// report when the volume carries no record of the size the CO asked for.
func (d *driver) toVolume(id string, v *rest.Volume, meta *volumeMeta, usable int64) *backends.Volume {
	bv := &backends.Volume{
		ID: id, Backend: d.Name(), SizeBytes: usable,
		Context: map[string]string{
			"backendUUID": d.backendUUID, "name": id, "internalName": v.Name, "protocol": string(d.protocol()),
		},
		Handle: &handle{vol: v, meta: meta},
	}
	if meta != nil {
		bv.Owner, bv.Pool = meta.Backend, meta.Pool
		bv.AccessType, bv.FSType = backends.AccessType(meta.AccessType), meta.FSType
		bv.SourceSnapshotID, bv.SourceVolumeID = meta.SourceSnapshotID, meta.SourceVolumeID
		if meta.Size > 0 {
			bv.SizeBytes = meta.Size
		}
	}
	bv.Topologies = d.poolTopologies(bv.Pool)
	if meta != nil && meta.Topologies != nil {
		bv.Topologies = meta.Topologies
	}
	return bv
}

// volumeID names an ONTAP volume of this backend for the CO: the CSI name
// it recorded, or the PV name of a Trident volume. ok is false for volumes
// that are not ours to report (another prefix's, renamed, hand-made).
func (d *driver) volumeID(v *rest.Volume, meta *volumeMeta) (string, bool) {
	if meta != nil {
		return meta.Name, d.recordedName(meta) == v.Name
	}
	return pvNameFromVolume(d.cfg.StoragePrefix, v.Name)
}

// adopt makes sure the FlexVol found under name, the name of a create
// request, is the one an earlier attempt of this request made, and not
// another volume (e.g. another claim's, whose nameTemplate renders the
// same name). It decides from one read: ONTAP's answer that the name is
// taken may precede the volume becoming visible.
func (d *driver) adopt(ctx context.Context, req *backends.CreateRequest, name string) (*rest.Volume, error) {
	v, meta, partialClone, err := d.lookup(ctx, req.Name, name)
	switch {
	case rest.IsNotFound(err):
		// ONTAP has no volume of that name, yet refused the create as a
		// duplicate: the create job of an earlier attempt, whose caller
		// gave up, still runs.
		return nil, backends.Errorf(backends.ErrPending, "volume %s is still being created by an earlier request", req.Name)
	case errors.Is(err, backends.ErrNotFound):
		// The volume exists on ONTAP but records another CSI volume.
		return nil, backends.Errorf(backends.ErrAlreadyExists, "ONTAP volume %s exists and belongs to another volume: %w", name, err)
	case err != nil:
		return nil, err
	}
	if meta == nil && !partialClone {
		return nil, backends.Errorf(backends.ErrAlreadyExists, "ONTAP volume %s exists and was not made by this driver", v.Name)
	}
	if meta != nil && meta.Size > 0 && meta.Size != req.SizeBytes {
		// The controller checks a retry against the volume it finds by
		// ID; one at a nameTemplate's name it finds only here.
		return nil, backends.Errorf(backends.ErrAlreadyExists, "volume %s exists with %d bytes, the request asks for %d", req.Name, meta.Size, req.SizeBytes)
	}
	return v, nil
}

// createFlexVol creates the FlexVol of a new volume, or adopts the one an
// interrupted earlier attempt created.
// A suspended backend (userState) makes none, as in Trident; clones are
// not refused. With balanced placement ONTAP picks the aggregate, and
// limitAggregateUsage has no aggregate to measure (Trident skips it too).
func (d *driver) createFlexVol(ctx context.Context, req *backends.CreateRequest, c rest.VolumeCreate) (*rest.Volume, error) {
	if d.suspended() {
		return nil, backends.Errorf(backends.ErrUnavailable, "backend %s is suspended (userState): it takes no new volumes", d.Name())
	}
	create := d.client.CreateVolume
	if d.balanced(req.Pool) {
		create = d.client.CreateVolumeBalanced
	} else if err := d.placeOnAggregate(ctx, req.Pool, &c); err != nil {
		return nil, err
	}
	aggr := c.Aggregate
	err := create(ctx, c)
	switch {
	case err == nil:
		return &rest.Volume{Name: c.Name, Size: c.Size, Comment: c.Comment, JunctionPath: c.JunctionPath, ExportPolicy: c.ExportPolicy}, nil
	case rest.IsAlreadyExists(err) && req.Fresh:
		return nil, backends.Errorf(backends.ErrNameTaken, "creating volume %s: %w", c.Name, err)
	case rest.IsAlreadyExists(err):
		return d.adopt(ctx, req, c.Name)
	case d.lacksSpace(ctx, err, aggr, c.SpaceReserve, c.Size):
		return nil, backends.Errorf(backends.ErrExhausted, "creating volume %s: aggregate %s cannot hold it: %w", c.Name, aggr, err)
	}
	return nil, d.createFailure(err, "creating volume %s", c.Name)
}

// placeOnAggregate picks the aggregate of a new FlexVol in pool and checks
// limitAggregateUsage on it.
func (d *driver) placeOnAggregate(ctx context.Context, pool string, c *rest.VolumeCreate) error {
	aggr, err := d.aggregateFor(ctx, pool)
	if err != nil {
		return err
	}
	c.Aggregate = aggr
	if err := d.checkAggregateLimit(ctx, aggr, c.SpaceReserve, c.Size); err != nil {
		// The retry of a create whose volume exists already counts it in
		// the aggregate's usage: let it go on to adopt the volume.
		if _, gerr := d.client.GetVolume(ctx, c.Name); gerr != nil {
			return err
		}
	}
	return nil
}

// cloneFlexVol creates a FlexClone for req (or adopts a half-made one) and
// gives it its own record. The clone of a volume uses a snapshot named
// after the clone, which DeleteVolume removes with the clone.
func (d *driver) cloneFlexVol(ctx context.Context, req *backends.CreateRequest, s *settings, name string) (*rest.Volume, error) {
	src := req.Source
	var parent *backends.Volume
	var parentSnap string
	switch {
	case src.Snapshot != nil:
		parentSnap = src.Snapshot.Name
		f, ok := src.Snapshot.Handle.(*snapshotHandle)
		if !ok {
			return nil, fmt.Errorf("clone source snapshot %s has no handle", src.Snapshot.Name)
		}
		parent = f.volume
	case src.Volume != nil:
		parent = src.Volume
	default:
		return nil, backends.Errorf(backends.ErrInvalid, "clone without a source")
	}
	ph := handleOf(parent)
	if ph == nil {
		return nil, fmt.Errorf("clone source %s has no handle", parent.ID)
	}
	if parentSnap == "" {
		parentSnap = name
		if err := d.client.CreateSnapshot(ctx, ph.vol.UUID, parentSnap); err != nil && !rest.IsAlreadyExists(err) {
			return nil, d.createFailure(err, "taking snapshot %s of %s for the clone", parentSnap, parent.ID)
		}
	}
	err := d.client.CloneVolume(ctx, rest.VolumeClone{Name: name, ParentVolume: ph.vol.Name, ParentSnapshot: parentSnap})
	if err != nil && !rest.IsAlreadyExists(err) {
		return nil, d.createFailure(err, "cloning %s into %s", ph.vol.Name, name)
	}
	if err != nil {
		if _, err := d.adopt(ctx, req, name); err != nil {
			return nil, err
		}
	}
	v, err := d.client.GetVolume(ctx, name)
	if err != nil {
		return nil, d.failure(err, "reading clone %s", name)
	}
	if s.SplitOnClone && !v.CloneSplitInitiated && v.IsClone {
		if err := d.client.ModifyVolume(ctx, v.UUID, rest.VolumeModify{SplitClone: true}); err != nil {
			return nil, d.failure(err, "starting the split of clone %s", name)
		}
	}
	return v, nil
}

// ListVolumes implements backends.Backend: the volumes under the storage
// prefix that carry our record or Trident's naming. A volume without a
// recorded size reports what it holds: the FlexVol less its snapshot
// reserve, or for ontap-san the size of its LUN.
func (d *driver) ListVolumes(ctx context.Context) ([]*backends.Volume, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	vols, err := d.client.ListVolumes(ctx, d.listPrefix())
	if err != nil {
		return nil, d.failure(err, "listing volumes")
	}
	var lunSize map[string]int64 // read once, when first needed
	var out []*backends.Volume
	for i := range vols {
		v := &vols[i]
		_, meta := decodeComment(v.Comment)
		id, ok := d.volumeID(v, meta)
		if !ok {
			continue
		}
		usable := v.Size * int64(100-v.SnapshotReservePercent) / 100
		if (meta == nil || meta.Size == 0) && d.lunSizes != nil {
			if lunSize == nil {
				if lunSize, err = d.lunSizes(ctx); err != nil {
					return nil, err
				}
			}
			usable = lunSize[v.Name]
		}
		out = append(out, d.toVolume(id, v, meta, usable))
	}
	return out, nil
}

// deleteFlexVol deletes a FlexVol; gone already is done. A volume with
// FlexClones cannot go before them: ErrInUse, naming the clones.
func (d *driver) deleteFlexVol(ctx context.Context, vol *backends.Volume) error {
	h := handleOf(vol)
	skip := d.poolDefaults(vol.Pool).SkipRecoveryQueue
	if h.meta != nil && h.meta.SkipRecoveryQueue != nil {
		skip = *h.meta.SkipRecoveryQueue
	}
	err := d.client.DeleteVolume(ctx, h.vol.UUID, skip)
	switch {
	case err == nil || rest.IsNotFound(err):
	case rest.IsInUse(err):
		// Clones, or busy: name the clones if that is why.
		clones, lerr := d.clonesOf(ctx, h.vol.Name, "")
		if lerr != nil || len(clones) == 0 {
			return d.failure(err, "deleting volume %s", vol.ID)
		}
		return backends.Errorf(backends.ErrInUse, "volume %s has clones %v; delete them first", vol.ID, names(clones))
	default:
		return d.failure(err, "deleting volume %s", vol.ID)
	}
	if vol.SourceVolumeID != "" {
		d.deleteCloneSnapshot(ctx, vol)
	}
	return nil
}

// deleteCloneSnapshot removes the snapshot a clone of a volume was made
// from (named after the clone), now that the clone is gone. It is best
// effort: a leftover snapshot costs space, not correctness.
func (d *driver) deleteCloneSnapshot(ctx context.Context, vol *backends.Volume) {
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": vol.ID, "source": vol.SourceVolumeID})
	// A clone names its parent until split; a split one's parent is found
	// by the naming rule.
	parentName := handleOf(vol).vol.CloneParentVolume
	if parentName == "" {
		parentName = d.volumeName(vol.SourceVolumeID)
	}
	parent, err := d.client.GetVolume(ctx, parentName)
	if err != nil {
		if !rest.IsNotFound(err) {
			log.WithError(err).Warn("could not find the clone's source to remove its snapshot")
		}
		return
	}
	name := handleOf(vol).vol.Name
	snap, err := d.client.GetSnapshot(ctx, parent.UUID, name)
	if err != nil {
		return
	}
	if err := d.client.DeleteSnapshot(ctx, parent.UUID, snap.UUID); err != nil && !rest.IsNotFound(err) {
		log.WithError(err).Warn("could not remove the snapshot the clone was made from")
	}
}

// clonesOf names the FlexClones of a volume (of one of its snapshots when
// snapshot is set).
func (d *driver) clonesOf(ctx context.Context, volume, snapshot string) ([]*rest.Volume, error) {
	vols, err := d.client.ListVolumes(ctx, "")
	if err != nil {
		return nil, err
	}
	var out []*rest.Volume
	for i := range vols {
		v := &vols[i]
		if v.IsClone && v.CloneParentVolume == volume && (snapshot == "" || v.CloneParentSnapshot == snapshot) {
			out = append(out, v)
		}
	}
	return out, nil
}

// newComment renders the comment of a volume from its record.
func (d *driver) newComment(meta *volumeMeta) (string, error) {
	c, err := encodeComment(d.poolLabels(meta.Pool), meta)
	if err != nil {
		return "", backends.Errorf(backends.ErrInvalid, "%v", err)
	}
	return c, nil
}

// recordSize returns the comment of a volume after it grew to size,
// creating a record for a volume Trident made (it has none).
func (d *driver) recordSize(id string, h *handle, size int64) (string, error) {
	meta := h.meta
	if meta == nil {
		meta = &volumeMeta{Name: id}
	}
	m := *meta
	m.Size = size
	labels, _ := decodeComment(h.vol.Comment)
	c, err := encodeComment(labels, &m)
	if err != nil {
		return "", backends.Errorf(backends.ErrInvalid, "%v", err)
	}
	return c, nil
}

func names(vols []*rest.Volume) []string {
	out := make([]string, 0, len(vols))
	for _, v := range vols {
		out = append(out, v.Name)
	}
	slices.Sort(out)
	return out
}

// resizeFlexVol grows the FlexVol of vol so that size bytes stay usable
// beside the snapshot reserve, times factor (the LUN headroom of
// ontap-san, whose LUN grows to size when lun is set), and records the new
// size, in one PATCH, which enables large size when the new size needs it.
func (d *driver) resizeFlexVol(ctx context.Context, vol *backends.Volume, size int64, factor float64, lun bool) error {
	h := handleOf(vol)
	want, large, err := d.fitFlexVol(size, h.vol.SnapshotReservePercent, factor, lun)
	if err != nil {
		return err
	}
	comment, err := d.recordSize(vol.ID, h, size)
	if err != nil {
		return err
	}
	m := rest.VolumeModify{Comment: &comment, LargeSize: large}
	if want > h.vol.Size {
		if len(h.vol.Aggregates) > 0 {
			if err := d.checkAggregateLimit(ctx, h.vol.Aggregates[0], h.vol.SpaceReserve, want-h.vol.Size); err != nil {
				return err
			}
		}
		m.Size = &want
	}
	err = d.client.ModifyVolume(ctx, h.vol.UUID, m)
	if err != nil && m.Size != nil && len(h.vol.Aggregates) > 0 &&
		d.lacksSpace(ctx, err, h.vol.Aggregates[0], h.vol.SpaceReserve, want-h.vol.Size) {
		return backends.Errorf(backends.ErrExhausted, "resizing volume %s: aggregate %s cannot hold the growth: %w", vol.ID, h.vol.Aggregates[0], err)
	}
	if err != nil {
		return d.failure(err, "resizing volume %s", vol.ID)
	}
	return nil
}
