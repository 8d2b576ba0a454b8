package e2e

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// What the shims cannot show, on a real kernel only (the VM of test/vm):
// a path lost and restored under I/O, a LUN unmapped on ONTAP while
// staged, an NFS server that stops answering, a multipath map that comes
// late or never.

func requireRealKernel(t testing.TB) {
	t.Helper()
	if !plugintest.RealKernel() {
		t.Skip("needs a real kernel: make vm runs it in the VM of test/vm")
	}
}

// TestPathLostAndRestoredDuringIO takes one iSCSI LIF down while a writer
// syncs to the staged file system, as a LIF failing over or a switch port
// going down does: the writes go on over the other path, multipathd fails
// the lost path, and when the LIF is back the session reconnects and the
// map has both paths again. Every write is read back; nothing is left.
func TestPathLostAndRestoredDuringIO(t *testing.T) {
	requireRealKernel(t)
	r := newRig(t, rigOptions{iscsi: true})
	p := r.startPlugin(pluginOptions{})
	capability := mountCap("ext4", snw)
	vol, pc := r.createAndPublish(p, "pvc-path-loss", 64<<20, capability)
	staging := r.makeStaging(vol)
	stage := &csi.NodeStageVolumeRequest{VolumeId: vol, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc}
	if _, err := p.Node.NodeStageVolume(ctxT(t), stage); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	waitPaths(t, 2, 0, time.Minute)

	w := startWriter(t, filepath.Join(staging, "io"))
	w.waitWrites(t, 5)
	lost := r.iscsi.portals[1]
	if err := r.sim.SetLIFUp(lost, false); err != nil {
		t.Fatal(err)
	}
	waitPaths(t, 1, 1, 2*time.Minute)
	w.waitWrites(t, 10) // over the path that is left
	if err := r.sim.SetLIFUp(lost, true); err != nil {
		t.Fatal(err)
	}
	waitPaths(t, 2, 0, 3*time.Minute)
	w.waitWrites(t, 5)
	w.stopAndCheck(t)

	if _, err := p.Node.NodeUnstageVolume(ctxT(t), &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging}); err != nil {
		t.Fatalf("NodeUnstageVolume: %v", err)
	}
	r.assertClean(vol)
	r.unpublishAndDelete(p, vol)
}

// shortDeadPathGrace shortens the wait of an unstage whose LUN has no
// path left: these tests are about what the unstage does once it ends,
// and the default 30 s would be most of their time. The grace's timing
// is node/iscsi's tests' (deadmap_test.go).
var shortDeadPathGrace = []string{"--iscsi-dead-path-grace=5s"}

// TestLUNUnmappedWhileStaged unmaps a staged and published LUN on ONTAP,
// as an administrator or another cluster's controller may: every path
// fails (the LUN is not supported there any more) and dm-multipath queues
// I/O for a path that never comes back. Unpublish and unstage must still
// complete within a bound, and leave no mount, map, disk or session.
func TestLUNUnmappedWhileStaged(t *testing.T) {
	requireRealKernel(t)
	r := newRig(t, rigOptions{iscsi: true})
	p := r.startPlugin(pluginOptions{args: shortDeadPathGrace})
	// LUN ID 0 unmapped is LIO's read-only virtual LUN 0 (docs/vm.md), not
	// ONTAP's "not supported": the LUN under test gets ID 1.
	r.makeISCSIVolume("pvc-filler", 64<<20, "ext4")
	vol := r.makeISCSIVolume("pvc-unmapped", 64<<20, "ext4")
	if vol.lunID == 0 {
		t.Fatalf("the LUN under test got ID 0")
	}
	capability := mountCap("ext4", snw)
	staging, target := r.makeStaging(vol.id), r.makeTargetParent("pod-a", vol.id)
	if _, err := p.Node.NodeStageVolume(ctxT(t), &csi.NodeStageVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: vol.context,
	}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	if _, err := p.Node.NodePublishVolume(ctxT(t), &csi.NodePublishVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: vol.context,
	}); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	if err := os.WriteFile(filepath.Join(target, "data"), []byte("before the unmap"), 0o644); err != nil {
		t.Fatal(err)
	}
	r.unmapLUN(vol.lun.Path, r.iscsi.igroup)
	waitPaths(t, 0, 2, 2*time.Minute)

	bounded(t, "NodeUnpublishVolume", 2*time.Minute, func(ctx context.Context) error {
		_, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.id, TargetPath: target})
		return err
	})
	// Retried as kubelet retries: multipathd, busy failing and reinstating
	// the unmapped LUN's paths, once did not answer for minutes, and the
	// unstage then fails saying so instead of hanging (docs/vm.md).
	retried(t, "NodeUnstageVolume", 5*time.Minute, func(ctx context.Context) error {
		_, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging})
		return err
	})
	r.assertClean(vol.id)
}

// TestGhostMapIsRemoved leaves a staged LUN's multipath map without its
// paths — multipathd drops both, as when they failed for good (Trident
// #812) — while the file system on it stays mounted: the paths are no
// longer under the map, so Detach must find the map otherwise (by the
// WWID of the LUN's paths; LIO's WWID form is not ONTAP's). Unstage
// removes map, paths and sessions.
func TestGhostMapIsRemoved(t *testing.T) {
	requireRealKernel(t)
	r := newRig(t, rigOptions{iscsi: true})
	p := r.startPlugin(pluginOptions{})
	vol := r.makeISCSIVolume("pvc-ghost", 64<<20, "ext4")
	staging := r.makeStaging(vol.id)
	if _, err := p.Node.NodeStageVolume(ctxT(t), &csi.NodeStageVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: mountCap("ext4", snw), PublishContext: vol.context,
	}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	maps, _ := filepath.Glob("/sys/block/dm-*/slaves/*")
	if len(maps) != 2 {
		t.Fatalf("map paths %v, want two", maps)
	}
	for _, slave := range maps {
		if out, err := exec.Command("multipathd", "del", "path", filepath.Base(slave)).CombinedOutput(); err != nil {
			t.Fatalf("multipathd del path: %v\n%s", err, out)
		}
	}
	if left, _ := filepath.Glob("/sys/block/dm-*/slaves/*"); len(left) != 0 {
		t.Fatalf("the map still has paths %v", left)
	}
	bounded(t, "NodeUnstageVolume", 2*time.Minute, func(ctx context.Context) error {
		_, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging})
		return err
	})
	r.assertClean(vol.id)
}

// unmapLUN removes a LUN map on ONTAP.
func (r *rig) unmapLUN(lunPath, igroup string) {
	r.t.Helper()
	var lunUUID, igroupUUID string
	for _, l := range r.sim.LUNs() {
		if l.Path == lunPath {
			lunUUID = l.UUID
		}
	}
	for _, g := range r.sim.IGroups() {
		if g.Name == igroup {
			igroupUUID = g.UUID
		}
	}
	if code, out, err := r.sim.Do("DELETE", "/api/protocols/san/lun-maps/"+lunUUID+"/"+igroupUUID, nil); err != nil || code != 200 {
		r.t.Fatalf("unmap %s from %s: %d %v %v", lunPath, igroup, code, out, err)
	}
}

// bounded runs a CSI call that must succeed within limit.
func bounded(t *testing.T, what string, limit time.Duration, call func(context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	start := time.Now()
	if err := call(ctx); err != nil {
		t.Fatalf("%s after %s: %v", what, time.Since(start).Round(time.Second), err)
	}
	t.Logf("%s returned after %s", what, time.Since(start).Round(100*time.Millisecond))
}

// retried makes call as kubelet does until it succeeds: each attempt
// with its own deadline (2 minutes, kubelet's), a failed one again after a
// pause; it fails the test when limit has passed.
func retried(t *testing.T, what string, limit time.Duration, call func(context.Context) error) {
	t.Helper()
	start := time.Now()
	for attempt := 1; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), min(2*time.Minute, time.Until(start.Add(limit))))
		err := call(ctx)
		cancel()
		if err == nil {
			t.Logf("%s returned after %s (attempt %d)", what, time.Since(start).Round(100*time.Millisecond), attempt)
			return
		}
		if time.Since(start) >= limit-2*time.Second {
			t.Fatalf("%s still failing after %s (%d attempts): %v", what, time.Since(start).Round(time.Second), attempt, err)
		}
		t.Logf("%s attempt %d failed after %s: %v", what, attempt, time.Since(start).Round(time.Second), err)
		time.Sleep(2 * time.Second)
	}
}

// waitPaths waits until multipathd reports active and failed paths in
// these numbers (the tests have one LUN attached at a time).
func waitPaths(t testing.TB, active, failed int, limit time.Duration) {
	t.Helper()
	var last string
	for deadline := time.Now().Add(limit); ; time.Sleep(500 * time.Millisecond) {
		out, err := exec.Command("multipathd", "show", "paths", "raw", "format", "%d %t %T").CombinedOutput()
		last = string(out)
		a, f := 0, 0
		for _, line := range strings.Split(strings.TrimSpace(last), "\n") {
			switch fs := strings.Fields(line); {
			case len(fs) < 2:
			case fs[1] == "active":
				a++
			case fs[1] == "failed":
				f++
			}
		}
		if err == nil && a == active && f == failed {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("multipathd paths after %s: want %d active and %d failed, have:\n%s", limit, active, failed, last)
		}
	}
}

// writer syncs numbered 4 KiB blocks to a file until stopped.
type writer struct {
	path string
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	n    int // writes synced
	// issued: writes begun (a write may be under way, or hang, beyond n).
	issued int
	err    error
}

func startWriter(t testing.TB, path string) *writer {
	w := &writer{path: path, stop: make(chan struct{}), done: make(chan struct{})}
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		defer close(w.done)
		defer f.Close()
		for i := 0; ; i++ {
			select {
			case <-w.stop:
				return
			default:
			}
			w.mu.Lock()
			w.issued = i + 1
			w.mu.Unlock()
			_, err := f.WriteAt(block(i), int64(i)*4096)
			if err == nil {
				err = f.Sync()
			}
			w.mu.Lock()
			if err != nil {
				w.err = fmt.Errorf("write %d: %w", i, err)
			} else {
				w.n = i + 1
			}
			w.mu.Unlock()
			if err != nil {
				return
			}
		}
	}()
	t.Cleanup(func() {
		select {
		case <-w.stop:
		default:
			close(w.stop)
		}
	})
	return w
}

func block(i int) []byte {
	return bytes.Repeat([]byte(fmt.Sprintf("block %08d ", i)), 4096/15+1)[:4096]
}

// waitWrites waits until n more writes have been synced.
func (w *writer) waitWrites(t testing.TB, n int) {
	t.Helper()
	w.mu.Lock()
	want := w.n + n
	w.mu.Unlock()
	for deadline := time.Now().Add(3 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		w.mu.Lock()
		got, err := w.n, w.err
		w.mu.Unlock()
		switch {
		case err != nil:
			t.Fatalf("writer: %v", err)
		case got >= want:
			return
		case time.Now().After(deadline):
			t.Fatalf("writer: %d writes synced, waiting for %d", got, want)
		}
	}
}

// stopAndCheck stops the writer and reads every block back.
func (w *writer) stopAndCheck(t testing.TB) {
	t.Helper()
	close(w.stop)
	<-w.done
	if w.err != nil {
		t.Fatalf("writer: %v", w.err)
	}
	data, err := os.ReadFile(w.path)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i < w.n; i++ {
		if !bytes.Equal(data[i*4096:(i+1)*4096], block(i)) {
			t.Fatalf("block %d of %d reads back wrong", i, w.n)
		}
	}
	t.Logf("%d blocks written and synced through the path loss, all read back", w.n)
}

// TestNFSServerStoppedWhileMounted stops nfsd under a published NFS
// volume, as a LIF or node of the SVM going away for good does: stats
// report an abnormal condition, and unpublish and unstage return within a
// bound — done, or failed with an error that says what is wrong. Once the
// server is back, they complete and nothing is left.
func TestNFSServerStoppedWhileMounted(t *testing.T) {
	requireRealKernel(t)
	r := newRig(t, rigOptions{})
	p := r.startPlugin(pluginOptions{})
	vol := r.makeNFSVolume("pvc-nfs-server-gone", nfsClientIP)
	capability := mountCap("nfs", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
	staging, target := r.makeStaging(vol.id), r.makeTargetParent("pod-a", vol.id)
	if _, err := p.Node.NodeStageVolume(ctxT(t), &csi.NodeStageVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: vol.context,
	}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	publish := &csi.NodePublishVolumeRequest{
		VolumeId: vol.id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: vol.context,
	}
	if _, err := p.Node.NodePublishVolume(ctxT(t), publish); err != nil {
		t.Fatalf("NodePublishVolume: %v", err)
	}
	// A file held open in the volume keeps the mount busy, as a process
	// stuck in I/O on the dead server, or the plugin's own stat left
	// blocked by a stats call, does: umount -f then fails with EBUSY and
	// only a lazy unmount removes it (docs/design/architecture.md §7.7).
	held, err := os.OpenFile(filepath.Join(target, "held-open"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer held.Close()
	stopNFSServer(t)

	const limit = 90 * time.Second
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	stats, err := p.Node.NodeGetVolumeStats(ctx, &csi.NodeGetVolumeStatsRequest{VolumeId: vol.id, VolumePath: target})
	cancel()
	if err != nil || !stats.GetVolumeCondition().GetAbnormal() {
		t.Fatalf("NodeGetVolumeStats with the server gone: %v, %v; want an abnormal condition", stats, err)
	}
	t.Logf("stats: %s", stats.GetVolumeCondition().GetMessage())
	unpublish := func(ctx context.Context) error {
		_, err := p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: vol.id, TargetPath: target})
		return err
	}
	unstage := func(ctx context.Context) error {
		_, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging})
		return err
	}
	for _, call := range []struct {
		what string
		do   func(context.Context) error
	}{{"NodeUnpublishVolume", unpublish}, {"NodeUnstageVolume", unstage}} {
		ctx, cancel := context.WithTimeout(context.Background(), limit)
		start := time.Now()
		err := call.do(ctx)
		cancel()
		switch {
		case errors.Is(ctx.Err(), context.DeadlineExceeded) && err != nil:
			t.Fatalf("%s with the server gone did not return within %s: %v", call.what, limit, err)
		case err != nil:
			t.Logf("%s with the server gone, after %s: %v", call.what, time.Since(start).Round(time.Second), err)
		default:
			t.Logf("%s with the server gone: done after %s", call.what, time.Since(start).Round(time.Second))
		}
	}
	startNFSServer(t)
	held.Close() // a close talks to the server: not before it is back
	bounded(t, "NodeUnpublishVolume with the server back", 2*time.Minute, unpublish)
	bounded(t, "NodeUnstageVolume with the server back", 2*time.Minute, unstage)
	r.assertClean(vol.id)
}

// stopNFSServer stops nfsd (all threads): the server stops answering, as a
// LIF that is gone does. The test ends with it running again.
func stopNFSServer(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("rpc.nfsd", "0").CombinedOutput(); err != nil {
		t.Fatalf("rpc.nfsd 0: %v\n%s", err, out)
	}
	t.Cleanup(func() { startNFSServer(t) })
}

func startNFSServer(t testing.TB) {
	t.Helper()
	if out, err := exec.Command("rpc.nfsd", "4").CombinedOutput(); err != nil {
		t.Fatalf("rpc.nfsd 4: %v\n%s", err, out)
	}
}

// TestMultipathMapLateOrNever stages while multipathd ignores the LUN
// (its WWIDs blacklisted, as a node whose multipath.conf does not cover
// ONTAP): when the blacklist goes a few seconds into the stage, the map
// appears late and the stage uses it; when it stays, the stage fails with
// "no map" after the device timeout and leaves nothing behind.
func TestMultipathMapLateOrNever(t *testing.T) {
	requireRealKernel(t)
	r := newRig(t, rigOptions{iscsi: true})
	p := r.startPlugin(pluginOptions{args: []string{"--iscsi-device-timeout=20s"}})
	capability := mountCap("ext4", snw)
	t.Run("late", func(t *testing.T) {
		r := r.in(t)
		vol := r.makeISCSIVolume("pvc-map-late", 64<<20, "ext4")
		blacklistMultipath(t, true)
		// multipathd builds the map up to 6 s after the blacklist goes
		// when the host is busy (measured in make test): well within the
		// 20 s the stage waits.
		time.AfterFunc(4*time.Second, func() { blacklistMultipath(t, false) })
		staging := r.makeStaging(vol.id)
		bounded(t, "NodeStageVolume", 2*time.Minute, func(ctx context.Context) error {
			_, err := p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: vol.context})
			return err
		})
		r.iscsi.attachedOnce(t, vol.lun.Serial, len(r.iscsi.portals))
		r.unstage(p, vol.id, staging)
	})
	t.Run("never", func(t *testing.T) {
		r := r.in(t)
		vol := r.makeISCSIVolume("pvc-map-never", 64<<20, "ext4")
		blacklistMultipath(t, true)
		staging := r.makeStaging(vol.id)
		_, err := p.Node.NodeStageVolume(ctxT(t), &csi.NodeStageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: vol.context})
		if err == nil || !strings.Contains(err.Error(), "no map") {
			t.Fatalf("NodeStageVolume without a map: %v, want the no-map error", err)
		}
		t.Logf("NodeStageVolume: %v", err)
		blacklistMultipath(t, false)
		r.unstage(p, vol.id, staging)
	})
}

// TestISCSIPathGrace stages a LUN that one portal does not show: on a
// four-node cluster with a LIF on each of the first three nodes, ONTAP
// reports the LUN on its node and that node's HA partner only (selective
// LUN map), so the third LIF's session gets no path. The stage goes on
// with the two paths there are once the path grace has passed.
func TestISCSIPathGrace(t *testing.T) {
	requireRealKernel(t)
	r := newRig(t, rigOptions{iscsi: true, sim: ontapsim.Config{Nodes: 4, ISCSILIFs: []string{"127.0.0.11", "127.0.0.12", "127.0.0.13"}}})
	p := r.startPlugin(pluginOptions{})
	vol := r.makeISCSIVolume("pvc-two-of-three", 64<<20, "ext4")
	if vol.context["iscsiTargetPortalCount"] != "3" {
		t.Fatalf("publish context %v: want three portals", vol.context)
	}
	staging := r.makeStaging(vol.id)
	bounded(t, "NodeStageVolume", 2*time.Minute, func(ctx context.Context) error {
		_, err := p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{VolumeId: vol.id, StagingTargetPath: staging, VolumeCapability: mountCap("ext4", snw), PublishContext: vol.context})
		return err
	})
	r.iscsi.attachedOnce(t, vol.lun.Serial, 2)
	waitPaths(t, 2, 0, time.Minute)
	r.unstage(p, vol.id, staging)
}

func (r *rig) unstage(p *plugintest.Plugin, vol, staging string) {
	r.t.Helper()
	if _, err := p.Node.NodeUnstageVolume(ctxT(r.t), &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging}); err != nil {
		r.t.Fatalf("NodeUnstageVolume: %v", err)
	}
	r.assertClean(vol)
}

// blacklistMultipath makes multipathd ignore every device (or not) and
// reconfigure.
func blacklistMultipath(t testing.TB, on bool) {
	const conf = "/etc/multipath/conf.d/ontap-csi-test-blacklist.conf"
	var err error
	if on {
		if err = os.MkdirAll(filepath.Dir(conf), 0o755); err == nil {
			err = os.WriteFile(conf, []byte("blacklist {\n\twwid \".*\"\n}\n"), 0o644)
		}
		t.Cleanup(func() { blacklistMultipath(t, false) })
	} else if err = os.Remove(conf); errors.Is(err, os.ErrNotExist) {
		return
	}
	if err != nil {
		t.Error(err)
		return
	}
	if out, err := exec.Command("multipathd", "reconfigure").CombinedOutput(); err != nil {
		t.Errorf("multipathd reconfigure: %v\n%s", err, out)
	}
}
