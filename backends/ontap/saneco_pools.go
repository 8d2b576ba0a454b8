package ontap

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// lunPools is the poolKind of ontap-san-economy: members are LUNs other
// than snapshot LUNs (Trident's count); the bytes are every LUN's size,
// snapshot LUNs included (Trident's getTotalLUNSize).
type lunPools struct{ s *sanEconomyDriver }

func (k lunPools) inventory(ctx context.Context) (map[string]poolUse, error) {
	luns, err := k.s.client.ListLUNs(ctx, "/vol/"+k.s.eco.prefix+"*/*")
	if err != nil {
		return nil, k.s.failure(err, "listing the LUNs of the pools")
	}
	out := map[string]poolUse{}
	for _, l := range luns {
		out[l.VolumeName] = addLUN(out[l.VolumeName], &l)
	}
	return out, nil
}

func addLUN(u poolUse, l *rest.LUN) poolUse {
	u.all++
	u.bytes += l.Size
	if _, _, snap := splitSnapshotLUN(lunLeaf(l.Path)); !snap {
		u.members++
	}
	return u
}

func (k lunPools) use(ctx context.Context, p *rest.Volume) (poolUse, error) {
	vol, err := rest.Literal(p.Name)
	if err != nil {
		return poolUse{}, k.s.failure(err, "listing the LUNs of %s", p.Name)
	}
	luns, err := k.s.client.ListLUNs(ctx, "/vol/"+vol+"/*")
	if err != nil {
		return poolUse{}, k.s.failure(err, "listing the LUNs of %s", p.Name)
	}
	var u poolUse
	for i := range luns {
		u = addLUN(u, &luns[i])
	}
	return u, nil
}

func (k lunPools) count(ctx context.Context, p *rest.Volume) (int, error) {
	u, err := k.use(ctx, p)
	return u.all, err
}

// createPool makes a FlexVol as Trident's createFlexvolForLUN does: not
// mounted, with the pool's attributes.
func (k lunPools) createPool(ctx context.Context, name string, a poolAttrs, size int64) error {
	reserve := a.snapshotReserve
	return k.s.client.CreateVolume(ctx, rest.VolumeCreate{
		Name: name, Aggregate: a.aggregate, Size: size, SpaceReserve: a.spaceReserve, SnapshotPolicy: a.snapshotPolicy,
		SnapshotReservePercent: &reserve, Encryption: a.encryption, TieringPolicy: a.tieringPolicy,
	})
}

func (lunPools) prepare(context.Context, *rest.Volume) error { return nil }

// ExpandVolume grows the pool, then the LUN; the node rescans and grows
// the file system.
func (s *sanEconomyDriver) ExpandVolume(ctx context.Context, vol *backends.Volume, size int64) (*backends.Volume, error) {
	lun := handleOf(vol).lun
	out := *vol
	if size <= lun.Size {
		out.SizeBytes = lun.Size
		return &out, nil
	}
	r, err := s.eco.reserveIn(ctx, lun.VolumeName, size-lun.Size)
	if err != nil {
		return nil, err
	}
	defer r.release()
	s.eco.mu.Lock()
	tooBig := s.eco.limit > 0 && r.p.optimalSize(r.p.bytes+r.p.pendingBytes) > s.eco.limit
	s.eco.mu.Unlock()
	if tooBig {
		return nil, backends.Errorf(backends.ErrOutOfRange, "growing volume %s to %d bytes would take FlexVol %s over limitVolumePoolSize %d",
			vol.ID, size, lun.VolumeName, s.eco.limit)
	}
	if err := s.eco.ensureSize(ctx, r.p); err != nil {
		return nil, err
	}
	if err := s.client.ResizeLUN(ctx, lun.UUID, size); err != nil {
		return nil, s.failure(err, "resizing the LUN of volume %s", vol.ID)
	}
	r.commit()
	out.SizeBytes = size
	return &out, nil
}

// DeleteVolume unmaps the LUN (a CO normally unpublished it already) and
// deletes its snapshot LUNs and then it, as Trident's Destroy. The pool
// goes with its last LUN, or shrinks to what is left (Trident).
func (s *sanEconomyDriver) DeleteVolume(ctx context.Context, vol *backends.Volume) error {
	lun := handleOf(vol).lun
	if err := s.unmapAll(ctx, lun); err != nil {
		return err
	}
	pool, err := rest.Literal(lun.VolumeName)
	if err != nil {
		return s.failure(err, "listing the snapshots of volume %s", vol.ID)
	}
	snaps, err := s.client.ListLUNs(ctx, "/vol/"+pool+"/"+lunLeaf(lun.Path)+lunSnapshotSeparator+"*")
	if err != nil {
		return s.failure(err, "listing the snapshots of volume %s", vol.ID)
	}
	for _, sl := range snaps {
		if err := s.deleteLUN(ctx, &sl, false); err != nil {
			return err
		}
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	if err := s.deleteLUN(ctx, lun, true); err != nil {
		return err
	}
	s.poolShrunk(ctx, lun.VolumeName)
	return nil
}

// deleteLUN deletes a LUN of a pool and forgets its bytes.
func (s *sanEconomyDriver) deleteLUN(ctx context.Context, lun *rest.LUN, member bool) error {
	if err := s.client.DeleteLUN(ctx, lun.UUID); err != nil && !rest.IsNotFound(err) {
		return s.failure(err, "deleting LUN %s", lun.Path)
	}
	s.eco.forget(lun.VolumeName, lun.Size, member)
	return nil
}

// poolShrunk deletes a pool left without LUNs, or resizes it to what its
// LUNs need. Failures only leave the pool bigger than needed, or for the
// next delete to remove.
func (s *sanEconomyDriver) poolShrunk(ctx context.Context, name string) {
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{"backend": s.Name(), "flexvol": name})
	gone, err := s.eco.deletePool(ctx, name)
	if err == nil && !gone {
		var p *econPool
		if p, err = s.eco.pool(ctx, name); err == nil {
			err = s.eco.fitSize(ctx, p)
		}
	}
	if err != nil {
		log.WithError(err).Warn("could not delete or resize the pool after a LUN delete")
	}
}
