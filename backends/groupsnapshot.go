package backends

import "context"

// GroupSnapshotter is a Backend that snapshots several of its volumes at
// one instant (CSI CreateVolumeGroupSnapshot): crash-consistent across
// them. Each snapshot is an ordinary one of its volume, which Snapshots,
// DeleteSnapshot and clones take as any other.
type GroupSnapshotter interface {
	// CreateGroupSnapshot snapshots vols together, each snapshot named
	// SnapshotName(name), or returns the snapshots an earlier call took.
	// If some of vols have a snapshot of that name and others not, it
	// fails with ErrAlreadyExists and takes none.
	CreateGroupSnapshot(ctx context.Context, vols []*Volume, name string) ([]*Snapshot, error)
}
