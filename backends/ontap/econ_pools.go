package ontap

import (
	"context"
	"fmt"
	"math"
	"sort"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// The pools of the economy drivers: FlexVols holding many volumes (qtrees
// or LUNs), created when none has room and deleted when empty. Which pool a
// new volume goes to is decided in memory, but the memory is only a cache
// of ONTAP: it is read from ONTAP when first needed and again before a new
// pool is made, and every create checks the result on ONTAP afterwards. The
// reasoning, for many creates at once, controller restarts and two
// controllers, is in docs/design/economy.md §4.

// poolAttrs are what a new volume needs of its pool's FlexVol. As in
// Trident (findFlexvolForQtree, findFlexvolForLUN), a volume goes only into
// a pool whose attributes are its own.
type poolAttrs struct {
	aggregate       string
	spaceReserve    string
	snapshotPolicy  string
	snapshotReserve int
	tieringPolicy   string // "" matches any
	encryption      *bool  // nil matches any
	snapshotDir     *bool  // nil matches any (LUN pools)
}

func (a poolAttrs) key() string {
	b := func(p *bool) string {
		if p == nil {
			return "-"
		}
		return fmt.Sprint(*p)
	}
	return fmt.Sprintf("%s|%s|%s|%d|%s|%s|%s", a.aggregate, a.spaceReserve, a.snapshotPolicy, a.snapshotReserve,
		a.tieringPolicy, b(a.encryption), b(a.snapshotDir))
}

// matches reports whether pool FlexVol v has the attributes.
func (a poolAttrs) matches(v *rest.Volume) bool {
	inAggr := len(v.Aggregates) == 0 || a.aggregate == ""
	for _, ag := range v.Aggregates {
		inAggr = inAggr || ag == a.aggregate
	}
	return inAggr && v.SpaceReserve == a.spaceReserve && v.SnapshotPolicy == a.snapshotPolicy &&
		v.SnapshotReservePercent == a.snapshotReserve &&
		(a.tieringPolicy == "" || v.TieringPolicy == a.tieringPolicy) &&
		(a.encryption == nil || v.Encrypted == *a.encryption) &&
		(a.snapshotDir == nil || v.SnapshotDirAccess == *a.snapshotDir)
}

// econPool is what the driver knows of one pool FlexVol.
type econPool struct {
	vol rest.Volume
	// members and bytes are what ONTAP reported at the last listing, plus
	// this process's creates and deletes since.
	members int
	bytes   int64
	// pending and pendingBytes are creates in flight.
	pending      int
	pendingBytes int64
	resizing     chan struct{} // closed when the resize in flight ends
	retiring     bool          // being deleted: never chosen
	full         bool          // found over its limit: not chosen until listed again
	prepared     bool          // ready for members (poolKind.prepare done)
}

// optimalSize is the FlexVol size for used bytes of members: Trident's
// calculateFlexvolEconomySizeBytes (room for the snapshot reserve, or for
// the snapshots' space if that is more), in whole 4 KiB blocks.
func (p *econPool) optimalSize(used int64) int64 {
	size := float64(used)
	if r := p.vol.SnapshotReservePercent; r > 0 && r < 100 {
		size /= 1 - float64(r)/100
	}
	size = max(size, float64(used+p.vol.SnapshotUsed))
	n := (int64(math.Ceil(size)) + 4095) &^ 4095
	return max(n, MinimumVolumeSize)
}

// poolUse is a pool's members as ONTAP reports them.
type poolUse struct {
	members int   // qtrees, or LUNs other than snapshot LUNs
	all     int   // every qtree or LUN, snapshot LUNs included
	bytes   int64 // quota hard limits, or LUN sizes
}

// poolKind is what differs between qtree pools and LUN pools.
type poolKind interface {
	// inventory reads the use of every pool, by FlexVol name.
	inventory(ctx context.Context) (map[string]poolUse, error)
	// use reads the use of one pool.
	use(ctx context.Context, p *rest.Volume) (poolUse, error)
	// createPool creates the FlexVol of a new pool.
	createPool(ctx context.Context, name string, a poolAttrs, size int64) error
	// prepare readies a pool for members (quotas on); it is idempotent.
	prepare(ctx context.Context, p *rest.Volume) error
	// count counts every member of a pool, snapshot LUNs included.
	count(ctx context.Context, p *rest.Volume) (int, error)
}

// economy is the pool machinery of one economy backend.
type economy struct {
	d       *driver
	kind    poolKind
	prefix  string // pool FlexVol name prefix (Trident's)
	perPool int    // qtreesPerFlexvol or lunsPerFlexvol
	limit   int64  // limitVolumePoolSize, 0: none
	deny    bool   // denyNewVolumePools

	mu       sync.Mutex
	pools    map[string]*econPool // by FlexVol name
	listedAt time.Time
	listing  chan struct{}            // closed when the listing in flight ends
	creating map[string]chan struct{} // by poolAttrs.key(): a pool being made
	// retired are pools whose delete stopped half way (econ_retire.go),
	// by FlexVol name, as the last listing saw them.
	retired map[string]rest.Volume
}

func newEconomy(d *driver, kind poolKind, prefix string, perPool int) *economy {
	e := d.cfg.Economy
	return &economy{
		d: d, kind: kind, prefix: prefix, perPool: perPool, limit: e.LimitVolumePoolSize, deny: e.DenyNewVolumePools,
		pools: map[string]*econPool{}, creating: map[string]chan struct{}{},
	}
}

// refresh reads every pool from ONTAP. Concurrent callers share one
// listing; creates and deletes in flight keep their counts.
func (e *economy) refresh(ctx context.Context) error {
	e.mu.Lock()
	if ch := e.listing; ch != nil {
		e.mu.Unlock()
		return waitDone(ctx, ch)
	}
	ch := make(chan struct{})
	e.listing = ch
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		e.listing = nil
		e.mu.Unlock()
		close(ch)
	}()
	vols, err := e.d.client.ListVolumes(ctx, e.prefix)
	if err != nil {
		return e.d.failure(err, "listing the FlexVols of %s", e.prefix)
	}
	use, err := e.kind.inventory(ctx)
	if err != nil {
		return err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	seen := map[string]bool{}
	for i := range vols {
		v := vols[i]
		if !isPoolName(e.prefix, v.Name) {
			continue
		}
		seen[v.Name] = true
		p := e.pools[v.Name]
		if p == nil {
			p = &econPool{}
			e.pools[v.Name] = p
		}
		// While creates are in flight in a pool, ONTAP's count may or may
		// not hold them: the cache, exact for this process, is kept, and
		// the check after each create catches what others did.
		if p.pending == 0 && p.resizing == nil {
			p.vol, p.full = v, false
			p.members, p.bytes = use[v.Name].members, use[v.Name].bytes
		}
	}
	for name, p := range e.pools {
		if !seen[name] && p.pending == 0 {
			delete(e.pools, name)
		}
	}
	e.listedAt = time.Now()
	e.retired = map[string]rest.Volume{}
	for i := range vols {
		if isRetiredPool(e.prefix, vols[i].Name) {
			e.retired[vols[i].Name] = vols[i]
		}
	}
	return nil
}

// poolReservation is a place taken in a pool by a create in flight.
type poolReservation struct {
	e      *economy
	p      *econPool
	bytes  int64
	member bool // counts against perPool (a clone or snapshot LUN does not)
	done   bool
}

// commit records the reserved member as made.
func (r *poolReservation) commit() {
	r.end(true)
}

// release gives the place back.
func (r *poolReservation) release() {
	r.end(false)
}

func (r *poolReservation) end(made bool) {
	r.e.mu.Lock()
	defer r.e.mu.Unlock()
	if r.done {
		return
	}
	r.done = true
	r.p.pending--
	r.p.pendingBytes -= r.bytes
	if made {
		r.p.bytes += r.bytes
		if r.member {
			r.p.members++
		}
	}
}

// place reserves room for a member of size bytes in a pool with the
// attributes: the fullest pool that has room, else a new pool. A pool
// thought full is only given up after ONTAP was read again, so a pool is
// never made while another has room.
func (e *economy) place(ctx context.Context, a poolAttrs, size int64) (*poolReservation, error) {
	if e.limit > 0 && (&econPool{vol: rest.Volume{SnapshotReservePercent: a.snapshotReserve}}).optimalSize(size) > e.limit {
		return nil, backends.Errorf(backends.ErrOutOfRange, "%d bytes do not fit a FlexVol of at most limitVolumePoolSize %d bytes", size, e.limit)
	}
	start := time.Now()
	for attempt := 0; attempt < 10; attempt++ {
		e.mu.Lock()
		if e.listedAt.IsZero() {
			e.mu.Unlock()
			if err := e.refresh(ctx); err != nil {
				return nil, err
			}
			e.mu.Lock()
		}
		if p := e.pick(a, size); p != nil {
			r := e.reserveLocked(p, size, true)
			e.mu.Unlock()
			return r, nil
		}
		stale := e.listedAt.Before(start)
		e.mu.Unlock()
		switch {
		case stale:
			// Read ONTAP again before making a pool: others may have
			// deleted volumes or made a pool.
			if err := e.refresh(ctx); err != nil {
				return nil, err
			}
		case e.deny:
			return nil, backends.Errorf(backends.ErrExhausted, "no FlexVol of %s* has room and denyNewVolumePools forbids a new one", e.prefix)
		default:
			if err := e.newPool(ctx, a, size); err != nil {
				return nil, err
			}
		}
	}
	return nil, backends.Errorf(backends.ErrUnavailable, "no room in the FlexVols of %s* after several attempts; retry", e.prefix)
}

// pick is the fullest pool with the attributes that has room. Called with
// mu held.
func (e *economy) pick(a poolAttrs, size int64) *econPool {
	var cands []*econPool
	for _, p := range e.pools {
		if p.retiring || p.full || p.members+p.pending >= e.perPool || !a.matches(&p.vol) {
			continue
		}
		if e.limit > 0 && p.optimalSize(p.bytes+p.pendingBytes+size) > e.limit {
			continue
		}
		cands = append(cands, p)
	}
	if len(cands) == 0 {
		return nil
	}
	sort.Slice(cands, func(i, j int) bool {
		ni, nj := cands[i].members+cands[i].pending, cands[j].members+cands[j].pending
		if ni != nj {
			return ni > nj
		}
		return cands[i].vol.Name < cands[j].vol.Name
	})
	return cands[0]
}

func (e *economy) reserveLocked(p *econPool, size int64, member bool) *poolReservation {
	p.pending++
	p.pendingBytes += size
	return &poolReservation{e: e, p: p, bytes: size, member: member}
}

// reserveIn reserves bytes in a given pool for a member that must go there
// (a LUN clone lives in its source's FlexVol) and does not count against
// the pool's limit, as in Trident.
func (e *economy) reserveIn(ctx context.Context, name string, size int64) (*poolReservation, error) {
	e.mu.Lock()
	p := e.pools[name]
	e.mu.Unlock()
	if p == nil {
		if err := e.refresh(ctx); err != nil {
			return nil, err
		}
		e.mu.Lock()
		p = e.pools[name]
		e.mu.Unlock()
		if p == nil {
			return nil, backends.Errorf(backends.ErrNotFound, "FlexVol %s is not a pool of this backend", name)
		}
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.reserveLocked(p, size, false), nil
}

// newPool makes a pool for the attributes, unless one is being made for
// them already, in which case it waits for that one.
func (e *economy) newPool(ctx context.Context, a poolAttrs, size int64) error {
	key := a.key()
	e.mu.Lock()
	if ch := e.creating[key]; ch != nil {
		e.mu.Unlock()
		return waitDone(ctx, ch)
	}
	ch := make(chan struct{})
	e.creating[key] = ch
	e.mu.Unlock()
	defer func() {
		e.mu.Lock()
		delete(e.creating, key)
		e.mu.Unlock()
		close(ch)
	}()
	// A pool whose delete stopped half way still holds its junction path
	// (qtree pools) and blocks its name: finish it first.
	e.finishAllRetired(ctx)
	e.mu.Lock()
	name := e.freeNameLocked(key)
	e.mu.Unlock()
	probe := &econPool{vol: rest.Volume{SnapshotReservePercent: a.snapshotReserve}}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"backend": e.d.Name(), "flexvol": name}).Info("creating a pool FlexVol")
	err := e.kind.createPool(ctx, name, a, probe.optimalSize(size))
	if err != nil && !rest.IsAlreadyExists(err) {
		return e.d.createFailure(err, "creating FlexVol %s", name)
	}
	poolsCreated.WithLabelValues(e.d.Name()).Inc()
	// Another controller may have made it under the same name: either
	// way it is read back with the others.
	return e.refresh(ctx)
}

// freeNameLocked is the first candidate pool name not in use, by a pool
// or by a pool being deleted. The candidates are the same for every
// controller of the SVM (poolName).
func (e *economy) freeNameLocked(key string) string {
	seed := e.d.svm.UUID + "|" + e.prefix + "|" + key
	for n := 0; ; n++ {
		name := poolName(e.prefix, seed, n)
		_, taken := e.pools[name]
		_, retiring := e.retired[name+retiredSuffix]
		if !taken && !retiring {
			return name
		}
	}
}

// ensureSize grows a pool to hold its members and the creates in flight.
// Concurrent callers share one resize.
func (e *economy) ensureSize(ctx context.Context, p *econPool) error {
	return e.resize(ctx, p, func(p *econPool) int64 { return p.optimalSize(p.bytes + p.pendingBytes) }, false)
}

// fitSize sets a pool's size to what its members need, shrinking it after
// deletes as Trident's ontap-san-economy does.
func (e *economy) fitSize(ctx context.Context, p *econPool) error {
	return e.resize(ctx, p, func(p *econPool) int64 { return p.optimalSize(p.bytes + p.pendingBytes) }, true)
}

// resize brings p's size to target(p), growing only unless shrink. A
// resize in flight is waited for first; the target is taken afterwards, so
// it covers every create that reserved meanwhile.
func (e *economy) resize(ctx context.Context, p *econPool, target func(*econPool) int64, shrink bool) error {
	for {
		e.mu.Lock()
		want := target(p)
		if want == p.vol.Size || want < p.vol.Size && !shrink {
			e.mu.Unlock()
			return nil
		}
		if ch := p.resizing; ch != nil {
			e.mu.Unlock()
			if err := waitDone(ctx, ch); err != nil {
				return err
			}
			continue
		}
		ch := make(chan struct{})
		p.resizing = ch
		grow, aggr, reserve, uuid := want-p.vol.Size, "", p.vol.SpaceReserve, p.vol.UUID
		if len(p.vol.Aggregates) > 0 {
			aggr = p.vol.Aggregates[0]
		}
		e.mu.Unlock()
		err := e.setSize(ctx, uuid, aggr, reserve, want, grow)
		e.mu.Lock()
		p.resizing = nil
		if err == nil {
			p.vol.Size = want
		}
		e.mu.Unlock()
		close(ch)
		if err != nil {
			return err
		}
	}
}

func (e *economy) setSize(ctx context.Context, uuid, aggr, reserve string, size, grow int64) error {
	if grow > 0 && aggr != "" {
		if err := e.d.checkAggregateLimit(ctx, aggr, reserve, grow); err != nil {
			return err
		}
	}
	err := e.d.client.ModifyVolume(ctx, uuid, rest.VolumeModify{Size: &size})
	if err != nil && grow > 0 && e.d.lacksSpace(ctx, err, aggr, reserve, grow) {
		return backends.Errorf(backends.ErrExhausted, "aggregate %s cannot hold %d more bytes: %w", aggr, grow, err)
	}
	if err != nil {
		return e.d.failure(err, "resizing pool FlexVol")
	}
	return nil
}

// pool returns the pool called name, reading ONTAP if it is not known.
func (e *economy) pool(ctx context.Context, name string) (*econPool, error) {
	e.mu.Lock()
	p := e.pools[name]
	e.mu.Unlock()
	if p != nil {
		return p, nil
	}
	if err := e.refresh(ctx); err != nil {
		return nil, err
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if p = e.pools[name]; p == nil {
		return nil, backends.Errorf(backends.ErrNotFound, "FlexVol %s is not a pool of this backend", name)
	}
	return p, nil
}

// prepared readies a pool for members once per process.
func (e *economy) prepared(ctx context.Context, p *econPool) error {
	e.mu.Lock()
	done, v := p.prepared, p.vol
	e.mu.Unlock()
	if done {
		return nil
	}
	if err := e.kind.prepare(ctx, &v); err != nil {
		return err
	}
	e.mu.Lock()
	p.prepared = true
	e.mu.Unlock()
	return nil
}

// check reads a pool's members from ONTAP after a create: more than the
// limit means another controller filled it at the same time, and the
// caller takes its member out again (over is true). It also grows the pool
// to what ONTAP says its members need, which covers a resize by another
// controller that overtook ours.
func (e *economy) check(ctx context.Context, r *poolReservation) (over bool, err error) {
	e.mu.Lock()
	v := r.p.vol
	e.mu.Unlock()
	u, err := e.kind.use(ctx, &v)
	if err != nil {
		return false, err
	}
	if r.member && u.members > e.perPool {
		e.mu.Lock()
		r.p.full = true
		e.mu.Unlock()
		return true, nil
	}
	return false, e.resize(ctx, r.p, func(p *econPool) int64 {
		return max(p.optimalSize(u.bytes), p.optimalSize(p.bytes+p.pendingBytes))
	}, false)
}

// forget records a member's delete: size bytes less. It returns whether
// the pool may now be empty.
func (e *economy) forget(name string, size int64, member bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	p := e.pools[name]
	if p == nil {
		return true
	}
	p.bytes = max(0, p.bytes-size)
	if member {
		p.members = max(0, p.members-1)
	}
	return p.members == 0 && p.pending == 0
}

// markFull keeps a pool out of placement until ONTAP is read again.
func (e *economy) markFull(p *econPool) {
	e.mu.Lock()
	p.full = true
	e.mu.Unlock()
}

// volumesByID lists a backend's volumes by ID.
func volumesByID(ctx context.Context, b interface {
	ListVolumes(context.Context) ([]*backends.Volume, error)
}) (map[string]*backends.Volume, error) {
	vols, err := b.ListVolumes(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]*backends.Volume, len(vols))
	for _, v := range vols {
		out[v.ID] = v
	}
	return out, nil
}

// waitDone waits for ch to be closed: the work another call does for this
// one (a listing, a new pool, a resize) is over.
func waitDone(ctx context.Context, ch <-chan struct{}) error {
	select {
	case <-ch:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// keepFirstPool splits the copies of one economy volume found in several
// pools into the one to keep, the one in the first pool by name (the same
// choice for every caller), and the others (docs/design/economy.md §4.6).
func keepFirstPool[T any](copies []T, pool func(*T) string) (keep *T, drop []*T) {
	for i := range copies {
		c := &copies[i]
		switch {
		case keep == nil:
			keep = c
		case pool(c) < pool(keep):
			drop, keep = append(drop, keep), c
		default:
			drop = append(drop, c)
		}
	}
	return keep, drop
}

// detach is the context of the steps that make or delete a member of a
// pool: they run to their end even if the caller has given up waiting
// (docs/design/economy.md §4.6). A create abandoned half way could land on
// ONTAP after its retry, or after the volume's delete, leaving a member no
// one deletes; a delete abandoned after the member went would leave its
// pool to the prune, as a retried call finds the member gone. The
// controller's per-volume lock, held meanwhile, turns the retries away
// (Aborted). Bounded, and ended by nothing else.
func detach(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.WithoutCancel(ctx), 5*time.Minute)
}
