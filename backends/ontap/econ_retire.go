package ontap

import (
	"context"
	"strings"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Deleting an empty pool must not race a create that chose it, in this
// controller or another one (docs/design/economy.md §4.4). The FlexVol is
// first renamed out of the pool names: a create that chose it before fails
// to find it by name and chooses again, and no create chooses it any more.
// Only then is it counted again, and deleted if still empty, or renamed
// back if a volume got in first.

// retiredSuffix marks a pool FlexVol being deleted.
const retiredSuffix = "_retired"

func isRetiredPool(prefix, name string) bool {
	base, ok := strings.CutSuffix(name, retiredSuffix)
	return ok && isPoolName(prefix, base)
}

// deletePool deletes the pool called name if it is empty. It reports
// whether the pool is gone.
func (e *economy) deletePool(ctx context.Context, name string) (bool, error) {
	e.mu.Lock()
	p := e.pools[name]
	if p != nil && (p.pending > 0 || p.retiring) {
		e.mu.Unlock()
		return false, nil
	}
	if p != nil {
		p.retiring = true
	}
	e.mu.Unlock()
	gone := false
	defer func() {
		e.mu.Lock()
		if gone {
			delete(e.pools, name)
		} else if p != nil {
			p.retiring = false
		}
		e.mu.Unlock()
	}()
	v, err := e.d.client.GetVolume(ctx, name)
	if rest.IsNotFound(err) {
		gone = true
		return true, nil
	}
	if err != nil {
		return false, e.d.failure(err, "reading pool FlexVol %s", name)
	}
	if n, err := e.kind.count(ctx, v); err != nil || n > 0 {
		return false, err
	}
	retired := name + retiredSuffix
	if err := e.d.client.ModifyVolume(ctx, v.UUID, rest.VolumeModify{Name: &retired}); err != nil {
		return false, e.d.failure(err, "renaming empty pool FlexVol %s before deleting it", name)
	}
	v.Name = retired
	gone, err = e.finishRetired(ctx, *v)
	return gone, err
}

// finishRetired ends the delete of a pool renamed by deletePool: deleted
// when empty, else given its name back.
func (e *economy) finishRetired(ctx context.Context, v rest.Volume) (bool, error) {
	log := logrus.WithContext(ctx).WithFields(logrus.Fields{"backend": e.d.Name(), "flexvol": v.Name})
	n, err := e.kind.count(ctx, &v)
	if err != nil {
		return false, err
	}
	if n > 0 {
		name := strings.TrimSuffix(v.Name, retiredSuffix)
		log.WithField("members", n).Info("a volume went into the pool being deleted: keeping the pool")
		if err := e.d.client.ModifyVolume(ctx, v.UUID, rest.VolumeModify{Name: &name}); err != nil {
			return false, e.d.failure(err, "renaming pool FlexVol %s back", v.Name)
		}
		return false, nil
	}
	if err := e.d.client.DeleteVolume(ctx, v.UUID, true); err != nil && !rest.IsNotFound(err) {
		return false, e.d.failure(err, "deleting empty pool FlexVol %s", v.Name)
	}
	poolsDeleted.WithLabelValues(e.d.Name()).Inc()
	log.Info("deleted an empty pool FlexVol")
	return true, nil
}

// finishAllRetired ends the deletes that a crash left half done.
func (e *economy) finishAllRetired(ctx context.Context) {
	e.mu.Lock()
	vols := e.retired
	e.retired = nil
	e.mu.Unlock()
	for _, v := range vols {
		if _, err := e.finishRetired(ctx, v); err != nil {
			logrus.WithContext(ctx).WithError(err).WithField("flexvol", v.Name).Warn("could not finish deleting a pool FlexVol")
		}
	}
}
