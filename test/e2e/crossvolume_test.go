package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// The cross-volume cells of docs/errors.md: a call for volume A with the
// paths of another volume B, as a confused caller would make it. Every
// combination of NFS, iSCSI with a file system and iSCSI raw block, for A
// staged and published on paths of its own and for A not staged at all,
// on B staged and published. Each refusal leaves the node as it was: files,
// mounts, tracking files, iSCSI sessions, multipath maps and devices.

// xvol is a volume of the cross-volume tests with the paths kubelet gave it.
type xvol struct {
	id, kind string // kind: nfs, fs (iSCSI with ext4) or raw (iSCSI raw block)
	cap      *csi.VolumeCapability
	context  map[string]string
	staging  string
	target   string
}

func (r *rig) makeXVol(kind, id string) *xvol {
	r.t.Helper()
	v := &xvol{id: id, kind: kind, staging: r.stagingPath(id)}
	switch kind {
	case "nfs":
		v.context = r.makeNFSVolume(id, nfsClientIP).context
		v.cap = mountCap("", csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)
		v.target = r.targetPath("pod-"+id, id)
	case "fs":
		v.context = r.makeISCSIVolume(id, 32<<20, "ext4").context
		v.cap = mountCap("ext4", snw)
		v.target = r.targetPath("pod-"+id, id)
	case "raw":
		v.context = r.makeISCSIVolume(id, 32<<20, "").context
		v.cap = blockCap(snw)
		v.target = filepath.Join(r.KubeletDir, "plugins/kubernetes.io/csi/volumeDevices/publish", id, "pod-"+id)
	}
	if err := os.MkdirAll(v.staging, 0o750); err != nil {
		r.t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(v.target), 0o750); err != nil {
		r.t.Fatal(err)
	}
	return v
}

// xcalls drives one plugin with the requests of xvols. Each call gets its
// own deadline, as each of kubelet's does: the test makes some two hundred
// calls, and one deadline for all of them ran out under CI's load before
// the last unstage (185 s).
type xcalls struct {
	p *plugintest.Plugin
}

func (c xcalls) ctx() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), 2*time.Minute)
}

func (c xcalls) stage(v *xvol, staging string) error {
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.p.Node.NodeStageVolume(ctx, &csi.NodeStageVolumeRequest{
		VolumeId: v.id, StagingTargetPath: staging, VolumeCapability: v.cap, PublishContext: v.context,
	})
	return err
}

func (c xcalls) publish(v *xvol, staging, target string) error {
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.p.Node.NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{
		VolumeId: v.id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: v.cap, PublishContext: v.context,
	})
	return err
}

func (c xcalls) unpublish(v *xvol, target string) error {
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.p.Node.NodeUnpublishVolume(ctx, &csi.NodeUnpublishVolumeRequest{VolumeId: v.id, TargetPath: target})
	return err
}

func (c xcalls) unstage(v *xvol, staging string) error {
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.p.Node.NodeUnstageVolume(ctx, &csi.NodeUnstageVolumeRequest{VolumeId: v.id, StagingTargetPath: staging})
	return err
}

func (c xcalls) expand(v *xvol, path string) error {
	ctx, cancel := c.ctx()
	defer cancel()
	_, err := c.p.Node.NodeExpandVolume(ctx, &csi.NodeExpandVolumeRequest{
		VolumeId: v.id, VolumePath: path, CapacityRange: &csi.CapacityRange{RequiredBytes: 64 << 20},
	})
	return err
}

// world is what a refused call must leave as it was: every file and mount
// below the rig's root (snapshot) and the iSCSI shims' sessions, maps and
// devices.
func (r *rig) world(t *testing.T) []string {
	t.Helper()
	out := snapshot(t, r.Root)
	if r.iscsi.host.Shim == nil {
		// A real kernel: its block devices stand for sessions and maps.
		blocks, err := os.ReadDir("/sys/block")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range blocks {
			out = append(out, "block device "+b.Name())
		}
		slices.Sort(out)
		return out
	}
	st := r.iscsi.host.Shim.State(t)
	for _, s := range st.Sessions {
		for _, d := range s.Devices {
			out = append(out, fmt.Sprintf("iscsi session %d %s %s device %s serial %s", s.SID, s.Portal, s.Target, d.Loop, d.Serial))
		}
	}
	for _, m := range st.Maps {
		out = append(out, fmt.Sprintf("multipath map %s %s serial %s", m.WWID, m.Loop, m.Serial))
	}
	slices.Sort(out)
	return out
}

// xcell is one cell: a call and the code it must get.
type xcell struct {
	name string
	call func() error
	code codes.Code
}

// runCells makes each call, checks its code, and that a refusal (or an OK
// that has nothing to do) left the node as it was.
func (r *rig) runCells(t *testing.T, cells []xcell) {
	t.Helper()
	for _, cell := range cells {
		before := r.world(t)
		err := cell.call()
		if got := status.Code(err); got != cell.code {
			t.Errorf("%s: code %v (%v), want %v", cell.name, got, err, cell.code)
		}
		if after := r.world(t); !slices.Equal(before, after) {
			t.Fatalf("%s changed the node:\n%s", cell.name, diff(before, after))
		}
	}
}

// crossCells are the calls for volume a on b's paths. A volume that is not
// staged (staged false) gets the same refusals, for its own reasons.
func crossCells(c xcalls, a, b *xvol) []xcell {
	elsewhere := a.target + "-new"
	return []xcell{
		{"NodeUnpublishVolume(A, B's target)", func() error { return c.unpublish(a, b.target) }, codes.FailedPrecondition},
		{"NodeUnstageVolume(A, B's staging path)", func() error { return c.unstage(a, b.staging) }, codes.OK},
		{"NodeStageVolume(A, B's staging path)", func() error { return c.stage(a, b.staging) }, codes.FailedPrecondition},
		{"NodePublishVolume(A, B's target)", func() error { return c.publish(a, a.staging, b.target) }, codes.FailedPrecondition},
		{"NodePublishVolume(A from B's staging path)", func() error { return c.publish(a, b.staging, elsewhere) }, codes.FailedPrecondition},
		{"NodeExpandVolume(A at B's target)", func() error { return c.expand(a, b.target) }, codes.NotFound},
	}
}

func TestCrossVolumeCallsChangeNothing(t *testing.T) {
	r := newRig(t, rigOptions{iscsi: true})
	p := r.startPlugin(pluginOptions{role: "node"})
	c := xcalls{p: p}
	var staged, unstaged []*xvol
	for _, kind := range []string{"nfs", "fs", "raw"} {
		for _, n := range []string{"a", "b"} {
			v := r.makeXVol(kind, "pvc-"+kind+"-"+n)
			if err := c.stage(v, v.staging); err != nil {
				t.Fatalf("stage %s: %v", v.id, err)
			}
			if err := c.publish(v, v.staging, v.target); err != nil {
				t.Fatalf("publish %s: %v", v.id, err)
			}
			staged = append(staged, v)
		}
		unstaged = append(unstaged, r.makeXVol(kind, "pvc-"+kind+"-c"))
	}
	for _, b := range staged {
		for _, a := range append(slices.Clone(staged), unstaged...) {
			if a == b || plugintest.RealKernel() && !representativePair(a, b) {
				continue
			}
			t.Run(a.id+" on "+b.id, func(t *testing.T) { r.runCells(t, crossCells(c, a, b)) })
		}
	}
	// B's volumes are whole: written through their targets, then torn down.
	for _, v := range staged {
		r.checkUsable(t, v)
		if err := c.unpublish(v, v.target); err != nil {
			t.Fatalf("unpublish %s: %v", v.id, err)
		}
		if err := c.unstage(v, v.staging); err != nil {
			t.Fatalf("unstage %s: %v", v.id, err)
		}
	}
	if mps := plugintest.MountPointsBelow(t, r.KubeletDir); len(mps) > 0 {
		t.Errorf("mounts left: %v", mps)
	}
	plugintest.AssertNoISCSI(t, r.iscsi.host)
}

// representativePair says whether a on b is one of the pairs the real
// kernel's run (make vm's safety step) makes. The node's checks depend on
// the two volumes' kinds and on whether a is staged, not on which volume
// of a kind it is: on the real kernel, where a cell costs seconds under
// QEMU's emulation, b is the first volume of each kind, and a each other
// kind's first volume, b's twin, or an unstaged volume (18 pairs of the
// 48 the shims' run makes, every kind against every kind).
func representativePair(a, b *xvol) bool {
	first := func(v *xvol) bool { return strings.HasSuffix(v.id, "-a") }
	return first(b) && (first(a) || a.kind == b.kind || strings.HasSuffix(a.id, "-c"))
}

// checkUsable writes through a published volume's target.
func (r *rig) checkUsable(t *testing.T, v *xvol) {
	t.Helper()
	if v.kind == "raw" {
		f, err := os.OpenFile(v.target, os.O_RDWR, 0)
		if err == nil {
			_, err = f.WriteAt([]byte(v.id), 0)
			f.Close()
		}
		if err != nil {
			t.Fatalf("raw target of %s: %v", v.id, err)
		}
		return
	}
	if err := os.WriteFile(filepath.Join(v.target, "owner"), []byte(v.id), 0o644); err != nil {
		t.Fatalf("target of %s: %v", v.id, err)
	}
}

// TestMountsReplacedUnderARecordAreLeftAlone: the record agrees that A is
// at a path, but what is mounted there now is B's (something unmounted A's
// mount and mounted B's in its place). Unpublish and unstage of A must not
// remove B's mount, and publish of A must not bind B's device into A's
// target: each is FailedPrecondition and changes nothing.
func TestMountsReplacedUnderARecordAreLeftAlone(t *testing.T) {
	r := newRig(t, rigOptions{iscsi: true})
	p := r.startPlugin(pluginOptions{role: "node"})
	c := xcalls{p: p}
	b := r.makeXVol("fs", "pvc-b")
	for _, err := range []error{c.stage(b, b.staging), c.publish(b, b.staging, b.target)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, kind := range []string{"nfs", "fs", "raw"} {
		t.Run(kind, func(t *testing.T) {
			a := r.makeXVol(kind, "pvc-a-"+kind)
			for _, err := range []error{c.stage(a, a.staging), c.publish(a, a.staging, a.target)} {
				if err != nil {
					t.Fatal(err)
				}
			}
			// A's target now holds B's file system.
			replaceMount(t, a.target, b.staging, kind == "raw")
			cells := []xcell{{"NodeUnpublishVolume(A) of a target holding B", func() error { return c.unpublish(a, a.target) }, codes.FailedPrecondition}}
			if kind == "fs" {
				// A's staging path now holds B's file system too.
				replaceMount(t, a.staging, b.staging, false)
				cells = append(cells,
					xcell{"NodePublishVolume(A) from a staging path holding B", func() error { return c.publish(a, a.staging, a.target+"-new") }, codes.FailedPrecondition},
					xcell{"NodeUnstageVolume(A) of a staging path holding B", func() error { return c.unstage(a, a.staging) }, codes.FailedPrecondition},
				)
			}
			r.runCells(t, cells)
		})
	}
	if _, err := os.Stat(filepath.Join(b.target, "lost+found")); err != nil {
		t.Fatalf("B's file system is gone from its target: %v", err)
	}
}

// replaceMount unmounts what is at path and bind-mounts from there instead
// (for a raw target, the device that from's file system is on).
func replaceMount(t *testing.T, path, from string, device bool) {
	t.Helper()
	for plugintest.MountsAt(t, path) > 0 {
		if err := unix.Unmount(path, 0); err != nil {
			t.Fatalf("unmount %s: %v", path, err)
		}
	}
	if device {
		var st unix.Stat_t
		if err := unix.Stat(from, &st); err != nil {
			t.Fatal(err)
		}
		from = deviceNode(t, st.Dev)
	}
	if err := unix.Mount(from, path, "", unix.MS_BIND, ""); err != nil {
		t.Fatalf("bind %s on %s: %v", from, path, err)
	}
}

// deviceNode is /dev's node of device number dev.
func deviceNode(t *testing.T, dev uint64) string {
	t.Helper()
	entries, err := os.ReadDir("/dev")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		var st unix.Stat_t
		p := filepath.Join("/dev", e.Name())
		if unix.Stat(p, &st) == nil && st.Mode&unix.S_IFMT == unix.S_IFBLK && st.Rdev == dev && isDiskNode(e.Name()) {
			return p
		}
	}
	t.Fatalf("no /dev node for device %d:%d", unix.Major(dev), unix.Minor(dev))
	return ""
}

// isDiskNode: a file system sits on a loop device through the shims, on a
// multipath map (dm-N) on a real kernel.
func isDiskNode(name string) bool {
	return strings.HasPrefix(name, "loop") || strings.HasPrefix(name, "dm-")
}
