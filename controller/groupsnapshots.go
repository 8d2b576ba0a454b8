package controller

import (
	"context"
	"errors"
	"slices"
	"strings"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/protobuf/types/known/timestamppb"

	"github.com/ontap-csi/ontap-csi/backends"
)

// CSI GroupController: crash-consistent snapshots of several volumes of
// one backend (Kubernetes VolumeGroupSnapshot). A group snapshot's ID is
// its CSI name; its members are ordinary snapshots named after it, one per
// volume, with ordinary snapshot IDs, so each serves as a VolumeSnapshot
// source on its own. Get and Delete find the members by that name, and
// check the snapshot_ids the CO sends against them.

// maxGroupMembers bounds a group snapshot's source volumes.
const maxGroupMembers = 64

// GroupControllerGetCapabilities advertises group snapshots.
func (s *Service) GroupControllerGetCapabilities(context.Context, *csi.GroupControllerGetCapabilitiesRequest) (*csi.GroupControllerGetCapabilitiesResponse, error) {
	return &csi.GroupControllerGetCapabilitiesResponse{Capabilities: []*csi.GroupControllerServiceCapability{{
		Type: &csi.GroupControllerServiceCapability_Rpc{Rpc: &csi.GroupControllerServiceCapability_RPC{
			Type: csi.GroupControllerServiceCapability_RPC_CREATE_DELETE_GET_VOLUME_GROUP_SNAPSHOT,
		}},
	}}}, nil
}

// CreateVolumeGroupSnapshot snapshots the source volumes at one instant,
// or returns the group snapshot an earlier call took.
func (s *Service) CreateVolumeGroupSnapshot(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.CreateVolumeGroupSnapshotResponse, error) {
	g, err := s.createGroupSnapshot(ctx, req)
	if err != nil {
		return nil, toStatus(err)
	}
	return &csi.CreateVolumeGroupSnapshotResponse{GroupSnapshot: g}, nil
}

func checkGroupRequest(req *csi.CreateVolumeGroupSnapshotRequest) error {
	if err := requireString("name", req.GetName(), maxStringBytes); err != nil {
		return err
	}
	ids := req.GetSourceVolumeIds()
	if len(ids) == 0 || len(ids) > maxGroupMembers {
		return invalidArg("source_volume_ids has %d volumes; want 1 to %d", len(ids), maxGroupMembers)
	}
	for i, id := range ids {
		if err := requireString("source_volume_ids", id, maxStringBytes); err != nil {
			return err
		}
		if slices.Contains(ids[:i], id) {
			return invalidArg("source_volume_ids names %s twice", id)
		}
	}
	if err := checkMap("parameters", req.GetParameters()); err != nil {
		return err
	}
	for k := range req.GetParameters() {
		// The snapshotter's --extra-create-metadata keys only.
		if !strings.HasPrefix(k, "csi.storage.k8s.io/") {
			return invalidArg("group snapshot parameter %q is not supported", k)
		}
	}
	return nil
}

func (s *Service) createGroupSnapshot(ctx context.Context, req *csi.CreateVolumeGroupSnapshotRequest) (*csi.VolumeGroupSnapshot, error) {
	if err := checkGroupRequest(req); err != nil {
		return nil, err
	}
	name, ids := req.GetName(), slices.Sorted(slices.Values(req.GetSourceVolumeIds()))
	unlock, err := s.lockAll(append([]string{snapshotKey(name)}, volumeKeys(ids)...))
	if err != nil {
		return nil, err
	}
	defer unlock()
	members, err := s.groupMembers(ctx, name)
	if err != nil {
		return nil, err
	}
	for _, sn := range members {
		if !slices.Contains(ids, sn.VolumeID) {
			return nil, alreadyExists("group snapshot %s already exists with volume %s", name, sn.VolumeID)
		}
	}
	var vols []*backends.Volume
	var b backends.Backend
	for _, id := range ids {
		f, err := s.findVolume(ctx, id)
		if errors.Is(err, backends.ErrNotFound) {
			return nil, notFound("source volume %s not found", id)
		}
		if err != nil {
			return nil, err
		}
		if b != nil && f.backend != b {
			return nil, invalidArg("volumes %s and %s are on different backends; a group snapshot takes one backend's", ids[0], id)
		}
		b = f.backend
		vols = append(vols, f.vol)
	}
	gs, ok := b.(backends.GroupSnapshotter)
	if !ok {
		return nil, invalidArg("backend %s (%s) takes no group snapshots", b.Name(), b.Driver())
	}
	logrus.WithContext(ctx).WithFields(logrus.Fields{"groupSnapshot": name, "volumes": ids, "backend": b.Name()}).Info("creating group snapshot")
	snaps, err := gs.CreateGroupSnapshot(ctx, vols, name)
	if err != nil {
		return nil, backends.Named(b.Name(), err)
	}
	return csiGroupSnapshot(name, snaps), nil
}

func volumeKeys(ids []string) []string {
	out := make([]string, 0, len(ids))
	for _, id := range ids {
		out = append(out, volumeKey(id))
	}
	return out
}

// lockAll takes every key or none (Aborted: another call holds one).
func (s *Service) lockAll(keys []string) (func(), error) {
	var unlocks []func()
	release := func() {
		for _, u := range slices.Backward(unlocks) {
			u()
		}
	}
	for _, k := range keys {
		u, ok := s.locks.TryLock(k)
		if !ok {
			release()
			return nil, pending(k)
		}
		unlocks = append(unlocks, u)
	}
	return release, nil
}

// groupMembers returns the snapshots of group snapshot name on every
// backend, ordered by volume.
func (s *Service) groupMembers(ctx context.Context, name string) ([]*backends.Snapshot, error) {
	bs, _ := s.backendSet()
	var out []*backends.Snapshot
	for _, b := range bs {
		snaps, err := b.Snapshots(ctx, backends.SnapshotFilter{Name: b.SnapshotName(name)})
		if err != nil {
			return nil, backends.Named(b.Name(), err)
		}
		out = append(out, snaps...)
	}
	slices.SortFunc(out, func(a, b *backends.Snapshot) int { return strings.Compare(a.VolumeID, b.VolumeID) })
	return out, nil
}

// checkMembers refuses snapshot_ids that are not members of the group.
func checkMembers(group string, ids []string, members []*backends.Snapshot) error {
	for _, id := range ids {
		if !slices.ContainsFunc(members, func(sn *backends.Snapshot) bool { return snapshotIDOf(sn) == id }) {
			return invalidArg("snapshot %s is not a member of group snapshot %s", id, group)
		}
	}
	return nil
}

func csiGroupSnapshot(id string, snaps []*backends.Snapshot) *csi.VolumeGroupSnapshot {
	g := &csi.VolumeGroupSnapshot{GroupSnapshotId: id, ReadyToUse: true}
	for _, sn := range snaps {
		c := csiSnapshot(sn)
		c.GroupSnapshotId = id
		g.Snapshots = append(g.Snapshots, c)
		g.ReadyToUse = g.ReadyToUse && sn.Ready
		if g.CreationTime == nil && !sn.CreatedAt.IsZero() {
			g.CreationTime = timestamppb.New(sn.CreatedAt)
		}
	}
	return g
}

// GetVolumeGroupSnapshot returns a group snapshot; NotFound when it has no
// member left.
func (s *Service) GetVolumeGroupSnapshot(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	return reply(s.getGroupSnapshot(ctx, req))
}

func (s *Service) getGroupSnapshot(ctx context.Context, req *csi.GetVolumeGroupSnapshotRequest) (*csi.GetVolumeGroupSnapshotResponse, error) {
	id := req.GetGroupSnapshotId()
	if err := checkGroupIDs(id, req.GetSnapshotIds()); err != nil {
		return nil, err
	}
	members, err := s.groupMembers(ctx, id)
	if err != nil {
		return nil, err
	}
	if len(members) == 0 {
		return nil, notFound("group snapshot %s not found", id)
	}
	if err := checkMembers(id, req.GetSnapshotIds(), members); err != nil {
		return nil, err
	}
	return &csi.GetVolumeGroupSnapshotResponse{GroupSnapshot: csiGroupSnapshot(id, members)}, nil
}

func checkGroupIDs(id string, snapshotIDs []string) error {
	if err := requireString("group_snapshot_id", id, maxStringBytes); err != nil {
		return err
	}
	if len(snapshotIDs) > maxGroupMembers {
		return invalidArg("snapshot_ids has %d snapshots; a group has at most %d", len(snapshotIDs), maxGroupMembers)
	}
	for _, sid := range snapshotIDs {
		if err := requireString("snapshot_ids", sid, maxSnapshotIDBytes); err != nil {
			return err
		}
	}
	return nil
}

// DeleteVolumeGroupSnapshot deletes every member; an unknown group is
// deleted.
func (s *Service) DeleteVolumeGroupSnapshot(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) (*csi.DeleteVolumeGroupSnapshotResponse, error) {
	return reply(&csi.DeleteVolumeGroupSnapshotResponse{}, s.deleteGroupSnapshot(ctx, req))
}

func (s *Service) deleteGroupSnapshot(ctx context.Context, req *csi.DeleteVolumeGroupSnapshotRequest) error {
	id := req.GetGroupSnapshotId()
	if err := checkGroupIDs(id, req.GetSnapshotIds()); err != nil {
		return err
	}
	members, err := s.groupMembers(ctx, id)
	if err != nil || len(members) == 0 {
		return err // none left: deleted already
	}
	if err := checkMembers(id, req.GetSnapshotIds(), members); err != nil {
		return err
	}
	vols := make([]string, 0, len(members))
	for _, sn := range members {
		vols = append(vols, sn.VolumeID)
	}
	unlock, err := s.lockAll(volumeKeys(vols))
	if err != nil {
		return err
	}
	defer unlock()
	for _, sn := range members {
		snap, f, err := s.findSnapshot(ctx, sn.VolumeID, sn.Name)
		if errors.Is(err, backends.ErrNotFound) {
			continue
		}
		if err == nil {
			logrus.WithContext(ctx).WithFields(logrus.Fields{"groupSnapshot": id, "snapshot": snapshotIDOf(sn)}).Info("deleting group snapshot member")
			err = f.backend.DeleteSnapshot(ctx, snap)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
