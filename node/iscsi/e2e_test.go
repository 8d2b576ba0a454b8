package iscsi_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
	"github.com/ontap-csi/ontap-csi/node/iscsi"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shim"
	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shimtest"
)

// These tests run the package against the iSCSI shims: the ONTAP
// simulator decides what a login sees, the shim's kernel daemon turns scans
// into real loop devices over the LUN files, and everything the package
// reads comes from the shim's sysfs and /dev roots.

func TestMain(m *testing.M) {
	if spec := os.Getenv(crashEnv); spec != "" {
		runCrashChild(spec)
	}
	shimtest.Main(m)
}

const igroup = "node1"

type rig struct {
	t      testing.TB
	client *iscsi.Client
	env    *shimtest.Env
	san    *shimtest.SAN
	simURL string
	cfg    iscsi.Config
}

func newRig(t testing.TB, multipath bool) *rig {
	t.Helper()
	shimtest.Available(t)
	s, err := ontapsim.New(ontapsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	url, err := s.Start("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	env := shimtest.Start(t, shimtest.Options{SimURL: url, Multipath: multipath})
	env.Setenv(t)
	san := shimtest.NewSAN(t, url)
	san.CreateIgroup(igroup, env.InitiatorIQN)
	cfg := iscsi.Config{
		Exec:          &hostexec.Host{},
		DevDir:        env.DevDir,
		SysRoot:       env.SysRoot,
		LockDir:       filepath.Join(env.Root, "locks"),
		DeviceTimeout: 20 * time.Second,
	}
	if multipath {
		cfg.Multipath = iscsi.MultipathRequired
	}
	c, err := iscsi.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &rig{t: t, client: c, env: env, san: san, simURL: url, cfg: cfg}
}

// lun creates and maps a LUN and returns its Target.
func (r *rig) lun(name string, size int64) (iscsi.Target, shimtest.LUN) {
	r.t.Helper()
	l := r.san.CreateLUN(name, size)
	id := r.san.Map(l, igroup, -1)
	return iscsi.Target{IQN: r.san.Target, Portals: r.san.Portals, LUN: int32(id), Serial: l.Serial, Shared: true}, l
}

func (r *rig) state() *shim.State { return r.env.State(r.t) }

// devicesOf counts the SCSI devices of LUN id over all sessions.
func devicesOf(st *shim.State, id int32) int {
	n := 0
	for _, s := range st.Sessions {
		for _, d := range s.Devices {
			if d.LUN == int(id) {
				n++
			}
		}
	}
	return n
}

func ctx(t testing.TB) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	return c
}

func blockSize(t *testing.T, dev string) int64 {
	t.Helper()
	f, err := os.Open(dev)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	size, err := unix.IoctlGetUint64(int(f.Fd()), unix.BLKGETSIZE64)
	if err != nil {
		t.Fatal(err)
	}
	return int64(size)
}

func TestAttachDetachSinglePath(t *testing.T) {
	r := newRig(t, false)
	tgt, l := r.lun("vol_a", 64<<20)

	dev, err := r.client.Attach(ctx(t), tgt)
	if err != nil {
		t.Fatal(err)
	}
	if dev.Multipath || len(dev.Paths) != 1 || dev.Path != dev.Paths[0] {
		t.Fatalf("device %+v: want one path, no multipath", dev)
	}
	if !strings.HasPrefix(dev.Path, "/dev/loop") {
		t.Fatalf("device path %s: want the real loop device", dev.Path)
	}
	if dev.Size != l.Size || blockSize(t, dev.Path) != l.Size {
		t.Fatalf("size %d (block device %d), want %d", dev.Size, blockSize(t, dev.Path), l.Size)
	}
	st := r.state()
	if len(st.Sessions) != 1 {
		t.Fatalf("%d sessions without multipath, want 1", len(st.Sessions))
	}

	// The device is the LUN: what is written through it lands in its file.
	writeThrough(t, dev.Path, st.Sessions[0].Devices[0].File)

	// Repeats: same device, no new session or device.
	for i := 0; i < 2; i++ {
		again, err := r.client.Attach(ctx(t), tgt)
		if err != nil {
			t.Fatal(err)
		}
		if again.Path != dev.Path {
			t.Fatalf("repeated attach: %s, want %s", again.Path, dev.Path)
		}
	}
	found, err := r.client.Find(ctx(t), tgt)
	if err != nil || found == nil || found.Path != dev.Path {
		t.Fatalf("Find: %+v, %v", found, err)
	}
	if st := r.state(); len(st.Sessions) != 1 || devicesOf(st, tgt.LUN) != 1 {
		t.Fatalf("after repeats: %d sessions, %d devices", len(st.Sessions), devicesOf(st, tgt.LUN))
	}

	for i := 0; i < 2; i++ {
		if err := r.client.Detach(ctx(t), tgt); err != nil {
			t.Fatalf("detach %d: %v", i, err)
		}
	}
	if st := r.state(); len(st.Sessions) != 0 || len(st.Nodes) != 0 || len(st.Loops()) != 0 {
		t.Fatalf("after detach: %+v", st)
	}
	if bound := r.env.LeakedLoops(); len(bound) != 0 {
		t.Fatalf("loop devices still bound: %v", bound)
	}
	if dev, err := r.client.Find(ctx(t), tgt); dev != nil || err != nil {
		t.Fatalf("Find after detach: %+v, %v; want no device", dev, err)
	}
}

// writeThrough writes a block through dev and reads it back from the LUN's
// backing file.
func writeThrough(t *testing.T, dev, file string) {
	t.Helper()
	block := bytes.Repeat([]byte("ontap-csi "), 4096/10+1)[:4096]
	f, err := os.OpenFile(dev, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(block, 1<<20); err != nil {
		t.Fatal(err)
	}
	if err := f.Sync(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	got := make([]byte, len(block))
	b, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if _, err := b.ReadAt(got, 1<<20); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, block) {
		t.Fatal("data written through the device is not in the LUN's file")
	}
}

func TestAttachDetachMultipath(t *testing.T) {
	r := newRig(t, true)
	tgt, l := r.lun("vol_mp", 64<<20)

	dev, err := r.client.Attach(ctx(t), tgt)
	if err != nil {
		t.Fatal(err)
	}
	if !dev.Multipath || len(dev.Paths) != len(tgt.Portals) || len(tgt.Portals) < 2 {
		t.Fatalf("device %+v: want a map over %d paths", dev, len(tgt.Portals))
	}
	st := r.state()
	if len(st.Sessions) != len(tgt.Portals) || len(st.Maps) != 1 {
		t.Fatalf("%d sessions, %d maps", len(st.Sessions), len(st.Maps))
	}
	if dev.Path != "/dev/"+st.Maps[0].Loop || dev.Size != l.Size || blockSize(t, dev.Path) != l.Size {
		t.Fatalf("device %+v, map %+v, LUN size %d", dev, st.Maps[0], l.Size)
	}
	for _, p := range dev.Paths {
		if p == dev.Path {
			t.Fatalf("a path is the map: %+v", dev)
		}
	}
	writeThrough(t, dev.Path, st.Sessions[0].Devices[0].File)

	again, err := r.client.Attach(ctx(t), tgt)
	if err != nil || again.Path != dev.Path || len(again.Paths) != len(dev.Paths) {
		t.Fatalf("repeated attach: %+v, %v", again, err)
	}
	if st := r.state(); len(st.Sessions) != len(tgt.Portals) || len(st.Maps) != 1 || devicesOf(st, tgt.LUN) != len(tgt.Portals) {
		t.Fatalf("after a repeated attach: %d sessions, %d maps, %d devices", len(st.Sessions), len(st.Maps), devicesOf(st, tgt.LUN))
	}

	for i := 0; i < 2; i++ {
		if err := r.client.Detach(ctx(t), tgt); err != nil {
			t.Fatalf("detach %d: %v", i, err)
		}
	}
	if st := r.state(); len(st.Sessions) != 0 || len(st.Maps) != 0 || len(st.Nodes) != 0 {
		t.Fatalf("after detach: %+v", st)
	}
}

func TestTargetedScanAttachesOnlyItsLUN(t *testing.T) {
	r := newRig(t, true)
	var tgts []iscsi.Target
	for _, name := range []string{"vol_t0", "vol_t1", "vol_t2"} {
		tgt, _ := r.lun(name, 16<<20)
		tgts = append(tgts, tgt)
	}
	if _, err := r.client.Attach(ctx(t), tgts[1]); err != nil {
		t.Fatal(err)
	}
	st := r.state()
	for _, s := range st.Sessions {
		if len(s.Devices) != 1 || s.Devices[0].LUN != int(tgts[1].LUN) {
			t.Fatalf("session %d to %s has devices %+v; want only LUN %d", s.SID, s.Portal, s.Devices, tgts[1].LUN)
		}
	}
	for _, other := range []iscsi.Target{tgts[0], tgts[2]} {
		if dev, err := r.client.Find(ctx(t), other); dev != nil || err != nil {
			t.Fatalf("LUN %d: Find = %+v, %v; want no device", other.LUN, dev, err)
		}
	}
	if err := r.client.Detach(ctx(t), tgts[1]); err != nil {
		t.Fatal(err)
	}
}

func TestSerialMismatchIsRefusedAndRemoved(t *testing.T) {
	r := newRig(t, false)
	tgt, _ := r.lun("vol_s", 16<<20)
	wrong := tgt
	wrong.Serial = "notThisLUN00"
	_, err := r.client.Attach(ctx(t), wrong)
	if !errors.Is(err, iscsi.ErrSerialMismatch) {
		t.Fatalf("attach with a wrong serial: %v, want ErrSerialMismatch", err)
	}
	// The kernel daemon acts after the write; wait for the removal.
	waitFor(t, "the mismatched path to be removed", func() bool { return devicesOf(r.state(), tgt.LUN) == 0 })
	if n := strings.Count(r.env.KernelLog(), "delete "); n != 2 {
		t.Fatalf("%d device deletes, want 2 (the first device and the one after the rescan):\n%s", n, r.env.KernelLog())
	}
	// The session stays (nothing says another LUN is not next); the
	// unstage that follows a failed stage logs out.
	if err := r.client.Detach(ctx(t), wrong); err != nil {
		t.Fatal(err)
	}
	if st := r.state(); len(st.Sessions) != 0 {
		t.Fatalf("%d sessions after detach", len(st.Sessions))
	}
}

// A LUN id reused on the array: the kernel still shows the old LUN at the
// address. Attach of the new LUN replaces the stale device; Detach of the
// old LUN must not touch the new one.
func TestStaleDeviceAtReusedLUNID(t *testing.T) {
	r := newRig(t, false)
	old, oldLUN := r.lun("vol_old", 16<<20)
	if _, err := r.client.Attach(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	r.san.Unmap(oldLUN, igroup)
	newLUN := r.san.CreateLUN("vol_new", 24<<20)
	if id := r.san.Map(newLUN, igroup, int(old.LUN)); id != int(old.LUN) {
		t.Fatalf("mapped at %d, want %d", id, old.LUN)
	}
	tgt := old
	tgt.Serial = newLUN.Serial

	dev, err := r.client.Attach(ctx(t), tgt)
	if err != nil {
		t.Fatal(err)
	}
	if dev.Size != newLUN.Size {
		t.Fatalf("device size %d, want the new LUN's %d", dev.Size, newLUN.Size)
	}
	st := r.state()
	if devicesOf(st, tgt.LUN) != 1 || st.Sessions[0].Devices[0].Serial != newLUN.Serial {
		t.Fatalf("devices %+v, want only the new LUN's", st.Sessions[0].Devices)
	}

	if err := r.client.Detach(ctx(t), old); err != nil {
		t.Fatal(err)
	}
	if found, err := r.client.Find(ctx(t), tgt); err != nil || found == nil || found.Path != dev.Path {
		t.Fatalf("detaching the old LUN touched the new one: %+v, %v", found, err)
	}
	if st := r.state(); len(st.Sessions) != 1 {
		t.Fatalf("%d sessions; the new LUN still needs its session", len(st.Sessions))
	}
	if err := r.client.Detach(ctx(t), tgt); err != nil {
		t.Fatal(err)
	}
}

func TestCHAP(t *testing.T) {
	r := newRig(t, true)
	tgt, _ := r.lun("vol_chap", 16<<20)
	r.san.SetCHAP(r.env.InitiatorIQN, "node1user", "initiatorSecret1", "targetuser", "targetSecret01")
	logs := captureLogs(t)
	good := &iscsi.CHAP{Username: "node1user", InitiatorSecret: "initiatorSecret1", TargetUsername: "targetuser", TargetSecret: "targetSecret01"}

	for name, chap := range map[string]*iscsi.CHAP{
		"none":                nil,
		"wrong secret":        {Username: "node1user", InitiatorSecret: "guess"},
		"wrong target secret": {Username: "node1user", InitiatorSecret: "initiatorSecret1", TargetUsername: "targetuser", TargetSecret: "guess"},
	} {
		bad := tgt
		bad.CHAP = chap
		_, err := r.client.Attach(ctx(t), bad)
		if !errors.Is(err, iscsi.ErrAuthFailed) {
			t.Fatalf("%s: %v, want ErrAuthFailed", name, err)
		}
		if strings.Contains(err.Error(), "guess") || strings.Contains(err.Error(), "initiatorSecret1") {
			t.Fatalf("%s: the error shows a secret: %v", name, err)
		}
		if st := r.state(); len(st.Sessions) != 0 || len(st.Nodes) != 0 {
			t.Fatalf("%s: %d sessions, %d node records left after a refused login", name, len(st.Sessions), len(st.Nodes))
		}
	}

	tgt.CHAP = good
	dev, err := r.client.Attach(ctx(t), tgt)
	if err != nil {
		t.Fatal(err)
	}
	if !dev.Multipath {
		t.Fatalf("device %+v", dev)
	}
	if err := r.client.Detach(ctx(t), tgt); err != nil {
		t.Fatal(err)
	}
	for _, secret := range []string{"initiatorSecret1", "targetSecret01", "guess"} {
		if strings.Contains(logs.String(), secret) {
			t.Fatalf("a CHAP secret reached the log:\n%s", logs.String())
		}
	}
	if !strings.Contains(logs.String(), "authorization failure") {
		t.Fatalf("the log capture saw nothing:\n%s", logs.String())
	}
}

// captureLogs records every log entry of the package (at the level the
// node plugin runs at by default) for the rest of the test.
func captureLogs(t *testing.T) *logCapture {
	c := &logCapture{}
	std := logrus.StandardLogger()
	old := std.Hooks
	hooks := logrus.LevelHooks{}
	for l, hs := range old {
		hooks[l] = append(hooks[l], hs...)
	}
	hooks.Add(c)
	std.ReplaceHooks(hooks)
	t.Cleanup(func() { std.ReplaceHooks(old) })
	return c
}

type logCapture struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (c *logCapture) Levels() []logrus.Level { return logrus.AllLevels }

func (c *logCapture) Fire(e *logrus.Entry) error {
	line, err := e.String()
	if err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.buf.WriteString(line)
	return nil
}

func (c *logCapture) String() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.buf.String()
}

func TestResizeAfterLUNGrew(t *testing.T) {
	for _, mp := range []bool{false, true} {
		t.Run(map[bool]string{false: "single path", true: "multipath"}[mp], func(t *testing.T) {
			r := newRig(t, mp)
			tgt, l := r.lun("vol_grow", 32<<20)
			dev, err := r.client.Attach(ctx(t), tgt)
			if err != nil {
				t.Fatal(err)
			}
			newSize := int64(96 << 20)
			r.san.ResizeLUN(l, newSize)
			if got := blockSize(t, dev.Path); got != l.Size {
				t.Fatalf("device grew before the rescan: %d", got)
			}
			for i := 0; i < 2; i++ {
				size, err := r.client.Resize(ctx(t), tgt, newSize)
				if err != nil {
					t.Fatal(err)
				}
				if size != newSize || blockSize(t, dev.Path) != newSize {
					t.Fatalf("Resize = %d, block device %d, want %d", size, blockSize(t, dev.Path), newSize)
				}
			}
			for _, p := range dev.Paths {
				if got := blockSize(t, p); got != newSize {
					t.Fatalf("path %s: %d bytes, want %d", p, got, newSize)
				}
			}
			if err := r.client.Detach(ctx(t), tgt); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func TestDetachLogsOutOnlyAfterTheLastLUN(t *testing.T) {
	r := newRig(t, true)
	a, _ := r.lun("vol_la", 16<<20)
	b, _ := r.lun("vol_lb", 16<<20)
	for _, tgt := range []iscsi.Target{a, b} {
		if _, err := r.client.Attach(ctx(t), tgt); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.client.Detach(ctx(t), a); err != nil {
		t.Fatal(err)
	}
	st := r.state()
	if len(st.Sessions) != len(b.Portals) || devicesOf(st, b.LUN) != len(b.Portals) || devicesOf(st, a.LUN) != 0 {
		t.Fatalf("after detaching A: %d sessions, %d devices of B, %d of A", len(st.Sessions), devicesOf(st, b.LUN), devicesOf(st, a.LUN))
	}
	if dev, err := r.client.Find(ctx(t), b); dev == nil || err != nil {
		t.Fatalf("Find of B: %+v, %v", dev, err)
	}
	if err := r.client.Detach(ctx(t), b); err != nil {
		t.Fatal(err)
	}
	if st := r.state(); len(st.Sessions) != 0 || len(st.Nodes) != 0 {
		t.Fatalf("after the last LUN: %d sessions, %d records", len(st.Sessions), len(st.Nodes))
	}
}

// Many LUNs of one target attached and detached at the same time: the
// per-target lock keeps a logout from cutting a session another LUN is
// being attached through.
func TestConcurrentAttachDetachOnOneTarget(t *testing.T) {
	r := newRig(t, true)
	var tgts []iscsi.Target
	for i := 0; i < 6; i++ {
		tgt, _ := r.lun("vol_c"+string(rune('a'+i)), 16<<20)
		tgts = append(tgts, tgt)
	}
	parallel := func(what string, fn func(i int, tgt iscsi.Target) error) {
		var wg sync.WaitGroup
		errs := make([]error, len(tgts))
		for i, tgt := range tgts {
			wg.Add(1)
			go func() { defer wg.Done(); errs[i] = fn(i, tgt) }()
		}
		wg.Wait()
		if e := errors.Join(errs...); e != nil {
			t.Fatalf("%s: %v", what, e)
		}
	}
	attach := func(_ int, tgt iscsi.Target) error { _, err := r.client.Attach(ctx(t), tgt); return err }
	detach := func(_ int, tgt iscsi.Target) error { return r.client.Detach(ctx(t), tgt) }

	parallel("attach all", attach)
	parallel("detach even, attach odd again", func(i int, tgt iscsi.Target) error {
		if i%2 == 0 {
			return detach(i, tgt)
		}
		return attach(i, tgt)
	})
	for i, tgt := range tgts {
		dev, err := r.client.Find(ctx(t), tgt)
		if err != nil || (i%2 == 0) != (dev == nil) {
			t.Fatalf("LUN %d: Find = %+v, %v", tgt.LUN, dev, err)
		}
	}
	parallel("detach all", detach)
	if st := r.state(); len(st.Sessions) != 0 || len(st.Maps) != 0 {
		t.Fatalf("%d sessions, %d maps left", len(st.Sessions), len(st.Maps))
	}
}

// Detach refuses a device that is still mounted, in both modes.
func TestDetachRefusesAMountedDevice(t *testing.T) {
	if _, err := exec.LookPath("mkfs.ext4"); err != nil {
		t.Skip("needs mkfs.ext4")
	}
	for _, mp := range []bool{false, true} {
		t.Run(map[bool]string{false: "single path", true: "multipath"}[mp], func(t *testing.T) {
			r := newRig(t, mp)
			tgt, _ := r.lun("vol_m", 32<<20)
			dev, err := r.client.Attach(ctx(t), tgt)
			if err != nil {
				t.Fatal(err)
			}
			if out, err := exec.Command("mkfs.ext4", "-q", "-F", dev.Path).CombinedOutput(); err != nil {
				t.Fatalf("mkfs: %v: %s", err, out)
			}
			mnt := t.TempDir()
			if err := unix.Mount(dev.Path, mnt, "ext4", 0, ""); err != nil {
				t.Fatal(err)
			}
			mounted := true
			t.Cleanup(func() {
				if mounted {
					unix.Unmount(mnt, 0)
				}
			})
			if err := r.client.Detach(ctx(t), tgt); !errors.Is(err, iscsi.ErrDeviceInUse) {
				t.Fatalf("detach of a mounted device: %v, want ErrDeviceInUse", err)
			}
			if found, err := r.client.Find(ctx(t), tgt); err != nil || found == nil || found.Path != dev.Path {
				t.Fatalf("device gone after a refused detach: %+v, %v", found, err)
			}
			if err := unix.Unmount(mnt, 0); err != nil {
				t.Fatal(err)
			}
			mounted = false
			if err := r.client.Detach(ctx(t), tgt); err != nil {
				t.Fatal(err)
			}
		})
	}
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(20 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// BenchmarkAttachDetach measures one Attach and one Detach of a LUN through
// the shims (every host tool is a process: iscsiadm, multipath(d),
// blockdev), reported separately as ms/attach and ms/detach.
func BenchmarkAttachDetach(b *testing.B) {
	for _, mp := range []bool{false, true} {
		b.Run(map[bool]string{false: "single-path", true: "multipath"}[mp], func(b *testing.B) {
			r := newRig(b, mp)
			tgt, _ := r.lun("vol_bench", 16<<20)
			var attach, detach time.Duration
			for b.Loop() {
				start := time.Now()
				if _, err := r.client.Attach(ctx(b), tgt); err != nil {
					b.Fatal(err)
				}
				mid := time.Now()
				if err := r.client.Detach(ctx(b), tgt); err != nil {
					b.Fatal(err)
				}
				attach += mid.Sub(start)
				detach += time.Since(mid)
			}
			b.ReportMetric(float64(attach.Milliseconds())/float64(b.N), "ms/attach")
			b.ReportMetric(float64(detach.Milliseconds())/float64(b.N), "ms/detach")
		})
	}
}
