package ontap

import (
	"context"
	"strings"
	"time"

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
	var gone bool
	defer func() {
		e.mu.Lock()
		if gone {
			delete(e.pools, name)
		} else if p != nil {
			p.retiring = false
		}
		e.mu.Unlock()
	}()
	gone, err := e.retire(ctx, name)
	return gone, err
}

// retire renames an empty pool out of the pool names and deletes it,
// trying again for a few seconds when ONTAP fails (a busy volume): no
// later call would, but the prune or the next new pool. A pool left renamed
// is remembered for them.
func (e *economy) retire(ctx context.Context, name string) (bool, error) {
	wait := 250 * time.Millisecond
	for {
		gone, retired, err := e.retireOnce(ctx, name)
		if err == nil {
			return gone, nil
		}
		if wait > 2*time.Second || sleepCtx(ctx, wait) != nil {
			if retired != nil {
				e.mu.Lock()
				if e.retired == nil {
					e.retired = map[string]rest.Volume{}
				}
				e.retired[retired.Name] = *retired
				e.mu.Unlock()
			}
			return false, err
		}
		wait *= 2
	}
}

// retireOnce is one try of retire; retired is the renamed FlexVol, if it
// got that far.
func (e *economy) retireOnce(ctx context.Context, name string) (gone bool, retired *rest.Volume, err error) {
	v, err := e.d.client.GetVolume(ctx, name)
	if rest.IsNotFound(err) {
		// An earlier try may have renamed it already.
		v, err = e.d.client.GetVolume(ctx, name+retiredSuffix)
		if rest.IsNotFound(err) {
			return true, nil, nil
		}
		if err != nil {
			return false, nil, e.d.failure(err, "reading pool FlexVol %s", name+retiredSuffix)
		}
		gone, err = e.finishRetired(ctx, *v)
		return gone, v, err
	}
	if err != nil {
		return false, nil, e.d.failure(err, "reading pool FlexVol %s", name)
	}
	if n, err := e.kind.count(ctx, v); err != nil || n > 0 {
		return false, nil, err
	}
	to := name + retiredSuffix
	if err := e.d.client.ModifyVolume(ctx, v.UUID, rest.VolumeModify{Name: &to}); err != nil {
		return false, nil, e.d.failure(err, "renaming empty pool FlexVol %s before deleting it", name)
	}
	v.Name = to
	gone, err = e.finishRetired(ctx, *v)
	return gone, v, err
}

// sleepCtx waits for d, or less if ctx ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
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

// finishAllRetired ends the deletes that a crash or a timeout left half
// done, as the last listing saw them; a pool that could not be finished
// stays known, and its name is not reused.
func (e *economy) finishAllRetired(ctx context.Context) {
	e.mu.Lock()
	vols := make([]rest.Volume, 0, len(e.retired))
	for _, v := range e.retired {
		vols = append(vols, v)
	}
	e.mu.Unlock()
	for _, v := range vols {
		_, err := e.finishRetired(ctx, v)
		if err != nil {
			logrus.WithContext(ctx).WithError(err).WithField("flexvol", v.Name).Warn("could not finish deleting a pool FlexVol")
			continue
		}
		e.mu.Lock()
		delete(e.retired, v.Name)
		e.mu.Unlock()
	}
}
