package controller

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/types/known/wrapperspb"

	"github.com/ontap-csi/ontap-csi/backends"
)

// CreateVolume creates a volume named after the CSI name, or returns the
// one a previous call created.
func (s *Service) CreateVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*csi.CreateVolumeResponse, error) {
	vol, err := s.createVolume(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return &csi.CreateVolumeResponse{Volume: csiVolume(vol)}, nil
}

func (s *Service) createVolume(ctx context.Context, req *csi.CreateVolumeRequest) (*backends.Volume, error) {
	use, params, err := checkCreateRequest(req)
	if err != nil {
		return nil, err
	}
	name := req.GetName()
	unlock, ok := s.locks.TryLock(volumeKey(name))
	if !ok {
		return nil, pending(name)
	}
	defer unlock()
	// The claim's annotations decide the volume as the StorageClass does,
	// so they are read before a fresh create. A claim that cannot be read
	// (gone, API down, a bad annotation) fails only a volume not made yet:
	// a retry of one that exists is answered without it.
	source, claimErr := s.applyClaimOf(ctx, req, use, params)
	if claimErr == nil && source == nil {
		if vol, ok, err := s.createFresh(ctx, req, use, params); ok {
			return vol, err
		}
	}
	done, resume, err := s.earlierCreate(ctx, req, use)
	if err == nil && done != nil {
		err = s.finishClone(ctx, done, params.mutable)
	}
	if err != nil || done != nil {
		return done, err
	}
	if claimErr != nil {
		return nil, claimErr
	}
	src, err := s.contentSource(ctx, source)
	if err != nil {
		return nil, err
	}
	if src != nil {
		return s.createClone(ctx, name, req, use, params, src)
	}
	return s.createInPools(ctx, req, use, params, resume)
}

// applyClaimOf lays the annotations of the volume's claim over params and
// use, and returns the source its cloneFromPVC names, if any.
func (s *Service) applyClaimOf(ctx context.Context, req *csi.CreateVolumeRequest, use *volumeUse, params *parameters) (*csi.VolumeContentSource, error) {
	claim, co, err := s.claimOf(ctx, req.GetName(), req.GetParameters())
	if err != nil {
		return nil, err
	}
	if err := applyClaim(co, params, use); err != nil {
		return nil, err
	}
	if claim != nil {
		params.claim = backends.Claim{Name: claim.Name, Namespace: claim.Namespace, StorageClass: claim.StorageClass}
	}
	return s.cloneFromClaim(ctx, claim, co, req.GetVolumeContentSource())
}

// checkCreateRequest checks a CreateVolume's arguments before anything is
// looked up.
func checkCreateRequest(req *csi.CreateVolumeRequest) (*volumeUse, *parameters, error) {
	if err := requireString("name", req.GetName(), maxStringBytes); err != nil {
		return nil, nil, err
	}
	if err := checkMap("parameters", req.GetParameters()); err != nil {
		return nil, nil, err
	}
	if err := checkContentSource(req.GetVolumeContentSource()); err != nil {
		return nil, nil, err
	}
	use, err := parseCapabilities(req.GetVolumeCapabilities())
	if err != nil {
		return nil, nil, err
	}
	rng := req.GetCapacityRange()
	if rng.GetRequiredBytes() < 0 || rng.GetLimitBytes() < 0 {
		return nil, nil, outOfRange("capacity range must not be negative")
	}
	if rng.GetLimitBytes() > 0 && rng.GetRequiredBytes() > rng.GetLimitBytes() {
		return nil, nil, outOfRange("required bytes %d exceed limit bytes %d", rng.GetRequiredBytes(), rng.GetLimitBytes())
	}
	params, err := parseParameters(req.GetParameters())
	if err != nil {
		return nil, nil, err
	}
	if err := params.setMutable(req.GetMutableParameters()); err != nil {
		return nil, nil, err
	}
	return use, params, nil
}

// earlierCreate finds what an earlier call for this name made: the name is
// the volume ID, so looking the ID up finds it. It returns a finished volume
// to answer with (done), or a half-made one for the backend's create to
// complete (resume), or neither.
func (s *Service) earlierCreate(ctx context.Context, req *csi.CreateVolumeRequest, use *volumeUse) (done *backends.Volume, resume *found, err error) {
	existing, err := s.findVolume(ctx, req.GetName())
	if errors.Is(err, backends.ErrNotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	if err := compatible(existing, req, use); err != nil {
		return nil, nil, err
	}
	log := logrus.WithContext(ctx).WithField("volume", req.GetName())
	if !existing.vol.Incomplete {
		log.Debug("volume exists; returning it")
		return existing.vol, nil, nil
	}
	log.Info("completing a volume an earlier attempt left half-made")
	return nil, existing, nil
}

// createFresh creates the volume without first looking for one an earlier
// attempt made, sparing a read per create, where the storage system itself
// tells a retry: with one backend, whose CreateVolume honours Fresh, the
// name (the volume ID) is taken in every pool of it. With several, an
// earlier attempt's volume may sit on a backend the retry does not try
// first. ok is false when the caller must look and create as usual: the
// name is taken, or no pool fits (a volume made earlier is still returned
// when the StorageClass no longer selects its pool). The caller's volume
// has no content source, from the request or the claim.
func (s *Service) createFresh(ctx context.Context, req *csi.CreateVolumeRequest, use *volumeUse, params *parameters) (vol *backends.Volume, ok bool, err error) {
	bs, incomplete := s.backendSet()
	if len(bs) != 1 || incomplete != nil {
		return nil, false, nil
	}
	if f, ok := bs[0].(backends.FreshCreator); !ok || !f.CreatesFresh() {
		return nil, false, nil
	}
	places, err := s.fittingPlacements(ctx, req, use, params)
	if err != nil {
		return nil, false, nil
	}
	vol, err = s.createIn(ctx, req, use, params, places, nil, true)
	if errors.Is(err, backends.ErrNameTaken) {
		logrus.WithContext(ctx).WithField("volume", req.GetName()).Debug("name taken: looking for what an earlier attempt made")
		return nil, false, nil
	}
	return vol, true, err
}

// fittingPlacements are the pools the volume may go to, in order, that
// also take its mutable parameters.
func (s *Service) fittingPlacements(ctx context.Context, req *csi.CreateVolumeRequest, use *volumeUse, params *parameters) ([]placement, error) {
	places, err := s.placements(ctx, params, use, req.GetAccessibilityRequirements(), req.GetName())
	if err != nil {
		return nil, err
	}
	return mutableFits(places, params.mutable)
}

// createInPools creates the volume in the first pool that fits, trying the
// next one while pools are full. A resumed create stays where the earlier
// attempt started it.
func (s *Service) createInPools(ctx context.Context, req *csi.CreateVolumeRequest, use *volumeUse, params *parameters, resume *found) (*backends.Volume, error) {
	places, err := s.fittingPlacements(ctx, req, use, params)
	if err != nil {
		return nil, err
	}
	return s.createIn(ctx, req, use, params, places, resume, false)
}

// createIn creates the volume in the first of places that fits (see
// createInPools); fresh: as CreateRequest.Fresh.
func (s *Service) createIn(ctx context.Context, req *csi.CreateVolumeRequest, use *volumeUse, params *parameters, places []placement, resume *found, fresh bool) (*backends.Volume, error) {
	name := req.GetName()
	var lastErr error
	for _, pl := range places {
		if resume != nil && (pl.backend != resume.backend || resume.vol.Pool != "" && pl.pool.Name != resume.vol.Pool) {
			continue
		}
		size, err := volumeSize(req.GetCapacityRange(), pl.backend.Limits(), 0)
		if err != nil {
			return nil, err
		}
		r := createRequest(name, pl.pool.Name, size, use, params, nil, pl.topologies)
		r.Fresh = fresh
		vol, err := s.create(ctx, pl.backend, r, params.mutable)
		if err == nil || !errors.Is(err, backends.ErrExhausted) {
			return vol, err
		}
		logrus.WithContext(ctx).WithError(err).WithFields(logrus.Fields{"volume": name, "backend": pl.backend.Name(), "pool": pl.pool.Name}).
			Info("pool is full; trying the next one")
		lastErr = err
	}
	if lastErr == nil {
		// Only a resumed create gets here: its pool no longer matches.
		return nil, alreadyExists("volume %s exists on backend %s, pool %s, which the request no longer selects",
			name, resume.backend.Name(), resume.vol.Pool)
	}
	return nil, lastErr
}

// create creates a volume on b. Mutable parameters (a
// VolumeAttributesClass) are already among r's options; a clone, which
// inherits its source's attributes, gets them applied afterwards.
func (s *Service) create(ctx context.Context, b backends.Backend, r *backends.CreateRequest, mutable *backends.Modify) (*backends.Volume, error) {
	if !mutable.Empty() {
		if _, err := modifierOf(b, mutable); err != nil {
			return nil, err
		}
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{
		"volume": r.Name, "backend": b.Name(), "pool": r.Pool, "size": r.SizeBytes, "access": r.AccessType,
	}).Info("creating volume")
	vol, err := b.CreateVolume(ctx, r)
	if err != nil || r.Source == nil || mutable.Empty() {
		return vol, err
	}
	return vol, modifyClone(ctx, b, vol.ID, mutable)
}

func createRequest(name, pool string, size int64, use *volumeUse, p *parameters, src *backends.Source, topo []map[string]string) *backends.CreateRequest {
	r := &backends.CreateRequest{
		Name: name, Pool: pool, SizeBytes: size, AccessType: use.access, FSType: use.fsType,
		Options: p.options, Source: src, Topologies: topo, Claim: p.claim,
	}
	if use.access == backends.AccessBlock {
		r.FSType = backends.FSTypeRaw
	}
	return r
}

// compatible decides whether an existing volume answers a create request
// for its name (CSI: otherwise AlreadyExists).
func compatible(f *found, req *csi.CreateVolumeRequest, use *volumeUse) error {
	v := f.vol
	rng := req.GetCapacityRange()
	// A half-made volume's size is not final yet; completing it sets it.
	if v.SizeBytes > 0 && !v.Incomplete {
		if v.SizeBytes < rng.GetRequiredBytes() || rng.GetLimitBytes() > 0 && v.SizeBytes > rng.GetLimitBytes() {
			return alreadyExists("volume %s exists with %d bytes, outside the requested range [%d, %d]",
				v.ID, v.SizeBytes, rng.GetRequiredBytes(), rng.GetLimitBytes())
		}
	}
	if err := use.fitsVolume(f.backend.Protocol(), v); err != nil {
		return alreadyExists("volume %s exists and does not fit the request: %v", v.ID, err)
	}
	switch src := req.GetVolumeContentSource(); {
	case src.GetSnapshot() != nil && src.GetSnapshot().GetSnapshotId() != v.SourceSnapshotID:
		return alreadyExists("volume %s exists but was not created from snapshot %s", v.ID, src.GetSnapshot().GetSnapshotId())
	case src.GetVolume() != nil && src.GetVolume().GetVolumeId() != v.SourceVolumeID:
		return alreadyExists("volume %s exists but was not cloned from volume %s", v.ID, src.GetVolume().GetVolumeId())
	}
	if p, _ := parseParameters(req.GetParameters()); p != nil && p.backendType != "" && p.backendType != f.backend.Driver() {
		return alreadyExists("volume %s exists on a %s backend, not %s", v.ID, f.backend.Driver(), p.backendType)
	}
	return nil
}

// volumeSize turns a capacity range into the size to create: the required
// bytes, or the backend's default when none are given, raised to the
// backend's minimum and to floor (a clone's source size).
func volumeSize(rng *csi.CapacityRange, lim backends.Limits, floor int64) (int64, error) {
	required, limit := rng.GetRequiredBytes(), rng.GetLimitBytes()
	size := required
	if size == 0 {
		size = max(lim.DefaultVolumeSize, floor)
		if limit > 0 && size > limit {
			size = limit
		}
	}
	size = max(size, floor, lim.MinVolumeSize)
	switch {
	case limit > 0 && size > limit && floor > limit:
		return 0, outOfRange("the source holds %d bytes, more than the limit of %d", floor, limit)
	case limit > 0 && size > limit:
		return 0, outOfRange("the smallest volume is %d bytes, more than the limit of %d", lim.MinVolumeSize, limit)
	case lim.MaxVolumeSize > 0 && size > lim.MaxVolumeSize:
		return 0, outOfRange("%d bytes exceed the backend's limitVolumeSize of %d bytes", size, lim.MaxVolumeSize)
	}
	return size, nil
}

// DeleteVolume deletes a volume; an unknown one is already deleted.
func (s *Service) DeleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) (*csi.DeleteVolumeResponse, error) {
	return reply(&csi.DeleteVolumeResponse{}, s.deleteVolume(ctx, req))
}

func (s *Service) deleteVolume(ctx context.Context, req *csi.DeleteVolumeRequest) error {
	id := req.GetVolumeId()
	if err := requireString("volume_id", id, maxStringBytes); err != nil {
		return err
	}
	unlock, ok := s.locks.TryLock(volumeKey(id))
	if !ok {
		return pending(id)
	}
	defer unlock()
	f, err := s.findVolumeCached(ctx, id)
	if errors.Is(err, backends.ErrNotFound) {
		s.recordCache.Delete(id)
		return nil
	}
	if err != nil {
		return err
	}
	if f.notManaged {
		// Trident deletes only its record of an unmanaged import.
		logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": id, "internalName": f.vol.Context["internalName"]}).
			Info("volume is an unmanaged import: left on ONTAP")
		s.recordCache.Delete(id)
		return nil
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": id, "backend": f.backend.Name()}).Info("deleting volume")
	if err := f.backend.DeleteVolume(ctx, f.vol); err != nil {
		return err
	}
	s.recordCache.Delete(id)
	return nil
}

// ValidateVolumeCapabilities confirms the capabilities a volume supports.
func (s *Service) ValidateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	return reply(s.validateVolumeCapabilities(ctx, req))
}

func (s *Service) validateVolumeCapabilities(ctx context.Context, req *csi.ValidateVolumeCapabilitiesRequest) (*csi.ValidateVolumeCapabilitiesResponse, error) {
	id := req.GetVolumeId()
	if err := requireString("volume_id", id, maxStringBytes); err != nil {
		return nil, err
	}
	use, err := parseCapabilities(req.GetVolumeCapabilities())
	if err != nil {
		return nil, err
	}
	if _, err := parseParameters(req.GetParameters()); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	f, err := s.findVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := use.fitsVolume(f.backend.Protocol(), f.vol); err != nil {
		return &csi.ValidateVolumeCapabilitiesResponse{Message: err.Error()}, nil
	}
	return &csi.ValidateVolumeCapabilitiesResponse{Confirmed: &csi.ValidateVolumeCapabilitiesResponse_Confirmed{
		VolumeContext:      req.GetVolumeContext(),
		VolumeCapabilities: req.GetVolumeCapabilities(),
		Parameters:         req.GetParameters(),
		MutableParameters:  req.GetMutableParameters(),
	}}, nil
}

// GetCapacity reports the space of the largest pool that could take a
// volume with these parameters: a volume lives in one pool, so a sum over
// pools (which may share an aggregate) would promise more than fits.
func (s *Service) GetCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	return reply(s.getCapacity(ctx, req))
}

func (s *Service) getCapacity(ctx context.Context, req *csi.GetCapacityRequest) (*csi.GetCapacityResponse, error) {
	params, err := parseParameters(req.GetParameters())
	if err != nil {
		return nil, err
	}
	var use *volumeUse
	if len(req.GetVolumeCapabilities()) > 0 {
		if use, err = parseCapabilities(req.GetVolumeCapabilities()); err != nil {
			return nil, err
		}
	}
	var topo *csi.TopologyRequirement
	if t := req.GetAccessibleTopology(); t != nil {
		topo = &csi.TopologyRequirement{Requisite: []*csi.Topology{t}}
	}
	places, err := s.placements(ctx, params, use, topo, "")
	if err != nil {
		if errors.Is(err, backends.ErrUnavailable) {
			return nil, err
		}
		// Nothing matches (or nothing is configured): no capacity rather
		// than an error, so that capacity tracking reports zero for such
		// a class.
		return &csi.GetCapacityResponse{}, nil
	}
	resp := &csi.GetCapacityResponse{}
	// maximum_volume_size is "the largest size that may be used in a
	// CreateVolumeRequest.capacity_range.required_bytes field to create a
	// volume with the same parameters" (CSI spec, GetCapacityResponse).
	// A create tries every pool in turn, so it is the largest over the
	// pools; a pool with no bound of its own counts its free space, which
	// is what the scheduler compares a claim with when the field is unset.
	var maxSize int64
	bounded := false
	for _, pl := range places {
		c, err := pl.backend.Capacity(ctx, pl.pool.Name, params.options)
		if err != nil {
			return nil, err
		}
		if c.Available >= resp.AvailableCapacity {
			resp.AvailableCapacity = c.Available
			resp.MinimumVolumeSize = wrapperspb.Int64(pl.backend.Limits().MinVolumeSize)
		}
		if c.Bounded {
			bounded = true
			maxSize = max(maxSize, c.MaxVolumeSize)
		} else {
			maxSize = max(maxSize, c.Available)
		}
	}
	if bounded {
		resp.MaximumVolumeSize = wrapperspb.Int64(maxSize)
	}
	return resp, nil
}

// ControllerExpandVolume grows a volume; block volumes then need the node to
// rescan and grow the filesystem.
func (s *Service) ControllerExpandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	return reply(s.expandVolume(ctx, req))
}

func (s *Service) expandVolume(ctx context.Context, req *csi.ControllerExpandVolumeRequest) (*csi.ControllerExpandVolumeResponse, error) {
	id := req.GetVolumeId()
	if err := requireString("volume_id", id, maxStringBytes); err != nil {
		return nil, err
	}
	rng := req.GetCapacityRange()
	if rng == nil || rng.GetRequiredBytes() <= 0 && rng.GetLimitBytes() <= 0 {
		return nil, invalidArg("capacity range is required")
	}
	if rng.GetRequiredBytes() < 0 || rng.GetLimitBytes() < 0 ||
		rng.GetLimitBytes() > 0 && rng.GetRequiredBytes() > rng.GetLimitBytes() {
		return nil, outOfRange("invalid capacity range [%d, %d]", rng.GetRequiredBytes(), rng.GetLimitBytes())
	}
	var use *volumeUse
	if c := req.GetVolumeCapability(); c != nil {
		var err error
		if use, err = parseCapabilities([]*csi.VolumeCapability{c}); err != nil {
			return nil, err
		}
	}
	unlock, ok := s.locks.TryLock(volumeKey(id))
	if !ok {
		return nil, pending(id)
	}
	defer unlock()
	f, err := s.findVolume(ctx, id)
	if err != nil {
		return nil, err
	}
	if err := f.managed("resized"); err != nil {
		return nil, err
	}
	if use != nil {
		if err := use.fitsVolume(f.backend.Protocol(), f.vol); err != nil {
			return nil, invalidArg("%v", err)
		}
	}
	size := rng.GetRequiredBytes()
	if size == 0 {
		size = rng.GetLimitBytes()
	}
	if max := f.backend.Limits().MaxVolumeSize; max > 0 && size > max {
		return nil, outOfRange("%d bytes exceed the backend's limitVolumeSize of %d bytes", size, max)
	}
	nodeExpansion := f.backend.Protocol() == backends.ProtocolBlock
	if size <= f.vol.SizeBytes {
		return &csi.ControllerExpandVolumeResponse{CapacityBytes: f.vol.SizeBytes, NodeExpansionRequired: nodeExpansion}, nil
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": id, "from": f.vol.SizeBytes, "to": size}).Info("expanding volume")
	vol, err := f.backend.ExpandVolume(ctx, f.vol, size)
	if err != nil {
		return nil, err
	}
	return &csi.ControllerExpandVolumeResponse{CapacityBytes: vol.SizeBytes, NodeExpansionRequired: nodeExpansion}, nil
}

// csiVolume renders a volume for a CSI response.
func csiVolume(v *backends.Volume) *csi.Volume {
	cv := &csi.Volume{
		VolumeId:           v.ID,
		CapacityBytes:      v.SizeBytes,
		VolumeContext:      v.Context,
		AccessibleTopology: csiTopologies(v.Topologies),
	}
	switch {
	case v.SourceSnapshotID != "":
		cv.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Snapshot{
			Snapshot: &csi.VolumeContentSource_SnapshotSource{SnapshotId: v.SourceSnapshotID}}}
	case v.SourceVolumeID != "":
		cv.ContentSource = &csi.VolumeContentSource{Type: &csi.VolumeContentSource_Volume{
			Volume: &csi.VolumeContentSource_VolumeSource{VolumeId: v.SourceVolumeID}}}
	}
	return cv
}
