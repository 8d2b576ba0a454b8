package ontap

import (
	"context"
	"slices"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Group snapshots (CSI CreateVolumeGroupSnapshot) of ontap-nas and
// ontap-san volumes use an ONTAP consistency group (ONTAP 9.10.1+,
// docs/design/ontap-rest.md §3.13): a group of the volumes' FlexVols is
// made for the call, snapshot once (every member at the same instant,
// writes fenced), and deleted again, which keeps the volumes and their
// snapshots. A FlexVol belongs to at most one consistency group, so a
// FlexVol an administrator put in one cannot be in a group snapshot.

// cgName is the consistency group of a group snapshot: named after it, so
// a retried call finds the group an interrupted one left.
func cgName(snapshot string) string { return "cg_" + snapshot }

// CreateGroupSnapshot implements backends.GroupSnapshotter.
func (d *driver) CreateGroupSnapshot(ctx context.Context, vols []*backends.Volume, name string) ([]*backends.Snapshot, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	sn := snapshotName(name)
	have, err := d.memberSnapshots(ctx, vols, sn)
	if err != nil {
		return nil, err
	}
	switch {
	case len(have) == len(vols):
		return have, d.dropGroup(ctx, sn) // an earlier call took them
	case len(have) > 0:
		return nil, backends.Errorf(backends.ErrAlreadyExists,
			"volume %s already has a snapshot %s that is not part of this group snapshot", have[0].VolumeID, sn)
	}
	flexvols := make([]string, 0, len(vols))
	for _, v := range vols {
		flexvols = append(flexvols, handleOf(v).vol.Name)
	}
	err = d.client.CreateConsistencyGroup(ctx, cgName(sn), flexvols)
	switch {
	case rest.IsAlreadyExists(err): // an interrupted call's group
	case rest.IsInUse(err):
		return nil, backends.Errorf(backends.ErrInUse, "a volume of the group snapshot is in another ONTAP consistency group: %w", err)
	case rest.IsNotFound(err):
		return nil, backends.Errorf(backends.ErrInvalid,
			"group snapshots need ONTAP 9.10.1 or later (consistency groups; %s runs %s): %w", d.Name(), d.ontapVersion, err)
	case err != nil:
		return nil, d.failure(err, "grouping volumes for group snapshot %s", sn)
	}
	g, err := d.client.GetConsistencyGroup(ctx, cgName(sn))
	if err != nil {
		return nil, d.failure(err, "reading consistency group %s", cgName(sn))
	}
	if !sameNames(g.Volumes, flexvols) {
		return nil, backends.Errorf(backends.ErrAlreadyExists,
			"consistency group %s of group snapshot %s holds other volumes (%v)", g.Name, sn, g.Volumes)
	}
	if err := d.client.SnapshotConsistencyGroup(ctx, g.UUID, sn); err != nil && !rest.IsAlreadyExists(err) {
		return nil, d.failure(err, "taking group snapshot %s", sn)
	}
	if err := d.dropGroup(ctx, sn); err != nil {
		return nil, err
	}
	if have, err = d.memberSnapshots(ctx, vols, sn); err != nil {
		return nil, err
	}
	if len(have) != len(vols) {
		return nil, backends.Errorf(backends.ErrUnavailable, "group snapshot %s: %d of %d member snapshots visible yet", sn, len(have), len(vols))
	}
	return have, nil
}

func sameNames(a, b []string) bool {
	a, b = slices.Clone(a), slices.Clone(b)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// memberSnapshots returns the snapshots called sn of those of vols that
// have one.
func (d *driver) memberSnapshots(ctx context.Context, vols []*backends.Volume, sn string) ([]*backends.Snapshot, error) {
	var out []*backends.Snapshot
	for _, v := range vols {
		s, err := d.client.GetSnapshot(ctx, handleOf(v).vol.UUID, sn)
		if rest.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, d.failure(err, "reading snapshot %s of volume %s", sn, v.ID)
		}
		out = append(out, d.toSnapshot(v, s))
	}
	return out, nil
}

// dropGroup deletes the consistency group of group snapshot sn, if it is
// still there: its volumes must be free for the next group snapshot.
func (d *driver) dropGroup(ctx context.Context, sn string) error {
	g, err := d.client.GetConsistencyGroup(ctx, cgName(sn))
	if rest.IsNotFound(err) {
		return nil
	}
	if err == nil {
		err = d.client.DeleteConsistencyGroup(ctx, g.UUID)
	}
	if err != nil && !rest.IsNotFound(err) {
		return d.failure(err, "deleting consistency group %s", cgName(sn))
	}
	logrus.WithContext(ctx).WithField("group", cgName(sn)).Debug("consistency group of a group snapshot deleted")
	return nil
}

// errEconomyGroup refuses group snapshots of economy volumes, which share
// FlexVols with volumes outside the group.
func errEconomyGroup(driver string) error {
	return backends.Errorf(backends.ErrInvalid, "%s volumes share FlexVols: group snapshots are not supported", driver)
}

// CreateGroupSnapshot implements backends.GroupSnapshotter: refused.
func (n *nasEconomyDriver) CreateGroupSnapshot(context.Context, []*backends.Volume, string) ([]*backends.Snapshot, error) {
	return nil, errEconomyGroup(n.Driver())
}

// CreateGroupSnapshot implements backends.GroupSnapshotter: refused.
func (s *sanEconomyDriver) CreateGroupSnapshot(context.Context, []*backends.Volume, string) ([]*backends.Snapshot, error) {
	return nil, errEconomyGroup(s.Driver())
}
