package ontap

import (
	"context"
	"encoding/json"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Snapshots of ontap-san-economy volumes are LUN clones in the volume's
// pool, "<lun>_snapshot_<snapshot>" (Trident's CreateSnapshot): they share
// the LUN's blocks, do not count against lunsPerFlexvol, and a volume is
// cloned from one by cloning it again. Trident's snapshot LUN name turns
// '-' into '_'; the attribute below keeps the CSI snapshot name and the
// volume, so names that mapping loses come back exactly
// (docs/design/economy.md §5.4).

// lunAttrSnapshot is the attribute of a snapshot LUN with its record.
const lunAttrSnapshot = "ontap-csi-snapshot"

type lunSnapshotRecord struct {
	Name   string `json:"name"`
	Volume string `json:"volume"`
}

// lunSnapshotHandle is an ontap-san-economy snapshot's Handle.
type lunSnapshotHandle struct {
	lun rest.LUN
}

// CreateSnapshot clones the volume's LUN into its snapshot LUN.
func (s *sanEconomyDriver) CreateSnapshot(ctx context.Context, vol *backends.Volume, name string) (*backends.Snapshot, error) {
	ctx, cancel := detach(ctx)
	defer cancel()
	lun := handleOf(vol).lun
	sn := snapshotName(name)
	path := "/vol/" + lun.VolumeName + "/" + lunSnapshotName(lunLeaf(lun.Path), sn)
	r, err := s.eco.reserveIn(ctx, lun.VolumeName, lun.Size)
	if err != nil {
		return nil, err
	}
	defer r.release()
	if err := s.eco.ensureSize(ctx, r.p); err != nil {
		return nil, err
	}
	snap, err := s.client.CloneLUN(ctx, lun.Path, path)
	if rest.IsAlreadyExists(err) {
		snap, err = s.client.GetLUN(ctx, path) // an earlier attempt made it
	}
	if rest.IsLUNLimitReached(err) {
		return nil, backends.Errorf(backends.ErrExhausted, "FlexVol %s holds as many LUNs as ONTAP allows; snapshot LUN %s does not fit: %w", lun.VolumeName, path, err)
	}
	if err != nil {
		return nil, s.createFailure(err, "cloning LUN %s into snapshot LUN %s", lun.Path, path)
	}
	rec, _ := json.Marshal(lunSnapshotRecord{Name: sn, Volume: vol.ID})
	if err := s.client.SetLUNAttribute(ctx, snap.UUID, lunAttrSnapshot, string(rec)); err != nil {
		return nil, s.failure(err, "recording snapshot %s on LUN %s", sn, path)
	}
	r.commit()
	return s.toSnapshot(vol, snap, sn), nil
}

func (s *sanEconomyDriver) toSnapshot(vol *backends.Volume, lun *rest.LUN, name string) *backends.Snapshot {
	return &backends.Snapshot{
		Name: name, VolumeID: vol.ID, CreatedAt: lun.CreateTime, SizeBytes: lun.Size, Ready: true,
		Handle: &lunSnapshotHandle{lun: *lun},
	}
}

// snapshotOf reads a snapshot LUN: the snapshot's name and volume ID from
// our record, else from Trident's name.
func (s *sanEconomyDriver) snapshotOf(lun *rest.LUN) (name, volumeID, volumeLUN string, ok bool) {
	volumeLUN, name, ok = splitSnapshotLUN(lunLeaf(lun.Path))
	if !ok {
		return "", "", "", false
	}
	var rec lunSnapshotRecord
	if json.Unmarshal([]byte(lun.Attributes[lunAttrSnapshot]), &rec) == nil && rec.Name != "" {
		return rec.Name, rec.Volume, volumeLUN, true
	}
	volumeID, ok = econVolumeID(s.cfg.StoragePrefix, volumeLUN)
	return name, volumeID, volumeLUN, ok
}

// Snapshots implements backends.Backend.
func (s *sanEconomyDriver) Snapshots(ctx context.Context, f backends.SnapshotFilter) ([]*backends.Snapshot, error) {
	if err := s.ready(ctx); err != nil {
		return nil, err
	}
	pattern := "/vol/" + s.eco.prefix + "*/*" + lunSnapshotSeparator + "*"
	if f.Volume != nil {
		lun := handleOf(f.Volume).lun
		pattern = "/vol/" + lun.VolumeName + "/" + lunLeaf(lun.Path) + lunSnapshotSeparator + "*"
		if f.Name != "" {
			pattern = "/vol/" + lun.VolumeName + "/" + lunSnapshotName(lunLeaf(lun.Path), f.Name)
		}
	}
	luns, err := s.client.ListLUNsWithAttributes(ctx, pattern)
	if err != nil {
		return nil, s.failure(err, "listing snapshot LUNs")
	}
	var vols map[string]*backends.Volume
	var out []*backends.Snapshot
	for i := range luns {
		name, volID, _, ok := s.snapshotOf(&luns[i])
		if !ok || f.Name != "" && name != f.Name {
			continue
		}
		vol := f.Volume
		if vol == nil {
			if vols == nil {
				if vols, err = volumesByID(ctx, s); err != nil {
					return nil, err
				}
			}
			if vol = vols[volID]; vol == nil {
				continue
			}
		}
		if vol.ID == volID {
			out = append(out, s.toSnapshot(vol, &luns[i], name))
		}
	}
	return out, nil
}

// DeleteSnapshot deletes a snapshot LUN. Clones made from it are LUNs of
// their own: they stay.
func (s *sanEconomyDriver) DeleteSnapshot(ctx context.Context, snap *backends.Snapshot) error {
	lun := &snap.Handle.(*lunSnapshotHandle).lun
	ctx, cancel := detach(ctx)
	defer cancel()
	if err := s.deleteLUN(ctx, lun, false); err != nil {
		return err
	}
	s.poolShrunk(ctx, lun.VolumeName)
	return nil
}
