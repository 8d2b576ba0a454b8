package inventory

import (
	"context"

	"github.com/sirupsen/logrus"
)

// clusterListing is what Kubernetes answered in one refresh; nil fields
// were not asked or failed, and keep the last value.
type clusterListing struct {
	pvs       map[string]PV // by volume ID
	scCount   *int
	nodeCount *int
}

// listCluster reads the PersistentVolumes, StorageClasses and nodes, each
// one list request per refresh.
func (inv *Inventory) listCluster(ctx context.Context) clusterListing {
	var k clusterListing
	if inv.cfg.PVs != nil {
		if pvs, err := inv.cfg.PVs(ctx); err != nil {
			logrus.WithError(err).Debug("inventory: listing PersistentVolumes")
		} else {
			k.pvs = make(map[string]PV, len(pvs))
			for _, pv := range pvs {
				k.pvs[pv.VolumeID] = pv
			}
		}
	}
	k.scCount = count(ctx, inv.cfg.StorageClasses, "StorageClasses")
	k.nodeCount = count(ctx, inv.cfg.Nodes, "nodes")
	return k
}

func count(ctx context.Context, f func(context.Context) (int, error), what string) *int {
	if f == nil {
		return nil
	}
	n, err := f(ctx)
	if err != nil {
		logrus.WithError(err).Debugf("inventory: counting %s", what)
		return nil
	}
	return &n
}

// apply records the listing; called with mu held.
func (k clusterListing) apply(inv *Inventory) {
	if k.pvs != nil {
		inv.pvs = k.pvs
	}
	if k.scCount != nil {
		inv.scCount = k.scCount
	}
	if k.nodeCount != nil {
		inv.nodeCount = k.nodeCount
	}
}
