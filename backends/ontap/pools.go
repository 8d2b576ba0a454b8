package ontap

import (
	"context"
	"slices"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// ManagedPool is Trident's name of the one pool a backend with balanced
// placement and no virtual pools offers: ONTAP picks the aggregate.
const ManagedPool = "managed_storage_pool"

// buildPools: virtual pools when the config has them, else the managed
// pool with balanced placement, else one pool per aggregate of the SVM, as
// Trident offers its pools.
func (d *driver) buildPools(svm *rest.SVM) []backends.Pool {
	pools := d.physicalOrVirtualPools(svm)
	if d.cfg.StorageDriverName == config.DriverONTAPNASEconomy {
		// Trident's qtree pools offer snapshots and clones false.
		for i := range pools {
			pools[i].NoSnapshots, pools[i].NoClones = true, true
		}
	}
	return pools
}

func (d *driver) physicalOrVirtualPools(svm *rest.SVM) []backends.Pool {
	var pools []backends.Pool
	for _, vp := range d.cfg.Storage {
		pt := "thin"
		if vp.Defaults.SpaceReserve == "volume" {
			pt = "thick"
		}
		pools = append(pools, backends.Pool{
			Name: vp.Name, Labels: vp.Labels, Topologies: vp.SupportedTopologies, ProvisioningTypes: []string{pt},
			Media: d.mediaOf(svm, d.cfg.Aggregate), Region: vp.Region, Zone: vp.Zone,
		})
	}
	if len(pools) > 0 {
		return pools
	}
	if d.cfg.UseBalancedPlacement {
		return []backends.Pool{{Name: ManagedPool, Labels: d.cfg.Labels, Topologies: d.cfg.SupportedTopologies,
			ProvisioningTypes: []string{"thin", "thick"}, Region: d.cfg.Region, Zone: d.cfg.Zone}}
	}
	for _, a := range svm.Aggregates {
		if d.cfg.Aggregate != "" && a.Name != d.cfg.Aggregate {
			continue
		}
		pools = append(pools, backends.Pool{
			Name: a.Name, Labels: d.cfg.Labels, Topologies: d.cfg.SupportedTopologies,
			Media: d.mediaOf(svm, a.Name), ProvisioningTypes: []string{"thin", "thick"},
			Region: d.cfg.Region, Zone: d.cfg.Zone,
		})
	}
	return pools
}

// mediaOf maps an aggregate's disk type to Trident's media attribute.
func (d *driver) mediaOf(svm *rest.SVM, aggr string) string {
	for _, a := range svm.Aggregates {
		if a.Name == aggr {
			switch a.Type {
			case "hdd", "ssd", "hybrid":
				return a.Type
			}
		}
	}
	return ""
}

// Pools implements backends.Backend. A suspended backend (userState)
// offers none, so the controller places no new volume on it.
func (d *driver) Pools(ctx context.Context) ([]backends.Pool, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	if d.suspended() {
		return nil, nil
	}
	return d.pools, nil
}

func (d *driver) suspended() bool { return d.cfg.UserState == config.UserStateSuspended }

// balanced reports whether a pool's volumes are placed by ONTAP
// (useBalancedPlacement).
func (d *driver) balanced(pool string) bool {
	for _, vp := range d.cfg.Storage {
		if vp.Name == pool {
			return vp.UseBalancedPlacement
		}
	}
	return d.cfg.UseBalancedPlacement
}

// usesBalancedPlacement reports whether any pool of the backend does.
func (d *driver) usesBalancedPlacement() bool {
	return d.cfg.UseBalancedPlacement || slices.ContainsFunc(d.cfg.Storage, func(vp config.VirtualPool) bool { return vp.UseBalancedPlacement })
}

// poolDefaults returns the volume defaults of a pool: a virtual pool's own,
// else the backend's.
func (d *driver) poolDefaults(pool string) config.VolumeDefaults {
	for _, vp := range d.cfg.Storage {
		if vp.Name == pool {
			return vp.Defaults
		}
	}
	return d.cfg.Defaults
}

// poolTopologies returns where a pool's volumes are reachable from.
func (d *driver) poolTopologies(pool string) []map[string]string {
	for _, vp := range d.cfg.Storage {
		if vp.Name == pool {
			return vp.SupportedTopologies
		}
	}
	return d.cfg.SupportedTopologies
}

func (d *driver) poolLabels(pool string) map[string]string {
	for _, vp := range d.cfg.Storage {
		if vp.Name == pool {
			return vp.Labels
		}
	}
	return d.cfg.Labels
}

// aggregateFor picks the aggregate of a new volume: the pool's own when the
// pool is an aggregate, the configured one, else the SVM's aggregate with
// the most free space.
func (d *driver) aggregateFor(ctx context.Context, pool string) (string, error) {
	if len(d.cfg.Storage) == 0 && pool != "" {
		return pool, nil
	}
	if d.cfg.Aggregate != "" {
		return d.cfg.Aggregate, nil
	}
	svm, err := d.client.SVM(ctx)
	if err != nil {
		return "", d.failure(err, "reading the aggregates of SVM %s", d.cfg.SVM)
	}
	best, avail := "", int64(-1)
	for _, a := range svm.Aggregates {
		if a.State != "" && a.State != "online" {
			continue
		}
		if a.AvailableSize > avail {
			best, avail = a.Name, a.AvailableSize
		}
	}
	if best == "" {
		return "", backends.Errorf(backends.ErrExhausted, "SVM %s has no online aggregate", d.cfg.SVM)
	}
	return best, nil
}

// checkAggregateLimit refuses to put grow more bytes on aggr when that
// would take the aggregate's usage above limitAggregateUsage, as Trident
// does: a thick volume counts its whole size, a thin one only what the
// aggregate already holds. ErrExhausted lets the controller try the next
// pool.
func (d *driver) checkAggregateLimit(ctx context.Context, aggr, spaceReserve string, grow int64) error {
	limit := d.cfg.LimitAggregateUsage
	if limit <= 0 {
		return nil
	}
	a, err := d.client.Aggregate(ctx, aggr)
	if err != nil {
		return d.failure(err, "reading aggregate %s", aggr)
	}
	if a.Size <= 0 {
		return nil
	}
	used := a.Used
	if spaceReserve == "volume" {
		used += max(grow, 0)
	}
	if pct := float64(used) * 100 / float64(a.Size); pct > limit {
		return backends.Errorf(backends.ErrExhausted, "aggregate %s would be %.1f%% used, above the backend's limitAggregateUsage of %g%%",
			aggr, pct, limit)
	}
	return nil
}

// lacksSpace reports whether a failed create or growth of a thick volume
// failed for want of need bytes in aggregate aggr. ONTAP gives that
// failure no error code of its own (docs/design/ontap-rest.md §3.5: the job fails with
// a generic code and a text), so after a failure ONTAP did not classify,
// the driver asks the aggregate instead of reading the text.
func (d *driver) lacksSpace(ctx context.Context, err error, aggr, spaceReserve string, need int64) bool {
	if spaceReserve != "volume" || need <= 0 || rest.ClassOf(err) != rest.ClassUnknown {
		return false
	}
	svm, serr := d.client.SVM(ctx)
	if serr != nil {
		return false
	}
	i := slices.IndexFunc(svm.Aggregates, func(a rest.SVMAggregate) bool { return a.Name == aggr })
	return i >= 0 && svm.Aggregates[i].AvailableSize < need
}

// Capacity is the free space of the pool's aggregate (for a virtual pool
// without a configured aggregate, and for the managed pool, the SVM's
// largest), capped by limitAggregateUsage when it is set; and the largest
// volume one create with opts can get there (maxVolumeSize).
func (d *driver) Capacity(ctx context.Context, pool string, opts backends.VolumeOptions) (*backends.Capacity, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	s, err := d.resolve(&backends.CreateRequest{Pool: pool, Options: opts})
	if err != nil {
		return nil, err
	}
	svm, err := d.client.SVM(ctx)
	if err != nil {
		return nil, d.failure(err, "reading the aggregates of SVM %s", d.cfg.SVM)
	}
	want := d.cfg.Aggregate
	if len(d.cfg.Storage) == 0 && pool != ManagedPool {
		want = pool
	}
	c := &backends.Capacity{}
	for _, a := range svm.Aggregates {
		if want != "" && a.Name != want {
			continue
		}
		avail := a.AvailableSize
		if d.cfg.LimitAggregateUsage > 0 {
			aggr, err := d.client.Aggregate(ctx, a.Name)
			if err != nil {
				return nil, d.failure(err, "reading aggregate %s", a.Name)
			}
			allowed := int64(float64(aggr.Size)*d.cfg.LimitAggregateUsage/100) - aggr.Used
			avail = max(0, min(avail, allowed))
		}
		c.Available = max(c.Available, avail)
	}
	c.MaxVolumeSize, c.Bounded = d.maxVolumeSize(c.Available, s)
	return c, nil
}

// maxVolumeSize is the largest size a create with settings s can ask for
// when avail bytes are free, and whether anything bounds it at all.
//
// The kube-scheduler judges a claim by a CSIStorageCapacity's
// maximumVolumeSize when it is set and by its capacity otherwise, so the
// value must be what a create would actually get: a thick volume
// (spaceReserve volume) takes its whole FlexVol from the aggregate, the
// snapshot reserve and an ontap-san LUN's headroom included (flexVolSize),
// so it is bounded by the free space as well as by limitVolumeSize; a thin
// one needs no free space, so only limitVolumeSize (and an economy pool's
// limitVolumePoolSize) bounds it. With no such bound a thin volume reports
// none: the CSI spec makes maximum_volume_size optional ("leave it unset"
// without a maximum size for individual volumes), and the scheduler then
// compares the claim with the free space, the cautious reading for a pool
// that would overcommit its aggregate.
func (d *driver) maxVolumeSize(avail int64, s *settings) (int64, bool) {
	thick := s.SpaceReserve == "volume"
	var econLimit int64
	economy := d.cfg.Economy != nil
	if economy {
		econLimit = d.cfg.Economy.LimitVolumePoolSize
	}
	if !thick && d.cfg.LimitVolumeSize <= 0 && econLimit <= 0 {
		return 0, false
	}
	fits := func(size int64) bool {
		if d.cfg.LimitVolumeSize > 0 && size > d.cfg.LimitVolumeSize {
			return false
		}
		var vol int64
		if economy {
			// A member grows its pool FlexVol by its size and the
			// pool's snapshot reserve (econPool.optimalSize), and may
			// not take a pool above limitVolumePoolSize.
			vol = flexVolSize(size, s.snapshotReserve, 1)
			if econLimit > 0 && vol > econLimit {
				return false
			}
		} else {
			factor, lun := 1.0, d.cfg.StorageDriverName == config.DriverONTAPSAN
			if lun {
				factor = lunHeadroom
			}
			var err error
			if vol, _, err = d.fitFlexVol(size, s.snapshotReserve, factor, lun); err != nil {
				return false // above ONTAP's largest FlexVol or LUN
			}
		}
		return !thick || vol <= avail
	}
	// fits holds up to some size and not above it: the largest size it
	// holds for, to the byte.
	lo, hi := int64(0), maxLargeFlexVol
	if d.cfg.LimitVolumeSize > 0 {
		hi = min(hi, d.cfg.LimitVolumeSize)
	}
	if fits(hi) {
		return hi, true
	}
	if !fits(lo) {
		return 0, true
	}
	for hi-lo > 1 { // fits(lo) && !fits(hi)
		mid := lo + (hi-lo)/2
		if fits(mid) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, true
}
