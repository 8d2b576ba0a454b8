package ontap

import (
	"context"
	"fmt"
	"slices"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// Options tune a driver beyond its Trident backend configuration.
type Options struct {
	// InstallationID is the "<uuid>" of per-node igroups "<node>-<uuid>".
	// Empty derives it from the SVM's UUID, so every controller of every
	// installation that uses the SVM agrees on it without stored state.
	// Set it to the Trident UUID (TridentVersion) to take over the
	// igroups of a Trident installation.
	InstallationID string
	// Client adjusts the REST client settings (e.g. shorter retry delays
	// in tests).
	Client func(*rest.ClientConfig)
}

// NewBackend returns the ontap-nas or ontap-san driver of a parsed backend
// configuration. It does not contact ONTAP: the first call that needs ONTAP
// connects, and a failed connection is retried by the next call, so an
// unreachable ONTAP never stops the plugin from starting.
func NewBackend(cfg *config.Backend, opts Options) (backends.Backend, error) {
	cc := clientConfig(cfg)
	if opts.Client != nil {
		opts.Client(&cc)
	}
	client, err := rest.NewClient(cc)
	if err != nil {
		return nil, fmt.Errorf("backend %s (%s): %w", cfg.BackendName, cfg.Source, err)
	}
	d := &driver{cfg: cfg, client: client, opts: opts, igroupLocks: keyMutex{m: map[string]*keyLock{}}}
	switch cfg.StorageDriverName {
	case config.DriverONTAPNAS:
		n := &nasDriver{driver: d}
		d.initProtocol = n.init
		return n, nil
	case config.DriverONTAPSAN:
		s := &sanDriver{driver: d}
		d.initProtocol, d.lunSizes = s.init, s.listLUNSizes
		return s, nil
	}
	return nil, fmt.Errorf("backend %s (%s): storage driver %q is not supported", cfg.BackendName, cfg.Source, cfg.StorageDriverName)
}

// clientConfig returns the REST client settings of a backend.
func clientConfig(c *config.Backend) rest.ClientConfig {
	return rest.ClientConfig{
		ManagementLIF:         c.ManagementLIF,
		SVM:                   c.SVM,
		Username:              c.Username,
		Password:              string(c.Password),
		ClientCertificate:     c.ClientCertificate,
		ClientPrivateKey:      []byte(c.ClientPrivateKey),
		TrustedCACertificate:  c.TrustedCACertificate,
		InsecureSkipTLSVerify: c.InsecureSkipTLSVerify,
	}
}

// driver is what ontap-nas and ontap-san share.
type driver struct {
	cfg    *config.Backend
	client *rest.Client
	opts   Options

	initProtocol func(context.Context) error
	// lunSizes maps FlexVol names to LUN sizes (ontap-san only).
	lunSizes func(context.Context) (map[string]int64, error)

	initMu sync.Mutex
	// Set once ONTAP answered; derived from the SVM, never from volumes.
	svm            *rest.SVM
	pools          []backends.Pool
	installationID string
	backendUUID    string

	// igroupLocks serializes publish and unpublish per igroup, so that an
	// unpublish deleting a node's last LUN map and emptied igroup cannot
	// race a publish mapping another LUN to it.
	igroupLocks keyMutex
}

func (d *driver) Name() string { return d.cfg.BackendName }

// Close implements io.Closer: it releases the idle connections to ONTAP of
// a backend that is replaced or removed. Calls in flight finish, and a call
// made later still works, on a new connection.
func (d *driver) Close() error {
	d.client.Close()
	return nil
}

func (d *driver) Driver() string { return d.cfg.StorageDriverName }

// MinimumVolumeSize is ONTAP's (and Trident's) smallest FlexVol.
const MinimumVolumeSize = 20 << 20

func (d *driver) Limits() backends.Limits {
	return backends.Limits{
		MinVolumeSize:     MinimumVolumeSize,
		MaxVolumeSize:     d.cfg.LimitVolumeSize,
		DefaultVolumeSize: d.cfg.Defaults.Size,
	}
}

// ready connects to ONTAP once: it finds the SVM, derives the identifiers
// and pools, and lets the protocol check its service.
func (d *driver) ready(ctx context.Context) error {
	d.initMu.Lock()
	defer d.initMu.Unlock()
	if d.svm != nil {
		return nil
	}
	svm, err := d.client.SVM(ctx)
	if err != nil {
		return backends.Errorf(backends.ErrUnavailable, "backend %s: cannot reach SVM %s: %w", d.Name(), d.cfg.SVM, err)
	}
	if svm.State != "" && svm.State != "running" {
		return backends.Errorf(backends.ErrUnavailable, "backend %s: SVM %s is %s", d.Name(), svm.Name, svm.State)
	}
	if a := d.cfg.Aggregate; a != "" && !slices.ContainsFunc(svm.Aggregates, func(x rest.SVMAggregate) bool { return x.Name == a }) {
		return backends.Errorf(backends.ErrUnavailable, "backend %s: aggregate %s is not assigned to SVM %s", d.Name(), a, svm.Name)
	}
	if d.initProtocol != nil {
		if err := d.initProtocol(ctx); err != nil {
			return err
		}
	}
	d.installationID = d.opts.InstallationID
	if d.installationID == "" {
		d.installationID = nameUUID("ontap-csi:igroups:" + svm.UUID)
	}
	d.backendUUID = nameUUID("ontap-csi:backend:" + svm.UUID + ":" + d.cfg.BackendName)
	d.pools = d.buildPools(svm)
	d.svm = svm
	logrus.WithContext(ctx).WithFields(logrus.Fields{
		"backend": d.Name(), "svm": svm.Name, "svmUUID": svm.UUID, "pools": len(d.pools),
	}).Info("ONTAP backend connected")
	return nil
}

// buildPools: virtual pools when the config has them, else one pool per
// aggregate of the SVM, as Trident offers physical pools.
func (d *driver) buildPools(svm *rest.SVM) []backends.Pool {
	var pools []backends.Pool
	for _, vp := range d.cfg.Storage {
		pt := "thin"
		if vp.Defaults.SpaceReserve == "volume" {
			pt = "thick"
		}
		pools = append(pools, backends.Pool{
			Name: vp.Name, Labels: vp.Labels, Topologies: vp.SupportedTopologies, ProvisioningTypes: []string{pt},
			Media: d.mediaOf(svm, d.cfg.Aggregate),
		})
	}
	if len(pools) > 0 {
		return pools
	}
	for _, a := range svm.Aggregates {
		if d.cfg.Aggregate != "" && a.Name != d.cfg.Aggregate {
			continue
		}
		pools = append(pools, backends.Pool{
			Name: a.Name, Labels: d.cfg.Labels, Topologies: d.cfg.SupportedTopologies,
			Media: d.mediaOf(svm, a.Name), ProvisioningTypes: []string{"thin", "thick"},
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

func (d *driver) Pools(ctx context.Context) ([]backends.Pool, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	return d.pools, nil
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
// failure no error code of its own (ontap-rest.md §3.5: the job fails with
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
// without a configured aggregate, the SVM's largest), capped by
// limitAggregateUsage when it is set.
func (d *driver) Capacity(ctx context.Context, pool string) (*backends.Capacity, error) {
	if err := d.ready(ctx); err != nil {
		return nil, err
	}
	svm, err := d.client.SVM(ctx)
	if err != nil {
		return nil, d.failure(err, "reading the aggregates of SVM %s", d.cfg.SVM)
	}
	want := d.cfg.Aggregate
	if len(d.cfg.Storage) == 0 {
		want = pool
	}
	c := &backends.Capacity{MaxVolumeSize: d.cfg.LimitVolumeSize}
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
	return c, nil
}

// failure turns a client error into a backend error of the right kind,
// saying what was being done.
func (d *driver) failure(err error, format string, args ...any) error {
	return wrapFailure(kindOf(err, false), err, format, args...)
}

// createFailure is failure for a create, where ONTAP's "not found" names
// something the request refers to (see kindOf).
func (d *driver) createFailure(err error, format string, args ...any) error {
	return wrapFailure(kindOf(err, true), err, format, args...)
}

func wrapFailure(kind, err error, format string, args ...any) error {
	msg := fmt.Sprintf(format, args...)
	if kind != nil {
		return backends.Errorf(kind, "%s: %w", msg, err)
	}
	return fmt.Errorf("%s: %w", msg, err)
}

// kindOf maps the class of a client error to a backend error kind, nil
// when none fits: the one place where ONTAP's classes meet the kinds the
// controller maps to gRPC codes. In a create, ONTAP's "not found" means the
// request named something that does not exist (an export or snapshot
// policy, an aggregate, a clone's source), which CSI calls an invalid
// argument.
func kindOf(err error, inCreate bool) error {
	switch rest.ClassOf(err) {
	case rest.ClassNotFound:
		if inCreate {
			return backends.ErrInvalid
		}
		return backends.ErrNotFound
	case rest.ClassAlreadyExists:
		return backends.ErrAlreadyExists
	case rest.ClassInUse:
		return backends.ErrInUse
	case rest.ClassInvalid:
		return backends.ErrInvalid
	case rest.ClassThrottled, rest.ClassAuth:
		return backends.ErrUnavailable
	}
	return nil
}

// keyMutex hands out one mutex per key, waiting for it with a context.
type keyMutex struct {
	mu sync.Mutex
	m  map[string]*keyLock
}

type keyLock struct {
	ch   chan struct{}
	refs int
}

func (k *keyMutex) lock(ctx context.Context, key string) (func(), error) {
	k.mu.Lock()
	l := k.m[key]
	if l == nil {
		l = &keyLock{ch: make(chan struct{}, 1)}
		k.m[key] = l
	}
	l.refs++
	k.mu.Unlock()
	release := func() {
		k.mu.Lock()
		if l.refs--; l.refs == 0 {
			delete(k.m, key)
		}
		k.mu.Unlock()
	}
	select {
	case l.ch <- struct{}{}:
		return func() { <-l.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, ctx.Err()
	}
}
