package guest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
)

// volumeLife is one volume going through the calls kubelet and the
// sidecars make, one step per method.
type volumeLife struct {
	t          testing.TB
	p          *plugin
	ctx        context.Context
	capability *csi.VolumeCapability
	vol        *csi.Volume
	pc         map[string]string // publish context
	staging    string
	target     string // published read-write
	roTarget   string // published read-only
}

// createAndPublish is CreateVolume and ControllerPublishVolume to the node.
func (p *plugin) createAndPublish(t testing.TB, name, backendType string, size int64, capability *csi.VolumeCapability) *volumeLife {
	t.Helper()
	l := &volumeLife{t: t, p: p, ctx: ctxT(t), capability: capability}
	created, err := p.CreateVolume(l.ctx, &csi.CreateVolumeRequest{
		Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: size},
		VolumeCapabilities: []*csi.VolumeCapability{capability}, Parameters: map[string]string{"backendType": backendType},
	})
	if err != nil {
		t.Fatalf("CreateVolume: %v", err)
	}
	l.vol = created.GetVolume()
	pub, err := p.ControllerPublishVolume(l.ctx, &csi.ControllerPublishVolumeRequest{
		VolumeId: l.vol.GetVolumeId(), NodeId: nodeID, VolumeCapability: capability, VolumeContext: l.vol.GetVolumeContext(),
	})
	if err != nil {
		t.Fatalf("ControllerPublishVolume: %v", err)
	}
	l.pc = pub.GetPublishContext()
	return l
}

func (l *volumeLife) id() string { return l.vol.GetVolumeId() }

// stageAndPublish is NodeStageVolume, then NodePublishVolume read-write
// and read-only for two pods.
func (l *volumeLife) stageAndPublish() {
	l.t.Helper()
	l.staging = l.p.staging(l.t, l.id())
	if _, err := l.p.NodeStageVolume(l.ctx, &csi.NodeStageVolumeRequest{
		VolumeId: l.id(), StagingTargetPath: l.staging, VolumeCapability: l.capability, PublishContext: l.pc, VolumeContext: l.vol.GetVolumeContext(),
	}); err != nil {
		l.t.Fatalf("NodeStageVolume: %v", err)
	}
	l.target, l.roTarget = l.p.target(l.t, "pod-a", l.id()), l.p.target(l.t, "pod-b", l.id())
	for _, tp := range []string{l.target, l.roTarget} {
		if _, err := l.p.NodePublishVolume(l.ctx, &csi.NodePublishVolumeRequest{
			VolumeId: l.id(), StagingTargetPath: l.staging, TargetPath: tp, VolumeCapability: l.capability,
			PublishContext: l.pc, Readonly: tp == l.roTarget,
		}); err != nil {
			l.t.Fatalf("NodePublishVolume %s: %v", tp, err)
		}
	}
}

// writeAndReadBack writes a file through the read-write publish, reads it
// through the read-only one, where writing fails with EROFS.
func (l *volumeLife) writeAndReadBack(name string, data []byte) {
	l.t.Helper()
	if err := os.WriteFile(filepath.Join(l.target, name), data, 0o644); err != nil {
		l.t.Fatal(err)
	}
	if got, err := os.ReadFile(filepath.Join(l.roTarget, name)); err != nil || !bytes.Equal(got, data) {
		l.t.Fatalf("read back through the read-only publish: %d bytes, %v", len(got), err)
	}
	if err := os.WriteFile(filepath.Join(l.roTarget, "nope"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		l.t.Fatalf("write through the read-only publish: %v, want EROFS", err)
	}
}

// expand is ControllerExpandVolume and, when the controller asks for it,
// NodeExpandVolume, then NodeGetVolumeStats.
func (l *volumeLife) expand(size int64) {
	l.t.Helper()
	exp, err := l.p.ControllerExpandVolume(l.ctx, &csi.ControllerExpandVolumeRequest{
		VolumeId: l.id(), CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: l.capability,
	})
	if err != nil {
		l.t.Fatalf("ControllerExpandVolume: %v", err)
	}
	if exp.GetNodeExpansionRequired() {
		if _, err := l.p.NodeExpandVolume(l.ctx, &csi.NodeExpandVolumeRequest{
			VolumeId: l.id(), VolumePath: l.target, CapacityRange: &csi.CapacityRange{RequiredBytes: size}, VolumeCapability: l.capability,
		}); err != nil {
			l.t.Fatalf("NodeExpandVolume: %v", err)
		}
	}
	stats, err := l.p.NodeGetVolumeStats(l.ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: l.id(), VolumePath: l.target})
	if err != nil || len(stats.GetUsage()) == 0 || stats.GetVolumeCondition().GetAbnormal() {
		l.t.Fatalf("NodeGetVolumeStats: %v, %v", stats, err)
	}
}

// unpublishAndUnstage is NodeUnpublishVolume of both pods and
// NodeUnstageVolume.
func (l *volumeLife) unpublishAndUnstage() {
	l.t.Helper()
	for _, tp := range []string{l.target, l.roTarget} {
		if _, err := l.p.NodeUnpublishVolume(l.ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: l.id(), TargetPath: tp}); err != nil {
			l.t.Fatalf("NodeUnpublishVolume %s: %v", tp, err)
		}
	}
	if _, err := l.p.NodeUnstageVolume(l.ctx, &csi.NodeUnstageVolumeRequest{VolumeId: l.id(), StagingTargetPath: l.staging}); err != nil {
		l.t.Fatalf("NodeUnstageVolume: %v", err)
	}
}

func (l *volumeLife) controllerUnpublish() {
	l.t.Helper()
	if _, err := l.p.ControllerUnpublishVolume(l.ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: l.id(), NodeId: nodeID}); err != nil {
		l.t.Fatalf("ControllerUnpublishVolume: %v", err)
	}
}

func (l *volumeLife) delete() {
	l.t.Helper()
	if _, err := l.p.DeleteVolume(l.ctx, &csi.DeleteVolumeRequest{VolumeId: l.id()}); err != nil {
		l.t.Fatalf("DeleteVolume: %v", err)
	}
}
