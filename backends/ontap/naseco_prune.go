package ontap

import (
	"context"
	"encoding/json"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Empty pools of ontap-nas-economy are deleted once they have stayed empty
// for emptyFlexvolDeferredDeletePeriod (docs/design/economy.md §4.5). When
// a pool was found empty is kept on ONTAP, in the pool FlexVol's comment,
// so a restarted or second controller knows it too. The prune runs on the
// back of controller calls, at most every qtreePruneFlexvolsPeriod: a
// standby controller receives none, so only the active one prunes.

// poolComment is the comment of a pool FlexVol found empty.
type poolComment struct {
	EmptySince time.Time `json:"emptySince"`
}

func encodePoolComment(c poolComment) string {
	b, _ := json.Marshal(map[string]poolComment{commentMeta: c})
	return string(b)
}

// decodePoolComment reads a pool's mark; ok is false when there is none.
func decodePoolComment(s string) (poolComment, bool) {
	var m map[string]poolComment
	if s == "" || json.Unmarshal([]byte(s), &m) != nil {
		return poolComment{}, false
	}
	c, ok := m[commentMeta]
	return c, ok && !c.EmptySince.IsZero()
}

// maybePrune starts a prune if the last one is older than the period.
func (n *nasEconomyDriver) maybePrune(ctx context.Context) {
	n.pruneMu.Lock()
	due := !n.pruning && time.Since(n.lastPrune) >= n.cfg.Economy.PruneFlexvolsPeriod
	if due {
		n.pruning, n.lastPrune = true, time.Now()
	}
	n.pruneMu.Unlock()
	if !due {
		return
	}
	// The prune outlives the call that started it, not the backend.
	pctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Minute)
	stop := context.AfterFunc(n.life, cancel)
	n.pruneWG.Add(1)
	go func() {
		defer n.pruneWG.Done()
		defer stop()
		defer cancel()
		n.prune(pctx)
		n.pruneMu.Lock()
		n.pruning = false
		n.pruneMu.Unlock()
	}()
}

// Close implements io.Closer: it stops a prune in flight, then releases
// the connections.
func (n *nasEconomyDriver) Close() error {
	n.end()
	n.pruneWG.Wait()
	return n.driver.Close()
}

// prune looks at every pool: an empty one is marked, or deleted once its
// mark is older than the period; a pool with qtrees loses its mark.
func (n *nasEconomyDriver) prune(ctx context.Context) {
	log := logrus.WithContext(ctx).WithField("backend", n.Name())
	vols, err := n.client.ListVolumes(ctx, n.eco.prefix)
	if err != nil {
		log.WithError(err).Warn("prune: could not list the pool FlexVols")
		return
	}
	for i := range vols {
		v := &vols[i]
		switch {
		case isRetiredPool(n.eco.prefix, v.Name):
			_, err = n.eco.finishRetired(ctx, *v)
		case isPoolName(n.eco.prefix, v.Name):
			err = n.pruneOne(ctx, v)
		default:
			continue
		}
		if err != nil {
			log.WithError(err).WithField("flexvol", v.Name).Warn("prune: could not check a pool FlexVol")
		}
	}
}

// pruneOne marks, unmarks or deletes one pool.
func (n *nasEconomyDriver) pruneOne(ctx context.Context, v *rest.Volume) error {
	count, err := n.client.CountQtrees(ctx, v.UUID)
	if err != nil {
		return err
	}
	mark, marked := decodePoolComment(v.Comment)
	switch {
	case count > 0 && marked:
		empty := ""
		return n.client.ModifyVolume(ctx, v.UUID, rest.VolumeModify{Comment: &empty})
	case count > 0:
		return nil
	case !marked:
		c := encodePoolComment(poolComment{EmptySince: time.Now().UTC().Truncate(time.Second)})
		return n.client.ModifyVolume(ctx, v.UUID, rest.VolumeModify{Comment: &c})
	case time.Since(mark.EmptySince) >= max(n.cfg.Economy.EmptyFlexvolDeferredDeletePeriod, minEmptyAge):
		_, err := n.eco.deletePool(ctx, v.Name)
		return err
	}
	return nil
}

// minEmptyAge is how long the prune waits before deleting a pool it found
// empty, whatever the period: a pool another controller has just made is
// empty until that controller's first qtree lands in it. A delete that
// empties a pool of this controller with a period of 0 does not wait.
const minEmptyAge = 2 * time.Minute
