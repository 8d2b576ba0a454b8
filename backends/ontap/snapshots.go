package ontap

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// snapshotHandle is a driver's backends.Snapshot.Handle.
type snapshotHandle struct {
	volume *backends.Volume // carries the FlexVol's handle
	uuid   string
	// The FlexVol holding the snapshot: the volume's own, or an
	// ontap-nas-economy volume's pool.
	flexvolUUID, flexvolName string
}

// SnapshotName implements backends.Backend.
func (d *driver) SnapshotName(csiName string) string { return snapshotName(csiName) }

// CreateSnapshot takes an ONTAP snapshot of the FlexVol (for ontap-san the
// LUN with it), or returns the one an earlier attempt took.
func (d *driver) CreateSnapshot(ctx context.Context, vol *backends.Volume, name string) (*backends.Snapshot, error) {
	h := handleOf(vol)
	sn := snapshotName(name)
	if err := d.client.CreateSnapshot(ctx, h.vol.UUID, sn); err != nil && !rest.IsAlreadyExists(err) {
		return nil, d.createFailure(err, "taking snapshot %s of volume %s", sn, vol.ID)
	}
	s, err := d.client.GetSnapshot(ctx, h.vol.UUID, sn)
	if err != nil {
		return nil, d.failure(err, "reading snapshot %s of volume %s", sn, vol.ID)
	}
	return d.toSnapshot(vol, s), nil
}

// toSnapshot describes an ONTAP snapshot. ONTAP snapshots are usable as
// soon as they exist; a volume restored from one has the volume's size.
func (d *driver) toSnapshot(vol *backends.Volume, s *rest.Snapshot) *backends.Snapshot {
	h := handleOf(vol)
	return flexvolSnapshot(vol, s, h.vol.UUID, h.vol.Name)
}

// flexvolSnapshot describes a snapshot of the FlexVol flexvol taken for
// vol.
func flexvolSnapshot(vol *backends.Volume, s *rest.Snapshot, flexvolUUID, flexvolName string) *backends.Snapshot {
	return &backends.Snapshot{
		Name: s.Name, VolumeID: vol.ID, CreatedAt: s.CreateTime, SizeBytes: vol.SizeBytes, Ready: true,
		Handle: &snapshotHandle{volume: vol, uuid: s.UUID, flexvolUUID: flexvolUUID, flexvolName: flexvolName},
	}
}

// Snapshots implements backends.Backend. Listing by name across volumes
// takes one request (ONTAP's bulk snapshot endpoint); the volumes are read
// only when there is a snapshot to report.
func (d *driver) Snapshots(ctx context.Context, f backends.SnapshotFilter) ([]*backends.Snapshot, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	if f.Volume != nil {
		h := handleOf(f.Volume)
		if f.Name != "" {
			s, err := d.client.GetSnapshot(ctx, h.vol.UUID, f.Name)
			if rest.IsNotFound(err) {
				return nil, nil
			}
			if err != nil {
				return nil, d.failure(err, "reading snapshot %s of volume %s", f.Name, f.Volume.ID)
			}
			return []*backends.Snapshot{d.toSnapshot(f.Volume, s)}, nil
		}
		snaps, err := d.client.ListSnapshots(ctx, h.vol.UUID)
		if err != nil {
			return nil, d.failure(err, "listing the snapshots of volume %s", f.Volume.ID)
		}
		out := make([]*backends.Snapshot, 0, len(snaps))
		for i := range snaps {
			out = append(out, d.toSnapshot(f.Volume, &snaps[i]))
		}
		return out, nil
	}
	recs, err := d.client.ListAllSnapshots(ctx, d.listPrefix(), f.Name)
	if err != nil {
		return nil, d.failure(err, "listing snapshots")
	}
	if len(recs) == 0 {
		return nil, nil
	}
	vols, err := d.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	byName := make(map[string]*backends.Volume, len(vols))
	for _, v := range vols {
		byName[handleOf(v).vol.Name] = v
	}
	var out []*backends.Snapshot
	for i := range recs {
		if v := byName[recs[i].VolumeName]; v != nil {
			out = append(out, d.toSnapshot(v, &recs[i].Snapshot))
		}
	}
	return out, nil
}

// DeleteSnapshot deletes a snapshot. One that FlexClones still share
// cannot go; as Trident does, the clones are split from it, and the
// delete succeeds once the split has finished (the CO retries).
func (d *driver) DeleteSnapshot(ctx context.Context, snap *backends.Snapshot) error {
	sh := snap.Handle.(*snapshotHandle)
	err := d.client.DeleteSnapshot(ctx, sh.flexvolUUID, sh.uuid)
	if err == nil || rest.IsNotFound(err) {
		return nil
	}
	if !rest.IsInUse(err) {
		return d.failure(err, "deleting snapshot %s of volume %s", snap.Name, snap.VolumeID)
	}
	clones, lerr := d.clonesOf(ctx, sh.flexvolName, snap.Name)
	if lerr != nil || len(clones) == 0 {
		return d.failure(err, "deleting snapshot %s of volume %s", snap.Name, snap.VolumeID)
	}
	for _, c := range clones {
		if c.CloneSplitInitiated {
			continue
		}
		logrus.WithContext(ctx).WithFields(logrus.Fields{"snapshot": snap.Name, "clone": c.Name}).
			Info("splitting a clone from the snapshot being deleted")
		if err := d.client.ModifyVolume(ctx, c.UUID, rest.VolumeModify{SplitClone: true}); err != nil {
			return d.failure(err, "splitting clone %s from snapshot %s", c.Name, snap.Name)
		}
	}
	return backends.Errorf(backends.ErrInUse, "snapshot %s of volume %s backs clones %v; they are being split from it, retry once that is done",
		snap.Name, snap.VolumeID, names(clones))
}
