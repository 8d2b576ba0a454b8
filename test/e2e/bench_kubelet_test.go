package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// The node benchmark's plugin arm drives the node plugin as kubelet does
// (pkg/volume/csi): every CSI call on a connection of its own (kubelet's
// csiDriverClient dials the socket per call and closes it after), and
// NodeGetCapabilities before NodeStageVolume (MountDevice asks whether the
// driver stages), before NodePublishVolume (SetUpAt asks again, for the
// staging path) and before NodeUnstageVolume (UnmountDevice). On a node
// that also runs pods with other volumes, secrets and projected tokens:
// benchBusyMounts.

// kubelet calls one node plugin the way kubelet does.
type kubelet struct {
	endpoint string
	plugin   *plugintest.Plugin // for its log
}

// call runs f with a Node client on a connection of its own.
func (k kubelet) call(t testing.TB, f func(csi.NodeClient) error) error {
	conn, err := grpc.NewClient(k.endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	return f(csi.NewNodeClient(conn))
}

// capabilities is NodeGetCapabilities on a connection of its own; kubelet
// stages only when the driver says it does.
func (k kubelet) capabilities(t testing.TB) bool {
	var stages bool
	err := k.call(t, func(c csi.NodeClient) error {
		resp, err := c.NodeGetCapabilities(ctxT(t), &csi.NodeGetCapabilitiesRequest{})
		for _, cap := range resp.GetCapabilities() {
			stages = stages || cap.GetRpc().GetType() == csi.NodeServiceCapability_RPC_STAGE_UNSTAGE_VOLUME
		}
		return err
	})
	if err != nil || !stages {
		t.Errorf("NodeGetCapabilities: STAGE_UNSTAGE_VOLUME %v, %v", stages, err)
		return false
	}
	return true
}

// up stages and publishes a volume for pod podUID.
func (k kubelet) up(t testing.TB, r *rig, podUID, id string, pc map[string]string, fsType string) {
	staging := r.makeStaging(id)
	target := r.makeTargetParent(podUID, id)
	capability := mountCap(fsType, snw)
	if !k.capabilities(t) {
		return
	}
	// Retried as kubelet retries a MountDevice that failed: a pod of 50
	// LUNs on the real kernel keeps udev minutes behind, and the stages
	// queued behind the attach slots then pass kubelet's 3-minute deadline
	// (docs/benchmarks.md); the pod starts after the retries.
	if err := withBackoff(t, "stage "+id, func() error {
		return k.call(t, func(c csi.NodeClient) error {
			_, err := c.NodeStageVolume(ctxT(t), &csi.NodeStageVolumeRequest{
				VolumeId: id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc,
			})
			return err
		})
	}); err != nil {
		t.Errorf("stage %s: %v", id, err)
		return
	}
	if !k.capabilities(t) {
		return
	}
	if err := k.call(t, func(c csi.NodeClient) error {
		_, err := c.NodePublishVolume(ctxT(t), &csi.NodePublishVolumeRequest{
			VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: pc,
		})
		return err
	}); err != nil {
		t.Errorf("publish %s: %v", id, err)
	}
}

// down unpublishes and unstages a volume of pod podUID.
func (k kubelet) down(t testing.TB, r *rig, podUID, id string) {
	if err := k.call(t, func(c csi.NodeClient) error {
		_, err := c.NodeUnpublishVolume(ctxT(t), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: r.targetPath(podUID, id)})
		return err
	}); err != nil {
		t.Errorf("unpublish %s: %v", id, err)
		return
	}
	if !k.capabilities(t) {
		return
	}
	if err := withBackoff(t, "unstage "+id, func() error {
		return k.call(t, func(c csi.NodeClient) error {
			_, err := c.NodeUnstageVolume(ctxT(t), &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: r.stagingPath(id)})
			return err
		})
	}); err != nil {
		t.Errorf("unstage %s: %v", id, err)
	}
}

// withBackoff retries f as kubelet retries a failed operation (from
// 500 ms, doubling), for up to 2 minutes after the first failure (which
// may itself have taken a whole call deadline), and logs every retry. On
// this shared machine another job's new mount namespace may copy a
// staging mount and hold its device for a while after our umount (seen
// once: 20 maps "still open" at the same instant, for the plugin); both
// arms then wait it out the same way.
func withBackoff(t testing.TB, what string, f func() error) error {
	wait := 500 * time.Millisecond
	var deadline time.Time
	for ; ; wait *= 2 {
		err := f()
		if err == nil {
			return nil
		}
		if deadline.IsZero() {
			deadline = time.Now().Add(2 * time.Minute)
		}
		if time.Now().Add(wait).After(deadline) {
			return err
		}
		t.Logf("retry: %s in %s: %v", what, wait, err)
		time.Sleep(wait)
	}
}

// benchBusyMountCount is how many unrelated mounts the benchmark's node
// carries: a node running ~30 pods, each with its service account token,
// secrets and config maps mounted (issue 18).
const benchBusyMountCount = 500

// benchBusyMounts mounts n small tmpfs file systems below the rig's root
// (outside the kubelet dir, where the tests look for leftovers), in this
// process's mount namespace, which the plugin and the tools share. They
// are unmounted when the test ends, failed or not.
func benchBusyMounts(t testing.TB, r *rig, n int) {
	t.Helper()
	dir := filepath.Join(r.Root, "busy")
	t.Cleanup(func() { plugintest.UnmountBelow(t, dir) })
	for i := range n {
		mp := filepath.Join(dir, fmt.Sprintf("%03d", i))
		if err := os.MkdirAll(mp, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mount("tmpfs", mp, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "size=64k"); err != nil {
			t.Fatalf("mount tmpfs on %s: %v", mp, err)
		}
	}
}
