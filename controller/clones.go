package controller

import (
	"context"
	"errors"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
)

// cloneSource is a resolved volume content source.
type cloneSource struct {
	backend backends.Backend
	// volume is the source volume, or the volume the snapshot belongs to.
	volume   *backends.Volume
	snapshot *backends.Snapshot // nil when cloning a volume
	id       string             // the CSI ID the request named
	size     int64
}

// contentSource resolves a CreateVolume content source; nil when the
// request has none. A source that does not exist is NotFound (CSI).
func (s *Service) contentSource(ctx context.Context, src *csi.VolumeContentSource) (*cloneSource, error) {
	switch {
	case src == nil:
		return nil, nil
	case src.GetSnapshot() != nil:
		id := src.GetSnapshot().GetSnapshotId()
		volID, name, ok := parseSnapshotID(id)
		if !ok {
			return nil, notFound("snapshot %q not found", id)
		}
		f, err := s.findVolume(ctx, volID)
		if errors.Is(err, backends.ErrNotFound) {
			return nil, notFound("snapshot %s not found: its volume does not exist", id)
		}
		if err != nil {
			return nil, err
		}
		snaps, err := f.backend.Snapshots(ctx, backends.SnapshotFilter{Volume: f.vol, Name: name})
		if err != nil {
			return nil, err
		}
		if len(snaps) == 0 {
			return nil, notFound("snapshot %s not found", id)
		}
		size := snaps[0].SizeBytes
		if size == 0 {
			size = f.vol.SizeBytes
		}
		return &cloneSource{backend: f.backend, volume: f.vol, snapshot: snaps[0], id: id, size: size}, nil
	case src.GetVolume() != nil:
		id := src.GetVolume().GetVolumeId()
		f, err := s.findVolume(ctx, id)
		if errors.Is(err, backends.ErrNotFound) {
			return nil, notFound("source volume %s not found", id)
		}
		if err != nil {
			return nil, err
		}
		if err := f.managed("cloned (clone a snapshot of it)"); err != nil {
			return nil, err
		}
		return &cloneSource{backend: f.backend, volume: f.vol, id: id, size: f.vol.SizeBytes}, nil
	}
	return nil, invalidArg("volume content source has neither a snapshot nor a volume")
}

// createClone makes a FlexClone-style copy on the source's backend: a clone
// cannot leave the storage system (or pool) its source lives in.
func (s *Service) createClone(ctx context.Context, name string, req *csi.CreateVolumeRequest, use *volumeUse, p *parameters, src *cloneSource) (*backends.Volume, error) {
	b := src.backend
	if p.backendType != "" && p.backendType != b.Driver() {
		return nil, invalidArg("source %s lives on a %s backend; the StorageClass asks for %s", src.id, b.Driver(), p.backendType)
	}
	if p.protocol != "" && p.protocol != b.Protocol() {
		return nil, invalidArg("source %s is a %s volume; the claim's %sprotocol asks for %s", src.id, b.Protocol(), annPrefix, p.protocol)
	}
	if err := use.fitsVolume(b.Protocol(), src.volume); err != nil {
		return nil, invalidArg("cannot clone %s for this use: %v", src.id, err)
	}
	topologies := src.volume.Topologies
	if requisite, _ := topologySegments(req.GetAccessibilityRequirements()); len(requisite) > 0 && topologies != nil {
		if topologies = intersectTopologies(topologies, requisite); len(topologies) == 0 {
			return nil, exhausted("source %s is not accessible from the requisite topology", src.id)
		}
	}
	size, err := volumeSize(req.GetCapacityRange(), b.Limits(), src.size)
	if err != nil {
		return nil, err
	}
	source := &backends.Source{Volume: src.volume}
	if src.snapshot != nil {
		source = &backends.Source{Snapshot: src.snapshot}
	}
	r := createRequest(name, src.volume.Pool, size, use, p, source, topologies)
	if use.access == backends.AccessMount && r.FSType == "" {
		r.FSType = src.volume.FSType
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"volume": name, "source": src.id}).Info("cloning")
	return s.create(ctx, b, r, p.mutable)
}
