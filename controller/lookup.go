package controller

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
)

// found is a volume together with the backend serving it.
type found struct {
	vol     *backends.Volume
	backend backends.Backend
	// notManaged: the records mark it Trident's unmanaged import.
	notManaged bool
}

// findVolume resolves a volume ID by asking every backend, as Trident's
// IDs carry no backend. It fails with backends.ErrNotFound only when every
// backend answered that it does not have the volume: a backend that could
// not answer, or is not loaded, may hold it, and deleting or reporting it
// gone would be wrong.
func (s *Service) findVolume(ctx context.Context, id string) (*found, error) {
	type answer struct {
		vol *backends.Volume
		err error
	}
	rec, err := s.record(ctx, id)
	if err != nil {
		return nil, err
	}
	bs, incomplete := s.backendSet()
	answers := make([]answer, len(bs))
	if len(bs) == 1 {
		v, err := volumeOn(ctx, bs[0], id, rec.InternalName)
		answers[0] = answer{v, err}
	} else {
		var wg sync.WaitGroup
		for i, b := range bs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				v, err := volumeOn(ctx, b, id, rec.InternalName)
				answers[i] = answer{v, err}
			}()
		}
		wg.Wait()
	}
	var hits []found
	var failure error
	for i, a := range answers {
		switch {
		case a.err == nil:
			hits = append(hits, found{vol: a.vol, backend: bs[i]})
		case !errors.Is(a.err, backends.ErrNotFound) && failure == nil:
			failure = backends.Named(bs[i].Name(), a.err)
		}
	}
	if len(hits) > 0 {
		f := ownerOf(ctx, hits)
		f.notManaged = rec.NotManaged
		return f, nil
	}
	if failure != nil {
		return nil, failure
	}
	if incomplete != nil {
		return nil, fmt.Errorf("volume %s is on none of the loaded backends: %w", id, incomplete)
	}
	return nil, backends.Errorf(backends.ErrNotFound, "volume %s not found", id)
}

// findVolumeCached is findVolume for the calls that follow a volume's
// creation or publication closely: publish, unpublish and delete. A
// backend that remembers the volume (backends.IdentityCache) answers
// without asking its storage system, and the other backends are not
// asked at all: the volume's identity carries its backend. Otherwise it
// is findVolume, and the backend serving the volume remembers it. The
// backend that answers from memory checks its answer on the storage
// system's own "not found" (docs/design/ontap-rest.md §6, §10.1). Calls that
// must see the storage system as it is now use findVolume.
func (s *Service) findVolumeCached(ctx context.Context, id string) (*found, error) {
	rec, err := s.record(ctx, id)
	if err != nil {
		return nil, err
	}
	bs, _ := s.backendSet()
	var hits []found
	for _, b := range bs {
		if c, ok := b.(backends.IdentityCache); ok {
			if v, ok := c.KnownVolume(id, rec.InternalName); ok {
				hits = append(hits, found{vol: v, backend: b})
			}
		}
	}
	if len(hits) > 0 {
		f := ownerOf(ctx, hits)
		f.notManaged = rec.NotManaged
		return f, nil
	}
	f, err := s.findVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	if c, ok := f.backend.(backends.IdentityCache); ok {
		c.Remember(f.vol)
	}
	return f, nil
}

// ownerOf picks, among backends that see the same volume (they share an
// SVM and a storage prefix), the one recorded as its creator, else the
// first configured.
func ownerOf(ctx context.Context, hits []found) *found {
	if len(hits) > 1 {
		logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": hits[0].vol.ID, "backends": len(hits)}).
			Debug("volume is visible through several backends")
	}
	for i := range hits {
		if hits[i].vol.Owner == hits[i].backend.Name() {
			return &hits[i]
		}
	}
	return &hits[0]
}

// allVolumes lists the volumes of every backend, each once, sorted by ID.
func (s *Service) allVolumes(ctx context.Context) ([]found, error) {
	bs, incomplete := s.backendSet()
	if incomplete != nil {
		return nil, incomplete
	}
	byID := map[string][]found{}
	for _, b := range bs {
		vols, err := b.ListVolumes(ctx)
		if err != nil {
			return nil, backends.Named(b.Name(), err)
		}
		for _, v := range vols {
			byID[v.ID] = append(byID[v.ID], found{vol: v, backend: b})
		}
	}
	if err := s.addRecordedVolumes(ctx, bs, byID); err != nil {
		return nil, err
	}
	out := make([]found, 0, len(byID))
	for _, hits := range byID {
		out = append(out, *ownerOf(ctx, hits))
	}
	sort.Slice(out, func(i, j int) bool { return out[i].vol.ID < out[j].vol.ID })
	return out, nil
}

// recordedLookups bounds the lookups of addRecordedVolumes in flight.
const recordedLookups = 8

// addRecordedVolumes adds to byID the volumes that no backend listed
// because their ONTAP name is not the naming rule's (a nameTemplate's, an
// import kept under its own name: docs/design/trident-compat.md §4.1),
// found at the name their records give. Without them, external-attacher
// would find such a volume published nowhere and publish it again on every
// reconcile (docs/design/ontap-rest.md §9). One lookup per such volume and
// backend that can look at a name; a record whose volume is gone costs its
// lookup and is left out.
func (s *Service) addRecordedVolumes(ctx context.Context, bs []backends.Backend, byID map[string][]found) error {
	l, ok := s.records.(RecordLister)
	if !ok {
		return nil
	}
	var locators []backends.Backend
	for _, b := range bs {
		if _, ok := b.(backends.VolumeLocator); ok {
			locators = append(locators, b)
		}
	}
	if len(locators) == 0 {
		return nil
	}
	recs, err := l.ListRecords(ctx)
	if err != nil {
		return backends.Errorf(backends.ErrUnavailable, "listing the volumes' records: %w", err)
	}
	type lookup struct {
		id      string
		rec     VolumeRecord
		backend backends.Backend
		vol     *backends.Volume
		err     error
	}
	var todo []*lookup
	for id, rec := range recs {
		if _, listed := byID[id]; listed || rec.InternalName == "" {
			continue
		}
		for _, b := range locators {
			todo = append(todo, &lookup{id: id, rec: rec, backend: b})
		}
	}
	sem := make(chan struct{}, recordedLookups)
	var wg sync.WaitGroup
	for _, lk := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer func() { <-sem; wg.Done() }()
			lk.vol, lk.err = lk.backend.(backends.VolumeLocator).VolumeAt(ctx, lk.id, lk.rec.InternalName)
		}()
	}
	wg.Wait()
	for _, lk := range todo {
		switch {
		case lk.err == nil:
			byID[lk.id] = append(byID[lk.id], found{vol: lk.vol, backend: lk.backend, notManaged: lk.rec.NotManaged})
		case !errors.Is(lk.err, backends.ErrNotFound):
			return backends.Named(lk.backend.Name(), lk.err)
		}
	}
	return nil
}
