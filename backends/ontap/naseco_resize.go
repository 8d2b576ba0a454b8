package ontap

import (
	"context"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// ExpandVolume grows a qtree: its pool first (limitVolumePoolSize
// permitting), then its quota rule, which ONTAP applies by a resize.
func (n *nasEconomyDriver) ExpandVolume(ctx context.Context, vol *backends.Volume, size int64) (*backends.Volume, error) {
	h := qtreeHandleOf(vol)
	cur := int64(0)
	if h.rule != nil {
		cur = max(h.rule.HardLimit, 0)
	}
	out := *vol
	if size <= cur {
		out.SizeBytes = cur
		return &out, nil
	}
	p, err := n.eco.pool(ctx, h.qtree.Volume)
	if err != nil {
		return nil, err
	}
	n.eco.mu.Lock()
	tooBig := n.eco.limit > 0 && p.optimalSize(p.bytes+p.pendingBytes+size-cur) > n.eco.limit
	n.eco.mu.Unlock()
	if tooBig {
		return nil, backends.Errorf(backends.ErrOutOfRange, "growing volume %s to %d bytes would take FlexVol %s over limitVolumePoolSize %d",
			vol.ID, size, h.qtree.Volume, n.eco.limit)
	}
	if err := n.quotaInPool(ctx, h.qtree.Volume, h.qtree.Name, size-cur, size, h.rule); err != nil {
		return nil, err
	}
	out.SizeBytes = size
	return &out, nil
}

// DeleteVolume deletes a qtree: its own export policy (normally gone with
// its last unpublish), the snapshots taken of it, then the qtree, which
// takes its quota rule along (ONTAP). A pool left empty is deleted at once
// or marked for its deferred delete.
func (n *nasEconomyDriver) DeleteVolume(ctx context.Context, vol *backends.Volume) error {
	h := qtreeHandleOf(vol)
	q := h.qtree
	// Its own policy even when the qtree is no longer on it: an unpublish
	// stopped half way leaves it behind.
	if n.cfg.AutoExportPolicy {
		if err := n.dropOwnPolicy(ctx, n.qtreeTarget(&q)); err != nil {
			return err
		}
	}
	if err := n.deleteSnapshotsOf(ctx, vol); err != nil {
		return err
	}
	ctx, cancel := detach(ctx)
	defer cancel()
	if err := n.client.DeleteQtree(ctx, q.VolumeUUID, q.ID); err != nil && !rest.IsNotFound(err) {
		return n.failure(err, "deleting qtree %s of volume %s", q.Name, vol.ID)
	}
	size := int64(0)
	if h.rule != nil {
		size = max(h.rule.HardLimit, 0)
	}
	if n.eco.forget(q.Volume, size, true) {
		n.poolMayBeEmpty(ctx, q.Volume)
	}
	n.maybePrune(ctx)
	return nil
}

// poolMayBeEmpty deletes a pool this delete emptied, or marks it empty
// for its deferred delete. Failures only delay that: the prune finds the
// pool later.
func (n *nasEconomyDriver) poolMayBeEmpty(ctx context.Context, name string) {
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{"backend": n.Name(), "flexvol": name})
	if n.cfg.Economy.EmptyFlexvolDeferredDeletePeriod == 0 {
		if _, err := n.eco.deletePool(ctx, name); err != nil {
			log.WithError(err).Warn("could not delete an empty pool FlexVol; the prune will")
		}
		return
	}
	v, err := n.client.GetVolume(ctx, name)
	if err == nil {
		err = n.pruneOne(ctx, v)
	}
	if err != nil && !rest.IsNotFound(err) {
		log.WithError(err).Warn("could not mark an empty pool FlexVol; the prune will")
	}
}
