package e2e

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
)

// TestFencedNodeWritesNothing is the data plane's half of a non-graceful
// failover on a real kernel: a node's LUN is staged and a writer syncs to
// it; the controller unpublishes the volume from the node while the node
// still runs (ontap-san's fence is this unmap and a read-back of the maps,
// docs/design/fencing.md §3.2). From then on nothing the node writes
// reaches the LUN — LIO stops serving the node, as ONTAP does — though its
// file system stays mounted and the writer goes on. Then the node's
// unpublish and unstage (what a node that comes back runs) clean up
// without writing to the LUN either. The LUN is read on the storage side
// (the simulator's backing file), not through the node.
func TestFencedNodeWritesNothing(t *testing.T) {
	requireRealKernel(t)
	r := newRig(t, rigOptions{iscsi: true})
	p := r.startPlugin(pluginOptions{args: shortDeadPathGrace})
	capability := mountCap("ext4", snw)
	// LUN ID 0 unmapped is LIO's read-only virtual LUN 0, not ONTAP's "not
	// supported" (docs/vm.md): the fenced LUN gets ID 1.
	filler, _ := r.createAndPublish(p, "pvc-fence-filler", 64<<20, capability)
	vol, pc := r.createAndPublish(p, "pvc-fenced", 64<<20, capability)
	if pc["iscsiLunNumber"] == "0" {
		t.Fatalf("the fenced LUN got ID 0")
	}
	lunFile := r.lunFile(pc["iscsiLunSerial"])
	staging := r.makeStaging(vol)
	if _, err := p.Node.NodeStageVolume(ctxT(t), &csi.NodeStageVolumeRequest{
		VolumeId: vol, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc,
	}); err != nil {
		t.Fatalf("NodeStageVolume: %v", err)
	}
	unstage := func(ctx context.Context) error {
		_, err := p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: vol, StagingTargetPath: staging})
		return err
	}
	unstaged := false
	t.Cleanup(func() {
		// A failure before the unstage must not leave a map with queued
		// writes to the next test (the rig logs out, but the map stays).
		if !unstaged {
			retried(t, "NodeUnstageVolume (cleanup)", 5*time.Minute, unstage)
		}
	})
	w := startWriter(t, filepath.Join(staging, "io"))
	w.waitWrites(t, 20)

	bounded(t, "ControllerUnpublishVolume (the fence)", 2*time.Minute, func(ctx context.Context) error {
		_, err := p.Controller.ControllerUnpublishVolume(ctx, &csi.ControllerUnpublishVolumeRequest{VolumeId: vol, NodeId: nodeID})
		return err
	})
	w.mu.Lock()
	synced, issued := w.n, w.issued
	w.mu.Unlock()
	// The node goes on: its writes fail, or queue in dm-multipath for a
	// path that never comes back. Give them time to reach the LUN if they
	// could.
	waitPaths(t, 0, 2, 2*time.Minute)
	// A second writer, begun after the fence, that never syncs: its
	// writes land in the page cache, and nothing may carry them to the
	// LUN — not the kernel's writeback, not the unmount.
	// It runs aside: a write may also block behind the queued I/O.
	var lateN atomic.Int64
	go writeLate(t, filepath.Join(staging, "late"), 64, &lateN)
	time.Sleep(10 * time.Second)
	late := lateN.Load()
	w.mu.Lock()
	after, werr := w.issued-issued, w.err
	w.mu.Unlock()
	t.Logf("fenced after %d writes synced (%d begun); the writer began %d more, error so far: %v; %d unsynced blocks written after the fence", synced, issued, after, werr, late)

	staged := blocksOnLUN(t, lunFile)
	for i := 0; i < synced; i++ {
		if !staged[i] {
			t.Fatalf("block %d, synced before the fence, is not on the LUN (found %d blocks): the scan is wrong", i, len(staged))
		}
	}
	checkNoneFrom(t, staged, issued, "while fenced")

	// What a node that comes back runs: the stale mount and the LUN's
	// session devices go, nothing is written.
	retried(t, "NodeUnstageVolume", 5*time.Minute, unstage)
	unstaged = true
	select {
	case <-w.done:
	case <-time.After(2 * time.Minute):
		t.Fatalf("the writer still hangs after the unstage")
	}
	t.Logf("the writer ended: %v", w.err)
	checkNoneFrom(t, blocksOnLUN(t, lunFile), issued, "after the unstage")
	if n := lateOnLUN(t, lunFile); n > 0 {
		t.Fatalf("%d late blocks (of %d written after the fence, not synced) reached the LUN", n, late)
	}
	t.Logf("none of the %d blocks written after the fence without a sync reached the LUN", late)
	r.assertClean(vol)

	for i := 0; i < 2; i++ {
		if _, err := p.Controller.DeleteVolume(ctxT(t), &csi.DeleteVolumeRequest{VolumeId: vol}); err != nil {
			t.Fatalf("DeleteVolume #%d: %v", i+1, err)
		}
	}
	r.unpublishAndDelete(p, filler)
}

// checkNoneFrom fails if a block the writer began at or after first (after
// the fence) is on the LUN. The one under way at the fence, first-1, may
// have landed before it.
func checkNoneFrom(t *testing.T, onLUN map[int]bool, first int, when string) {
	t.Helper()
	var late []int
	for i := range onLUN {
		if i >= first {
			late = append(late, i)
		}
	}
	sort.Ints(late)
	if len(late) > 0 {
		t.Fatalf("%s: blocks %v, begun after the fence, reached the LUN", when, late)
	}
	t.Logf("%s: %d writer blocks on the LUN, none begun after the fence (the first such is %d)", when, len(onLUN), first)
}

var blockMark = regexp.MustCompile(`block (\d{8}) `)

// blocksOnLUN finds the writer's blocks (block(i): "block %08d " repeated
// over 4 KiB) in the LUN's backing file, wherever they are: a file system
// this small has 1 KiB blocks (mke2fs's "small" type), so a 4 KiB write
// need not be 4 KiB-aligned on the LUN, nor in one piece.
func blocksOnLUN(t *testing.T, file string) map[int]bool {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]bool{}
	for _, m := range blockMark.FindAllSubmatch(data, -1) {
		if i, err := strconv.Atoi(string(m[1])); err == nil {
			out[i] = true
		}
	}
	if len(out) == 0 {
		t.Fatalf("no writer block in %s", file)
	}
	return out
}

// writeLate writes n 4 KiB blocks "late %08d " to path without a sync,
// counting in done those the kernel took (a file system that has seen its
// device fail may refuse some, or block).
func writeLate(t *testing.T, path string, n int, done *atomic.Int64) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	for i := 0; i < n; i++ {
		b := bytes.Repeat([]byte(fmt.Sprintf("late %08d ", i)), 4096/14+1)[:4096]
		if _, err := f.WriteAt(b, int64(i)*4096); err != nil {
			return
		}
		done.Add(1)
	}
}

var lateMark = regexp.MustCompile(`late \d{8} `)

// lateOnLUN counts the late writer's markers in the LUN's backing file.
func lateOnLUN(t *testing.T, file string) int {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return len(lateMark.FindAllIndex(data, -1))
}
