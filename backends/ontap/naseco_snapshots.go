package ontap

import (
	"context"
	"encoding/json"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Snapshots of ontap-nas-economy volumes are snapshots of their pool
// FlexVol, named after the CSI snapshot, as Trident's (so a snapshot holds
// every qtree of the pool). Trident refuses them unless the pool shows
// .snapshot (snapshotDir): they are only of use through it. Which volume
// a snapshot was taken of is not on ONTAP for Trident's; ours record it in
// the snapshot's comment, so that listing a volume's snapshots, and
// deleting them with it, concerns only its own (docs/design/economy.md
// §5.2).

type snapshotComment struct {
	Volume string `json:"volume"`
}

func encodeSnapshotComment(volumeID string) string {
	b, _ := json.Marshal(map[string]snapshotComment{commentMeta: {Volume: volumeID}})
	return string(b)
}

// snapshotVolume is the volume ID a snapshot's comment records, "" if none.
func snapshotVolume(comment string) string {
	var m map[string]snapshotComment
	if comment == "" || json.Unmarshal([]byte(comment), &m) != nil {
		return ""
	}
	return m[commentMeta].Volume
}

// CreateSnapshot takes a snapshot of the volume's pool FlexVol.
func (n *nasEconomyDriver) CreateSnapshot(ctx context.Context, vol *backends.Volume, name string) (*backends.Snapshot, error) {
	q := qtreeHandleOf(vol).qtree
	pool, err := n.client.GetVolume(ctx, q.Volume)
	if err != nil {
		return nil, n.failure(err, "reading pool FlexVol %s of volume %s", q.Volume, vol.ID)
	}
	if !pool.SnapshotDirAccess {
		return nil, backends.Errorf(backends.ErrInvalid, "snapshots of ontap-nas-economy volumes need snapshotDir: true on their pool %s (Trident: \"snapshots cannot be taken if snapdir access is disabled\")", pool.Name)
	}
	sn := snapshotName(name)
	err = n.client.CreateSnapshotWithComment(ctx, pool.UUID, sn, encodeSnapshotComment(vol.ID))
	if err != nil && !rest.IsAlreadyExists(err) {
		return nil, n.createFailure(err, "taking snapshot %s of pool %s for volume %s", sn, pool.Name, vol.ID)
	}
	s, err := n.client.GetSnapshot(ctx, pool.UUID, sn)
	if err != nil {
		return nil, n.failure(err, "reading snapshot %s of pool %s", sn, pool.Name)
	}
	if owner := snapshotVolume(s.Comment); owner != vol.ID {
		return nil, backends.Errorf(backends.ErrAlreadyExists, "pool %s has a snapshot %s taken for %q", pool.Name, sn, owner)
	}
	return flexvolSnapshot(vol, s, pool.UUID, pool.Name), nil
}

// Snapshots implements backends.Backend. A snapshot is the volume's when
// its comment names it; asked by name, a snapshot without a record (made
// by Trident for this volume's ID) is the volume's too.
func (n *nasEconomyDriver) Snapshots(ctx context.Context, f backends.SnapshotFilter) ([]*backends.Snapshot, error) {
	if err := n.ready(ctx); err != nil {
		return nil, err
	}
	if f.Volume != nil {
		return n.volumeSnapshots(ctx, f.Volume, f.Name)
	}
	recs, err := n.client.ListAllSnapshots(ctx, n.eco.prefix, f.Name)
	if err != nil {
		return nil, n.failure(err, "listing the snapshots of the pools")
	}
	var out []*backends.Snapshot
	var vols map[string]*backends.Volume // read once, when first needed
	for i := range recs {
		id := snapshotVolume(recs[i].Comment)
		if id == "" {
			continue
		}
		if vols == nil {
			if vols, err = volumesByID(ctx, n); err != nil {
				return nil, err
			}
		}
		if v := vols[id]; v != nil && qtreeHandleOf(v).qtree.VolumeUUID == recs[i].VolumeUUID {
			out = append(out, flexvolSnapshot(v, &recs[i].Snapshot, recs[i].VolumeUUID, recs[i].VolumeName))
		}
	}
	return out, nil
}

func (n *nasEconomyDriver) volumeSnapshots(ctx context.Context, vol *backends.Volume, name string) ([]*backends.Snapshot, error) {
	q := qtreeHandleOf(vol).qtree
	var snaps []rest.Snapshot
	if name != "" {
		s, err := n.client.GetSnapshot(ctx, q.VolumeUUID, name)
		if rest.IsNotFound(err) {
			return nil, nil
		}
		if err != nil {
			return nil, n.failure(err, "reading snapshot %s of pool %s", name, q.Volume)
		}
		if owner := snapshotVolume(s.Comment); owner != "" && owner != vol.ID {
			return nil, nil
		}
		snaps = []rest.Snapshot{*s}
	} else {
		all, err := n.client.ListSnapshots(ctx, q.VolumeUUID)
		if err != nil {
			return nil, n.failure(err, "listing the snapshots of pool %s", q.Volume)
		}
		for _, s := range all {
			if snapshotVolume(s.Comment) == vol.ID {
				snaps = append(snaps, s)
			}
		}
	}
	out := make([]*backends.Snapshot, 0, len(snaps))
	for i := range snaps {
		out = append(out, flexvolSnapshot(vol, &snaps[i], q.VolumeUUID, q.Volume))
	}
	return out, nil
}

// deleteSnapshotsOf deletes the snapshots taken of a volume, as deleting an
// ontap-nas volume deletes its FlexVol's.
func (n *nasEconomyDriver) deleteSnapshotsOf(ctx context.Context, vol *backends.Volume) error {
	snaps, err := n.volumeSnapshots(ctx, vol, "")
	if err != nil {
		return err
	}
	for _, s := range snaps {
		if err := n.DeleteSnapshot(ctx, s); err != nil {
			return err
		}
	}
	return nil
}
