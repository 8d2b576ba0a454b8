package ontap

import (
	"context"
	"strings"
	"sync"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

// nasDriver is ontap-nas: a FlexVol per volume, exported over NFS.
type nasDriver struct {
	*driver

	// nfsServer is the address nodes mount from: dataLIF, else the SVM's
	// first NFS data LIF that is up (Trident's choice at backend start).
	nfsServer string

	// emptyPolicyOK caches that "<prefix>empty" exists; a create that
	// finds it gone again makes it anew.
	emptyPolicyMu sync.Mutex
	emptyPolicyOK bool
}

func (n *nasDriver) init(ctx context.Context) error {
	if n.cfg.DataLIF != "" {
		n.nfsServer = strings.Trim(n.cfg.DataLIF, "[]")
		return nil
	}
	lifs, err := n.client.DataLIFs(ctx, rest.ServiceDataNFS)
	if err != nil {
		return backends.Errorf(backends.ErrUnavailable, "listing NFS data LIFs: %w", err)
	}
	for _, l := range lifs {
		if l.State == "up" {
			n.nfsServer = l.Address
			return nil
		}
	}
	return backends.Errorf(backends.ErrUnavailable, "SVM %s has no NFS data LIF that is up", n.cfg.SVM)
}

// Volume implements backends.Backend.
func (n *nasDriver) Volume(ctx context.Context, id string) (*backends.Volume, error) {
	return n.VolumeAt(ctx, id, n.volumeName(id))
}

// VolumeAt implements backends.VolumeLocator.
func (n *nasDriver) VolumeAt(ctx context.Context, id, internalName string) (*backends.Volume, error) {
	n.forget(id) // an uncached lookup: see identities.go
	v, meta, partial, err := n.lookup(ctx, id, internalName)
	if err != nil {
		return nil, err
	}
	bv := n.toVolume(id, v, meta, v.Size*int64(100-v.SnapshotReservePercent)/100)
	bv.Incomplete = partial
	return bv, nil
}

// CreatesFresh implements backends.FreshCreator: ONTAP refuses a FlexVol
// name that is taken in the SVM, and createFlexVol reports that.
func (n *nasDriver) CreatesFresh() bool { return true }

// autoPolicy reports whether the driver manages a volume's export policy.
func (n *nasDriver) autoPolicy(opts backends.VolumeOptions) bool {
	return n.cfg.AutoExportPolicy && opts.ExportPolicy == ""
}

// CreateVolume makes a FlexVol mounted at /<name> in one ONTAP job. With
// autoExportPolicy it starts with the empty policy: no node can mount it
// until it is published to that node.
func (n *nasDriver) CreateVolume(ctx context.Context, req *backends.CreateRequest) (*backends.Volume, error) {
	name, err := n.newVolumeName(ctx, req)
	if err != nil {
		return nil, err
	}
	if err := n.ready(ctx); err != nil {
		return nil, err
	}
	s, err := n.resolve(req)
	if err != nil {
		return nil, err
	}
	if _, _, err := n.fitFlexVol(req.SizeBytes, s.snapshotReserve, 1, false); err != nil {
		return nil, err
	}
	meta := n.meta(req, s)
	if name != n.volumeName(req.Name) {
		meta.InternalName = name // a nameTemplate's
	}
	comment, err := n.newComment(meta)
	if err != nil {
		return nil, err
	}
	policy := s.ExportPolicy
	if n.autoPolicy(req.Options) {
		policy = emptyPolicyName(n.cfg.StoragePrefix)
		if err := n.ensureEmptyPolicy(ctx); err != nil {
			return nil, err
		}
	}
	v, err := n.create(ctx, req, s, comment, policy, name)
	if err != nil && n.autoPolicy(req.Options) && rest.IsNotFound(err) {
		// The empty policy was deleted behind our back: make it again.
		n.emptyPolicyMu.Lock()
		n.emptyPolicyOK = false
		n.emptyPolicyMu.Unlock()
		if err := n.ensureEmptyPolicy(ctx); err != nil {
			return nil, err
		}
		v, err = n.create(ctx, req, s, comment, policy, name)
	}
	if err != nil {
		return nil, err
	}
	return n.toVolume(req.Name, v, meta, req.SizeBytes), nil
}

func (n *nasDriver) create(ctx context.Context, req *backends.CreateRequest, s *settings, comment, policy, name string) (*rest.Volume, error) {
	if req.Source != nil {
		v, err := n.cloneFlexVol(ctx, req, s, name)
		if err != nil {
			return nil, err
		}
		return v, n.finishClone(ctx, v, req, comment, policy)
	}
	size, large, err := n.fitFlexVol(req.SizeBytes, s.snapshotReserve, 1, false)
	if err != nil {
		return nil, err
	}
	return n.createFlexVol(ctx, req, rest.VolumeCreate{
		Name: name, Size: size, LargeSize: large,
		SpaceReserve: s.SpaceReserve, SnapshotPolicy: s.SnapshotPolicy, SnapshotReservePercent: &s.snapshotReserve,
		SnapshotDirAccess: &s.SnapshotDir, UnixPermissions: s.UnixPermissions, ExportPolicy: policy,
		SecurityStyle: s.SecurityStyle, JunctionPath: "/" + name, Comment: comment, Encryption: s.Encryption,
		TieringPolicy: s.TieringPolicy, QoSPolicy: s.QoSPolicy,
	})
}

// finishClone gives a FlexClone its own record, junction and export policy
// (it inherits its parent's), and its requested size, in one PATCH.
func (n *nasDriver) finishClone(ctx context.Context, v *rest.Volume, req *backends.CreateRequest, comment, policy string) error {
	m := rest.VolumeModify{}
	if v.Comment != comment {
		m.Comment = &comment
	}
	if path := "/" + v.Name; v.JunctionPath != path {
		m.JunctionPath = &path
	}
	if v.ExportPolicy != policy && policy != "" {
		m.ExportPolicy = &policy
	}
	size, large, err := n.fitFlexVol(req.SizeBytes, v.SnapshotReservePercent, 1, false)
	if err != nil {
		return err
	}
	if size > v.Size {
		m.Size, m.LargeSize = &size, large
	}
	if m == (rest.VolumeModify{}) {
		return nil
	}
	if err := n.client.ModifyVolume(ctx, v.UUID, m); err != nil {
		return n.failure(err, "setting up clone %s", v.Name)
	}
	return nil
}

// ExpandVolume grows the FlexVol so that size bytes stay usable beside the
// snapshot reserve, and records the new size, in one PATCH.
func (n *nasDriver) ExpandVolume(ctx context.Context, vol *backends.Volume, size int64) (*backends.Volume, error) {
	if err := n.resizeFlexVol(ctx, vol, size, 1, false); err != nil {
		return nil, err
	}
	out := *vol
	out.SizeBytes = size
	return &out, nil
}

// DeleteVolume deletes the volume's own export policy, then the FlexVol.
// In this order a delete interrupted half way leaves the volume, so the
// retry finds it and finishes, rather than an orphaned policy.
func (n *nasDriver) DeleteVolume(ctx context.Context, vol *backends.Volume) error {
	return n.onGone(ctx, vol, false, n.VolumeAt, func(vol *backends.Volume) error {
		if n.cfg.AutoExportPolicy {
			if err := n.dropOwnPolicy(ctx, n.flexVolTarget(vol)); err != nil {
				return err
			}
		}
		return n.deleteFlexVol(ctx, vol)
	})
}
