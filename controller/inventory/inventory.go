// Package inventory keeps what the controller knows of its backends between
// calls: whether each one is reachable, and its volumes and snapshots as
// last listed. A background refresh reads them once per period, with a
// listing per backend (not a request per volume); metrics scrapes, the
// backend listing of `ontap-csi backends` and the state log lines read
// only this cache, so a scrape never costs an ONTAP request.
package inventory

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
)

// State is a backend's state, with Trident's values (the backend_state of
// trident_backend_count).
type State string

const (
	Unknown State = "unknown" // not checked yet
	Online  State = "online"
	Offline State = "offline" // worked before, fails now
	Failed  State = "failed"  // has not worked yet: configuration, credentials, TLS
)

// Defaults of Config.
const (
	DefaultPeriod  = time.Minute
	DefaultTimeout = 30 * time.Second
)

// BackendStatus is one backend as last checked.
type BackendStatus struct {
	Name          string    `json:"name"`
	Driver        string    `json:"storageDriverName"`
	UUID          string    `json:"backendUUID,omitempty"`
	SVM           string    `json:"svm,omitempty"`
	ManagementLIF string    `json:"managementLIF,omitempty"`
	State         State     `json:"state"`
	Message       string    `json:"message,omitempty"`
	CheckedAt     time.Time `json:"checkedAt"`
	Volumes       int       `json:"volumes"`
	Snapshots     int       `json:"snapshots"`
}

// PV is what the volume info series takes from a PersistentVolume of the
// driver: its name (normally the volume ID), claim and class.
type PV struct {
	VolumeID, Name, Namespace, Claim, StorageClass string
}

// Config configures an Inventory.
type Config struct {
	// Backends returns the backends served now.
	Backends func() []backends.Backend
	// Period is how often everything is listed again (DefaultPeriod).
	Period time.Duration
	// Timeout bounds one backend's listing (DefaultTimeout).
	Timeout time.Duration
	// PVs lists the driver's PersistentVolumes; nil leaves the claim out
	// of the volume info series.
	PVs func(context.Context) ([]PV, error)
	// StorageClasses counts the driver's StorageClasses; nil leaves
	// trident_storageclass_count out.
	StorageClasses func(context.Context) (int, error)
	// Nodes counts the nodes the controller knows; nil leaves
	// trident_node_count out.
	Nodes func(context.Context) (int, error)
}

// volume is a volume as the metrics count it.
type volume struct {
	id, internalName string
	sizeBytes        int64
	volumeType       string // Trident's volume mode: Filesystem or Block
	owner            string // the backend recorded as its creator
}

// snapshot is a snapshot as the metrics count it.
type snapshot struct {
	volumeID  string
	sizeBytes int64 // Trident's: the size of a volume restored from it
}

// entry is one backend's state and last listing.
type entry struct {
	status     BackendStatus
	volumes    []volume
	snapshots  []snapshot
	everOnline bool
	served     bool  // in the last Backends() set
	reported   error // the last configuration check a Report gave
}

// Inventory is the cache. Its zero value is not usable; see New.
type Inventory struct {
	cfg Config

	mu        sync.Mutex
	entries   map[string]*entry
	pvs       map[string]PV // by volume ID
	scCount   *int
	nodeCount *int
	refreshed time.Time

	changed chan struct{} // Changed's request for a refresh; holds at most one
}

// New returns an Inventory; Run refreshes it.
func New(cfg Config) *Inventory {
	if cfg.Period <= 0 {
		cfg.Period = DefaultPeriod
	}
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Inventory{cfg: cfg, entries: map[string]*entry{}, changed: make(chan struct{}, 1)}
}

// Run refreshes at once, which is the start-up check of every backend,
// then once per period, and after Changed, until ctx ends.
func (inv *Inventory) Run(ctx context.Context) {
	t := time.NewTicker(inv.cfg.Period)
	defer t.Stop()
	for {
		inv.Refresh(ctx)
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-inv.changed:
			// Trident updates its metrics as a backend is added; without
			// this, a backend loaded after start-up (a TridentBackendConfig,
			// or every backend after a controller restart) would be
			// missing from them for up to a period.
		}
	}
}

// Changed says the backends served changed: Run lists them again without
// waiting for the period. Calls while a refresh is pending add nothing.
func (inv *Inventory) Changed() {
	select {
	case inv.changed <- struct{}{}:
	default:
	}
}

// Refresh checks and lists every backend now, in parallel.
func (inv *Inventory) Refresh(ctx context.Context) {
	bs := inv.cfg.Backends()
	results := make([]listing, len(bs))
	var wg sync.WaitGroup
	for i, b := range bs {
		wg.Go(func() {
			lctx, cancel := context.WithTimeout(ctx, inv.cfg.Timeout)
			defer cancel()
			results[i] = list(lctx, b)
		})
	}
	k := inv.listCluster(ctx)
	wg.Wait()
	if ctx.Err() != nil {
		return
	}
	inv.mu.Lock()
	defer inv.mu.Unlock()
	for _, e := range inv.entries {
		e.served = false
	}
	for i := range results {
		inv.apply(&results[i])
	}
	for name, e := range inv.entries {
		// A backend no longer served goes, unless its configuration
		// failed its check (it is a failed backend, as in Trident).
		if !e.served && e.reported == nil {
			delete(inv.entries, name)
		}
	}
	k.apply(inv)
	inv.refreshed = time.Now()
}

// listing is what one backend answered.
type listing struct {
	b         backends.Backend
	desc      backends.Description
	err       error
	volumes   []volume
	snapshots []*backends.Snapshot
}

// list checks a backend (Pools connects it) and lists its volumes and
// snapshots: a few requests each, whatever their number.
func list(ctx context.Context, b backends.Backend) (l listing) {
	l.b = b
	defer func() {
		if d, ok := b.(backends.Describer); ok {
			l.desc = d.Describe()
		}
	}()
	if _, l.err = b.Pools(ctx); l.err != nil {
		return l
	}
	vols, err := b.ListVolumes(ctx)
	if l.err = err; err != nil {
		return l
	}
	for _, v := range vols {
		l.volumes = append(l.volumes, volume{
			id: v.ID, internalName: v.Context["internalName"], sizeBytes: v.SizeBytes,
			volumeType: volumeType(b.Protocol(), v), owner: v.Owner,
		})
	}
	l.snapshots, l.err = b.Snapshots(ctx, backends.SnapshotFilter{})
	return l
}

// volumeType is Trident's volume mode: raw block volumes are Block,
// everything else (every NFS volume) is Filesystem.
func volumeType(p backends.Protocol, v *backends.Volume) string {
	if p == backends.ProtocolBlock && (v.AccessType == backends.AccessBlock || v.FSType == backends.FSTypeRaw) {
		return "Block"
	}
	return "Filesystem"
}

// apply records a listing; called with mu held. A failed listing keeps
// the volumes last seen: they did not go away because ONTAP did not
// answer, and dashboards should not say so.
func (inv *Inventory) apply(l *listing) {
	name := l.b.Name()
	e := inv.entries[name]
	if e == nil {
		e = &entry{status: BackendStatus{Name: name, State: Unknown}}
		inv.entries[name] = e
	}
	e.served, e.reported = true, nil
	e.status.Driver = l.b.Driver()
	e.status.SVM, e.status.ManagementLIF = l.desc.SVM, l.desc.ManagementLIF
	if l.desc.UUID != "" {
		e.status.UUID = l.desc.UUID
	}
	e.status.CheckedAt = time.Now()
	if l.err == nil {
		e.volumes, e.snapshots = l.volumes, nil
		for _, s := range l.snapshots {
			e.snapshots = append(e.snapshots, snapshot{volumeID: s.VolumeID, sizeBytes: s.SizeBytes})
		}
		e.status.Volumes, e.status.Snapshots = len(l.volumes), len(l.snapshots)
	}
	inv.setState(e, l.err)
}

// setState moves a backend to online or to offline/failed, and logs a
// change once; called with mu held. The error names the backend.
func (inv *Inventory) setState(e *entry, err error) {
	prev, prevMsg := e.status.State, e.status.Message
	if err == nil {
		e.everOnline = true
		e.status.State, e.status.Message = Online, ""
		if prev != Online {
			logrus.WithFields(logrus.Fields{"backend": e.status.Name, "svm": e.status.SVM, "volumes": e.status.Volumes}).
				Info("backend is online")
		}
		return
	}
	// The message names the backend, once (backends.Named).
	e.status.State, e.status.Message = Failed, backends.Named(e.status.Name, err).Error()
	if e.everOnline {
		e.status.State = Offline
	}
	if prev != e.status.State || prevMsg != e.status.Message {
		logrus.WithField("state", e.status.State).Warn(e.status.Message)
	}
}

// Report records the check of a configuration made elsewhere (a
// TridentBackendConfig being applied): err nil means ONTAP accepted it. A
// failed one is listed, and counted, as a failed backend until it works,
// is served, or Forget is called.
func (inv *Inventory) Report(name, driver string, err error) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	e := inv.entries[name]
	if e == nil {
		e = &entry{status: BackendStatus{Name: name, State: Unknown}}
		inv.entries[name] = e
	}
	e.status.Driver, e.status.CheckedAt, e.reported = driver, time.Now(), err
	if err == nil {
		e.everOnline = true
		e.status.State, e.status.Message = Online, ""
		return
	}
	e.status.State, e.status.Message = Failed, backends.Named(name, err).Error()
	if e.everOnline {
		e.status.State = Offline
	}
}

// Forget drops a backend whose configuration is gone.
func (inv *Inventory) Forget(name string) {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	if e := inv.entries[name]; e != nil && !e.served {
		delete(inv.entries, name)
	}
}

// Backends returns every backend's status, by name.
func (inv *Inventory) Backends() []BackendStatus {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	out := make([]BackendStatus, 0, len(inv.entries))
	for _, e := range inv.entries {
		out = append(out, e.status)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// Refreshed is when the last refresh finished; zero before the first.
func (inv *Inventory) Refreshed() time.Time {
	inv.mu.Lock()
	defer inv.mu.Unlock()
	return inv.refreshed
}
