package controller

import (
	"context"
	"sort"
	"sync"
	"time"

	"github.com/ontap-csi/ontap-csi/backends"
)

// fakeBackend is an in-memory backends.Backend for the controller's own
// logic: arguments, capabilities, placement, IDs, idempotency, codes.
// ONTAP behaviour is tested against the simulator, not here.
type fakeBackend struct {
	name     string
	driver   string
	protocol backends.Protocol
	limits   backends.Limits
	pools    []backends.Pool

	mu        sync.Mutex
	vols      map[string]*backends.Volume
	snaps     map[string]*backends.Snapshot // "<vol>/<snap>"
	published map[string][]string           // volume -> node names
	failWith  error                         // returned by every call when set
	creates   []*backends.CreateRequest
	modifies  []backends.Modify // applied by ModifyVolume
	lookups   int               // calls of Volume
	groups    int               // group snapshots taken
	listings  int               // calls of PublishedNodes
	listedFor [][]string        // the volume IDs of each PublishedNodes call
	// capMax: a pool's bounded MaxVolumeSize for Capacity; capOpts: the
	// options of the last Capacity call.
	capMax  map[string]int64
	capOpts backends.VolumeOptions
	// With block set, CreateVolume signals entered and waits on block.
	block, entered chan struct{}
}

func newFake(name, driver string, protocol backends.Protocol, pools ...backends.Pool) *fakeBackend {
	if len(pools) == 0 {
		pools = []backends.Pool{{Name: "aggr1", ProvisioningTypes: []string{"thin", "thick"}}}
	}
	return &fakeBackend{
		name: name, driver: driver, protocol: protocol, pools: pools,
		limits: backends.Limits{MinVolumeSize: 20 << 20, DefaultVolumeSize: 1 << 30},
		vols:   map[string]*backends.Volume{}, snaps: map[string]*backends.Snapshot{}, published: map[string][]string{},
	}
}

func (f *fakeBackend) Name() string                { return f.name }
func (f *fakeBackend) Driver() string              { return f.driver }
func (f *fakeBackend) Protocol() backends.Protocol { return f.protocol }
func (f *fakeBackend) Limits() backends.Limits     { return f.limits }
func (f *fakeBackend) SnapshotName(n string) string {
	return n
}

func (f *fakeBackend) Pools(context.Context) ([]backends.Pool, error) {
	if f.failWith != nil {
		return nil, f.failWith
	}
	return f.pools, nil
}

func (f *fakeBackend) Capacity(_ context.Context, pool string, opts backends.VolumeOptions) (*backends.Capacity, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.capOpts = opts
	if m, ok := f.capMax[pool]; ok {
		return &backends.Capacity{Available: int64(len(pool)) << 30, MaxVolumeSize: m, Bounded: true}, nil
	}
	return &backends.Capacity{Available: int64(len(pool)) << 30, MaxVolumeSize: f.limits.MaxVolumeSize, Bounded: f.limits.MaxVolumeSize > 0}, nil
}

func (f *fakeBackend) CreateVolume(_ context.Context, r *backends.CreateRequest) (*backends.Volume, error) {
	if f.block != nil {
		f.entered <- struct{}{}
		<-f.block
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return nil, f.failWith
	}
	f.creates = append(f.creates, r)
	v := &backends.Volume{
		ID: r.Name, Backend: f.name, Owner: f.name, Pool: r.Pool, SizeBytes: r.SizeBytes,
		AccessType: r.AccessType, FSType: r.FSType, Topologies: r.Topologies,
		Context: map[string]string{"name": r.Name},
	}
	if s := r.Source; s != nil {
		if s.Snapshot != nil {
			v.SourceSnapshotID = s.Snapshot.VolumeID + "/" + s.Snapshot.Name
		} else {
			v.SourceVolumeID = s.Volume.ID
		}
	}
	f.vols[r.Name] = v
	return v, nil
}

func (f *fakeBackend) Volume(_ context.Context, id string) (*backends.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.lookups++
	if f.failWith != nil {
		return nil, f.failWith
	}
	v, ok := f.vols[id]
	if !ok || v.Context[fakeOwnName] != "" {
		// One with a name of its own is not where the naming rule looks.
		return nil, backends.Errorf(backends.ErrNotFound, "volume %s not found", id)
	}
	c := *v
	return &c, nil
}

// fakeOwnName is the volume context key of a fake volume's name of its own
// (not the naming rule's): only VolumeAt finds it.
const fakeOwnName = "internalName"

// VolumeAt implements backends.VolumeLocator.
func (f *fakeBackend) VolumeAt(_ context.Context, id, internalName string) (*backends.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return nil, f.failWith
	}
	v, ok := f.vols[id]
	if !ok || v.Context[fakeOwnName] != internalName {
		return nil, backends.Errorf(backends.ErrNotFound, "volume %s not found at %s", id, internalName)
	}
	c := *v
	return &c, nil
}

func (f *fakeBackend) ListVolumes(context.Context) ([]*backends.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*backends.Volume
	for _, v := range f.vols {
		if v.Context[fakeOwnName] == "" { // as a driver's listing: the naming rule's names only
			out = append(out, v)
		}
	}
	return out, nil
}

func (f *fakeBackend) DeleteVolume(_ context.Context, v *backends.Volume) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, s := range f.snaps {
		if s.VolumeID == v.ID {
			return backends.Errorf(backends.ErrInUse, "volume %s has snapshots", v.ID)
		}
	}
	delete(f.vols, v.ID)
	return nil
}

func (f *fakeBackend) ExpandVolume(_ context.Context, v *backends.Volume, size int64) (*backends.Volume, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.vols[v.ID].SizeBytes = size
	c := *f.vols[v.ID]
	return &c, nil
}

func (f *fakeBackend) Publish(_ context.Context, v *backends.Volume, r *backends.PublishRequest) (map[string]string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.published[v.ID] = append(f.published[v.ID], r.Node.Name)
	return map[string]string{"protocol": string(f.protocol), "node": r.Node.Name, "iqn": r.Node.IQN}, nil
}

func (f *fakeBackend) Unpublish(_ context.Context, v *backends.Volume, node string, _ *backends.Node) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	var keep []string
	for _, n := range f.published[v.ID] {
		if n != node {
			keep = append(keep, n)
		}
	}
	f.published[v.ID] = keep
	return nil
}

func (f *fakeBackend) CreateSnapshot(_ context.Context, v *backends.Volume, name string) (*backends.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := &backends.Snapshot{Name: name, VolumeID: v.ID, CreatedAt: time.Unix(1700000000, 0), SizeBytes: v.SizeBytes, Ready: true}
	f.snaps[v.ID+"/"+name] = s
	return s, nil
}

func (f *fakeBackend) Snapshots(_ context.Context, flt backends.SnapshotFilter) ([]*backends.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []*backends.Snapshot
	for _, s := range f.snaps {
		if flt.Volume != nil && s.VolumeID != flt.Volume.ID || flt.Name != "" && s.Name != flt.Name {
			continue
		}
		out = append(out, s)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, nil
}

func (f *fakeBackend) DeleteSnapshot(_ context.Context, s *backends.Snapshot) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.snaps, s.VolumeID+"/"+s.Name)
	return nil
}

// CheckModify refuses, as ontap-san does, what an iSCSI volume lacks.
func (f *fakeBackend) CheckModify(m *backends.Modify) error {
	if f.protocol == backends.ProtocolBlock && (m.UnixPermissions != nil || m.ExportPolicy != nil || m.SnapshotDir != nil) {
		return backends.Errorf(backends.ErrInvalid, "does not apply to iSCSI volumes")
	}
	return nil
}

func (f *fakeBackend) ModifyVolume(_ context.Context, v *backends.Volume, m *backends.Modify) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return f.failWith
	}
	f.modifies = append(f.modifies, *m)
	return nil
}

// CreateGroupSnapshot snapshots vols at one instant, all or none.
func (f *fakeBackend) CreateGroupSnapshot(_ context.Context, vols []*backends.Volume, name string) ([]*backends.Snapshot, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failWith != nil {
		return nil, f.failWith
	}
	out := make([]*backends.Snapshot, 0, len(vols))
	for _, v := range vols {
		if s := f.snaps[v.ID+"/"+name]; s != nil {
			out = append(out, s) // taken by an earlier call
		}
	}
	if len(out) == len(vols) {
		return out, nil
	}
	out = out[:0]
	for _, v := range vols {
		out = append(out, &backends.Snapshot{Name: name, VolumeID: v.ID, CreatedAt: time.Unix(1700000001, 0), SizeBytes: v.SizeBytes, Ready: true})
	}
	for _, s := range out {
		f.snaps[s.VolumeID+"/"+name] = s
	}
	f.groups++
	return out, nil
}
