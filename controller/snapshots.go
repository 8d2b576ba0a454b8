package controller

import (
	"context"
	"errors"
	"sort"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ontap-csi/ontap-csi/backends"
)

// CreateSnapshot takes a snapshot, or returns the one a previous call took.
// Snapshot names are unique across volumes (CSI): the same name on another
// volume is AlreadyExists.
func (s *Service) CreateSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*csi.CreateSnapshotResponse, error) {
	snap, err := s.createSnapshot(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return &csi.CreateSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}

func (s *Service) createSnapshot(ctx context.Context, req *csi.CreateSnapshotRequest) (*backends.Snapshot, error) {
	name, volID := req.GetName(), req.GetSourceVolumeId()
	if err := requireString("name", name, maxStringBytes); err != nil {
		return nil, err
	}
	if err := requireString("source_volume_id", volID, maxStringBytes); err != nil {
		return nil, err
	}
	if err := checkMap("parameters", req.GetParameters()); err != nil {
		return nil, err
	}
	unlock, ok := s.locks.TryLock(snapshotKey(name))
	if !ok {
		return nil, pending("snapshot " + name)
	}
	defer unlock()
	// The source volume too, as DeleteSnapshot, DeleteVolume and expand
	// take it: a snapshot must not be cut while its volume goes away.
	unlockVol, ok := s.locks.TryLock(volumeKey(volID))
	if !ok {
		return nil, pending(volID)
	}
	defer unlockVol()

	// A snapshot of this name on a backend that is not loaded goes unseen
	// here; if that backend holds the source volume, findVolume below fails.
	bs, _ := s.backendSet()
	for _, b := range bs {
		snaps, err := b.Snapshots(ctx, backends.SnapshotFilter{Name: b.SnapshotName(name)})
		if err != nil {
			return nil, backends.Named(b.Name(), err)
		}
		for _, sn := range snaps {
			if sn.VolumeID != volID {
				return nil, alreadyExists("snapshot %s already exists on volume %s", name, sn.VolumeID)
			}
			return sn, nil
		}
	}
	f, err := s.findVolume(ctx, volID)
	if errors.Is(err, backends.ErrNotFound) {
		return nil, notFound("source volume %s not found", volID)
	}
	if err != nil {
		return nil, err
	}
	if err := f.managed("snapshotted"); err != nil {
		return nil, err
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"snapshot": name, "volume": volID, "backend": f.backend.Name()}).Info("creating snapshot")
	return f.backend.CreateSnapshot(ctx, f.vol, name)
}

// DeleteSnapshot deletes a snapshot; an unknown or malformed ID is deleted.
func (s *Service) DeleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) (*csi.DeleteSnapshotResponse, error) {
	return reply(&csi.DeleteSnapshotResponse{}, s.deleteSnapshot(ctx, req))
}

func (s *Service) deleteSnapshot(ctx context.Context, req *csi.DeleteSnapshotRequest) error {
	id := req.GetSnapshotId()
	if err := requireString("snapshot_id", id, maxSnapshotIDBytes); err != nil {
		return err
	}
	volID, name, ok := parseSnapshotID(id)
	if !ok {
		return nil
	}
	unlock, ok := s.locks.TryLock(volumeKey(volID))
	if !ok {
		return pending(volID)
	}
	defer unlock()
	snap, f, err := s.findSnapshot(ctx, volID, name)
	if errors.Is(err, backends.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"snapshot": id, "backend": f.backend.Name()}).Info("deleting snapshot")
	return f.backend.DeleteSnapshot(ctx, snap)
}

// findSnapshot returns a snapshot by its volume ID and backend name.
func (s *Service) findSnapshot(ctx context.Context, volID, name string) (*backends.Snapshot, *found, error) {
	f, err := s.findVolume(ctx, volID)
	if err != nil {
		return nil, nil, err
	}
	snaps, err := f.backend.Snapshots(ctx, backends.SnapshotFilter{Volume: f.vol, Name: name})
	if err != nil {
		return nil, nil, err
	}
	if len(snaps) == 0 {
		return nil, nil, backends.Errorf(backends.ErrNotFound, "snapshot %s not found", snapshotID(volID, name))
	}
	return snaps[0], f, nil
}

// GetSnapshot returns one snapshot by ID.
func (s *Service) GetSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	return reply(s.getSnapshot(ctx, req))
}

func (s *Service) getSnapshot(ctx context.Context, req *csi.GetSnapshotRequest) (*csi.GetSnapshotResponse, error) {
	id := req.GetSnapshotId()
	if err := requireString("snapshot_id", id, maxSnapshotIDBytes); err != nil {
		return nil, err
	}
	volID, name, ok := parseSnapshotID(id)
	if !ok {
		return nil, notFound("snapshot %q not found", id)
	}
	snap, _, err := s.findSnapshot(ctx, volID, name)
	if err != nil {
		return nil, err
	}
	return &csi.GetSnapshotResponse{Snapshot: csiSnapshot(snap)}, nil
}

// ListSnapshots pages through snapshots in ID order, optionally those of one
// volume or the one with a given ID. Unknown IDs give an empty list (CSI).
func (s *Service) ListSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	return reply(s.listSnapshots(ctx, req))
}

func (s *Service) listSnapshots(ctx context.Context, req *csi.ListSnapshotsRequest) (*csi.ListSnapshotsResponse, error) {
	if req.GetMaxEntries() < 0 {
		return nil, invalidArg("max_entries must not be negative")
	}
	if err := checkString("snapshot_id", req.GetSnapshotId(), maxSnapshotIDBytes); err != nil {
		return nil, err
	}
	if err := checkString("source_volume_id", req.GetSourceVolumeId(), maxStringBytes); err != nil {
		return nil, err
	}
	start, ok := parsePageToken(req.GetStartingToken())
	if !ok {
		return nil, abortedToken(req.GetStartingToken())
	}
	snaps, err := s.snapshotsMatching(ctx, req.GetSnapshotId(), req.GetSourceVolumeId())
	if err != nil {
		return nil, err
	}
	sort.Slice(snaps, func(i, j int) bool { return snapshotIDOf(snaps[i]) < snapshotIDOf(snaps[j]) })
	entries, next := page(snaps, snapshotIDOf, start, int(req.GetMaxEntries()))
	resp := &csi.ListSnapshotsResponse{NextToken: next}
	for _, sn := range entries {
		resp.Entries = append(resp.Entries, &csi.ListSnapshotsResponse_Entry{Snapshot: csiSnapshot(sn)})
	}
	return resp, nil
}

// snapshotsMatching returns the snapshot with ID snapID, or those of volume
// volID, or every snapshot (empty arguments match anything).
func (s *Service) snapshotsMatching(ctx context.Context, snapID, volID string) ([]*backends.Snapshot, error) {
	if snapID != "" {
		v, name, ok := parseSnapshotID(snapID)
		if !ok || volID != "" && v != volID {
			return nil, nil
		}
		snap, _, err := s.findSnapshot(ctx, v, name)
		if errors.Is(err, backends.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return []*backends.Snapshot{snap}, nil
	}
	if volID != "" {
		f, err := s.findVolume(ctx, volID)
		if errors.Is(err, backends.ErrNotFound) {
			return nil, nil
		}
		if err != nil {
			return nil, err
		}
		return f.backend.Snapshots(ctx, backends.SnapshotFilter{Volume: f.vol})
	}
	bs, incomplete := s.backendSet()
	if incomplete != nil {
		return nil, incomplete
	}
	// Backends sharing an SVM report the same snapshots: keep each ID once.
	seen := map[string]bool{}
	var out []*backends.Snapshot
	for _, b := range bs {
		snaps, err := b.Snapshots(ctx, backends.SnapshotFilter{})
		if err != nil {
			return nil, backends.Named(b.Name(), err)
		}
		for _, sn := range snaps {
			if id := snapshotIDOf(sn); !seen[id] {
				seen[id] = true
				out = append(out, sn)
			}
		}
	}
	return out, nil
}

func snapshotIDOf(sn *backends.Snapshot) string { return snapshotID(sn.VolumeID, sn.Name) }

func csiSnapshot(sn *backends.Snapshot) *csi.Snapshot {
	out := &csi.Snapshot{
		SnapshotId:     snapshotIDOf(sn),
		SourceVolumeId: sn.VolumeID,
		SizeBytes:      sn.SizeBytes,
		ReadyToUse:     sn.Ready,
	}
	if !sn.CreatedAt.IsZero() {
		out.CreationTime = timestamppb.New(sn.CreatedAt)
	}
	return out
}
