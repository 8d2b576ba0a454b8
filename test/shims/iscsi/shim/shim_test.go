package shim_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shim"
	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shimtest"
)

// These tests hold the shim to what the node code relies on: iscsiadm's
// exit codes and output, manual versus automatic scans, the sysfs and /dev
// layout, multipath maps, and a teardown that leaves no loop device.

func TestMain(m *testing.M) { shimtest.Main(m) }

type fixture struct {
	t   *testing.T
	env *shimtest.Env
	san *shimtest.SAN
}

func setup(t *testing.T, multipath bool) *fixture {
	return setupWith(t, shimtest.Options{Multipath: multipath})
}

func setupWith(t *testing.T, o shimtest.Options) *fixture {
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
	o.SimURL = url
	env := shimtest.Start(t, o)
	san := shimtest.NewSAN(t, url)
	san.CreateIgroup("host1", env.InitiatorIQN)
	return &fixture{t: t, env: env, san: san}
}

// run runs a shim command and returns stdout and the exit code.
func (f *fixture) run(name string, args ...string) (string, int) {
	f.t.Helper()
	cmd := exec.Command(filepath.Join(f.env.BinDir, name), args...)
	cmd.Env = f.env.Environ()
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return stdout.String(), 0
	case errors.As(err, &ee):
		return stdout.String() + stderr.String(), ee.ExitCode()
	}
	f.t.Fatal(err)
	return "", -1
}

func (f *fixture) mustRun(name string, args ...string) string {
	f.t.Helper()
	out, code := f.run(name, args...)
	if code != 0 {
		f.t.Fatalf("%s %v: exit %d: %s", name, args, code, out)
	}
	return out
}

// login creates the record of portal with scan mode and logs in.
func (f *fixture) login(portal, scan string) (string, int) {
	node := []string{"-m", "node", "-T", f.san.Target, "-p", portal}
	f.mustRun("iscsiadm", append(node, "-o", "new")...)
	f.mustRun("iscsiadm", append(node, "-o", "update", "-n", "node.session.scan", "-v", scan)...)
	return f.run("iscsiadm", append(node, "-l")...)
}

func (f *fixture) waitFor(what string, cond func(st *shim.State) bool) *shim.State {
	f.t.Helper()
	for deadline := time.Now().Add(20 * time.Second); ; {
		st := f.env.State(f.t)
		if cond(st) {
			return st
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("timed out waiting for %s; state %+v\nkernel log:\n%s", what, st, f.env.KernelLog())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestManualScanLogoutAndRecords(t *testing.T) {
	f := setup(t, false)
	a := f.san.CreateLUN("vol_a", 8<<20)
	b := f.san.CreateLUN("vol_b", 12<<20)
	idA, idB := f.san.Map(a, "host1", -1), f.san.Map(b, "host1", -1)
	portal := f.san.Portals[0] + ":3260"

	if out, code := f.run("iscsiadm", "-m", "session"); code != 21 {
		t.Fatalf("no sessions: exit %d %q, want 21", code, out)
	}
	if out, code := f.login(portal, "manual"); code != 0 {
		t.Fatalf("login: %d %s", code, out)
	}
	if _, code := f.run("iscsiadm", "-m", "node", "-T", f.san.Target, "-p", portal, "-l"); code != 15 {
		t.Fatalf("second login: exit %d, want 15 (session exists)", code)
	}
	out := f.mustRun("iscsiadm", "-m", "session")
	if want := fmt.Sprintf("tcp: [1] %s,1 %s (non-flash)\n", portal, f.san.Target); out != want {
		t.Fatalf("session list %q, want %q", out, want)
	}
	st := f.env.State(t)
	if len(st.Sessions) != 1 || len(st.Sessions[0].Devices) != 0 {
		t.Fatalf("manual scan: devices appeared at login: %+v", st.Sessions)
	}
	host := st.Sessions[0].Host

	// Only the LUN written to the scan file appears.
	scan := filepath.Join(f.env.SysRoot, "class", "scsi_host", fmt.Sprintf("host%d", host), "scan")
	if err := os.WriteFile(scan, []byte(fmt.Sprintf("0 0 %d", idB)), 0); err != nil {
		t.Fatal(err)
	}
	st = f.waitFor("LUN B", func(st *shim.State) bool { return len(st.Sessions[0].Devices) == 1 })
	d := st.Sessions[0].Devices[0]
	if d.LUN != idB || d.Serial != b.Serial {
		t.Fatalf("device %+v, want LUN %d (%s)", d, idB, b.Serial)
	}
	devDir := filepath.Join(f.env.SysRoot, "class", "iscsi_session", fmt.Sprintf("session%d", st.Sessions[0].SID), "device",
		fmt.Sprintf("target%d:0:0", host), fmt.Sprintf("%d:0:0:%d", host, idB))
	vpd, err := os.ReadFile(filepath.Join(devDir, "vpd_pg80"))
	if err != nil || string(vpd[4:]) != b.Serial || vpd[1] != 0x80 {
		t.Fatalf("vpd_pg80 %q, %v", vpd, err)
	}
	// udev's links come after the device, as on a real host.
	byPath := filepath.Join(f.env.DevDir, "disk", "by-path", fmt.Sprintf("ip-%s-iscsi-%s-lun-%d", portal, f.san.Target, idB))
	f.waitFor("udev's by-path link", func(*shim.State) bool { _, err := os.Lstat(byPath); return err == nil })
	if real, err := filepath.EvalSymlinks(byPath); err != nil || real != "/dev/"+d.Loop {
		t.Fatalf("by-path link: %q, %v; want /dev/%s", real, err, d.Loop)
	}
	if size, err := os.ReadFile(filepath.Join(f.env.SysRoot, "block", d.Loop, "size")); err != nil || strings.TrimSpace(string(size)) != fmt.Sprint(b.Size/512) {
		t.Fatalf("size %q, %v", size, err)
	}
	for _, d := range st.Sessions[0].Devices {
		if d.LUN == idA {
			t.Fatalf("LUN %d appeared without being scanned", idA)
		}
	}

	// Logout removes the session's devices; a second one finds nothing.
	f.mustRun("iscsiadm", "-m", "node", "-T", f.san.Target, "-p", portal, "-u")
	if _, code := f.run("iscsiadm", "-m", "node", "-T", f.san.Target, "-p", portal, "-u"); code != 21 {
		t.Fatalf("second logout: exit %d, want 21", code)
	}
	if bound := f.env.State(t).StillBound(); len(bound) != 0 {
		t.Fatalf("loop devices still bound after logout: %v", bound)
	}
	if _, err := os.Lstat(byPath); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("by-path link left: %v", err)
	}
	if out := f.mustRun("iscsiadm", "-m", "node"); out != fmt.Sprintf("%s,4294967295 %s\n", portal, f.san.Target) {
		t.Fatalf("records %q", out)
	}
	f.mustRun("iscsiadm", "-m", "node", "-T", f.san.Target, "-p", portal, "-o", "delete")
	if _, code := f.run("iscsiadm", "-m", "node"); code != 21 {
		t.Fatalf("records after delete: exit %d, want 21", code)
	}
}

func TestAutomaticScanAttachesEveryLUN(t *testing.T) {
	f := setup(t, false)
	for _, name := range []string{"vol_x", "vol_y", "vol_z"} {
		f.san.Map(f.san.CreateLUN(name, 4<<20), "host1", -1)
	}
	if out, code := f.login(f.san.Portals[0], "auto"); code != 0 {
		t.Fatalf("login: %d %s", code, out)
	}
	if st := f.env.State(t); len(st.Sessions[0].Devices) != 3 {
		t.Fatalf("automatic scan attached %d LUNs, want 3", len(st.Sessions[0].Devices))
	}
}

func TestLoginRefusals(t *testing.T) {
	f := setup(t, false)
	f.san.SetCHAP(f.env.InitiatorIQN, "user1", "secret-one-1", "", "")
	portal := f.san.Portals[0]
	if out, code := f.login(portal, "manual"); code != 24 {
		t.Fatalf("login without CHAP: exit %d %s, want 24", code, out)
	}
	node := []string{"-m", "node", "-T", f.san.Target, "-p", portal}
	for _, kv := range [][2]string{{"authmethod", "CHAP"}, {"username", "user1"}, {"password", "secret-one-1"}} {
		f.mustRun("iscsiadm", append(node, "-o", "update", "-n", "node.session.auth."+kv[0], "-v", kv[1])...)
	}
	f.mustRun("iscsiadm", append(node, "-l")...)
	f.mustRun("iscsiadm", append(node, "-u")...)

	other := []string{"-m", "node", "-T", "iqn.1992-08.com.netapp:sn.ffffffffffffffffffffffffffffffff:vs.9", "-p", portal}
	f.mustRun("iscsiadm", append(other, "-o", "new")...)
	if out, code := f.run("iscsiadm", append(other, "-l")...); code != 19 {
		t.Fatalf("login to an unknown target: exit %d %s, want 19", code, out)
	}
	if _, code := f.run("iscsiadm", "-m", "node", "-T", f.san.Target, "-p", "10.9.9.9", "-l"); code != 21 {
		t.Fatalf("login without a record: exit %d, want 21", code)
	}
	if _, code := f.run("iscsiadm", "-m", "discovery", "-t", "st", "-p", portal); code != 7 {
		t.Fatalf("discovery: exit %d, want 7 (not emulated)", code)
	}
}

// TestNodeRecordUpdatesAreChecked: as open-iscsi 2.1 does (the VM showed
// it), "-o update" refuses a setting a node record does not have (exit 7)
// and any -I an interface that does not exist (exit 3).
func TestNodeRecordUpdatesAreChecked(t *testing.T) {
	f := setup(t, false)
	node := []string{"-m", "node", "-T", f.san.Target, "-p", f.san.Portals[0]}
	f.mustRun("iscsiadm", append(node, "-o", "new")...)
	for _, name := range []string{"node.session.scan", "node.session.timeo.replacement_timeout", "node.session.auth.password_in", "node.conn[0].timeo.login_timeout"} {
		f.mustRun("iscsiadm", append(node, "-o", "update", "-n", name, "-v", "1")...)
	}
	for _, name := range []string{"bogus.key", "node.session.bogus", "node.conn[x].port", "node.conn[0].bogus"} {
		if out, code := f.run("iscsiadm", append(node, "-o", "update", "-n", name, "-v", "1")...); code != 7 {
			t.Errorf("update of %s: exit %d %s, want 7", name, code, out)
		}
	}
	for _, op := range [][]string{{"-o", "new"}, {"-o", "update", "-n", "node.session.scan", "-v", "manual"}, {"-l"}} {
		if out, code := f.run("iscsiadm", append(append(node, "-I", "nosuch"), op...)...); code != 3 {
			t.Errorf("%v with -I nosuch: exit %d %s, want 3", op, code, out)
		}
	}
	f.mustRun("iscsiadm", append(node, "-I", "default", "-o", "update", "-n", "node.session.scan", "-v", "manual")...)
}

func TestMultipathMaps(t *testing.T) {
	f := setup(t, true)
	l := f.san.CreateLUN("vol_mp", 8<<20)
	id := f.san.Map(l, "host1", -1)
	if out := f.mustRun("multipathd", "show", "daemon"); !strings.HasPrefix(out, "pid ") {
		t.Fatalf("multipathd show daemon: %q", out)
	}
	for _, p := range f.san.Portals {
		if out, code := f.login(p, "manual"); code != 0 {
			t.Fatalf("login %s: %s", p, out)
		}
	}
	for _, s := range f.env.State(t).Sessions {
		scan := filepath.Join(f.env.SysRoot, "class", "scsi_host", fmt.Sprintf("host%d", s.Host), "scan")
		if err := os.WriteFile(scan, []byte(fmt.Sprintf("0 0 %d", id)), 0); err != nil {
			t.Fatal(err)
		}
	}
	st := f.waitFor("a map over both paths", func(st *shim.State) bool { return len(st.Maps) == 1 && len(st.Maps[0].Slaves) == 2 })
	m := st.Maps[0]
	if out := f.mustRun("multipathd", "show", "paths", "raw", "format", "%d %m %t"); strings.Count(out, m.WWID+" active") != 2 {
		t.Fatalf("multipathd show paths: %q, want both paths active in %s", out, m.WWID)
	}
	if uuid, _ := os.ReadFile(filepath.Join(f.env.SysRoot, "block", m.Loop, "dm", "uuid")); strings.TrimSpace(string(uuid)) != "mpath-"+m.WWID {
		t.Fatalf("dm/uuid %q, WWID %s", uuid, m.WWID)
	}
	for _, s := range m.Slaves {
		if _, err := os.Lstat(filepath.Join(f.env.SysRoot, "block", s, "holders", m.Loop)); err != nil {
			t.Fatalf("path %s has no holder link: %v", s, err)
		}
	}

	// A claimed map is not flushed; an unclaimed one is.
	fd, err := unix.Open("/dev/"+m.Loop, unix.O_RDONLY|unix.O_EXCL, 0)
	if err != nil {
		t.Fatal(err)
	}
	if out, code := f.run("multipath", "-f", m.WWID); code != 1 || !strings.Contains(out, "map in use") {
		t.Fatalf("flush of a claimed map: exit %d %q", code, out)
	}
	unix.Close(fd)

	f.san.ResizeLUN(l, 16<<20)
	for _, s := range st.Sessions {
		rescan := filepath.Join(f.env.SysRoot, "block", s.Devices[0].Loop, "device", "rescan")
		if err := os.WriteFile(rescan, []byte("1"), 0); err != nil {
			t.Fatal(err)
		}
	}
	sizeOf := func(name string) string {
		b, _ := os.ReadFile(filepath.Join(f.env.SysRoot, "block", name, "size"))
		return strings.TrimSpace(string(b))
	}
	f.waitFor("rescanned paths", func(*shim.State) bool { return sizeOf(m.Slaves[0]) == "32768" && sizeOf(m.Slaves[1]) == "32768" })
	if got := sizeOf(m.Loop); got != "16384" {
		t.Fatalf("map grew before resize: %s sectors", got)
	}
	if out := f.mustRun("multipathd", "resize", "map", m.WWID); strings.TrimSpace(out) != "ok" {
		t.Fatalf("resize: %q", out)
	}
	if got := sizeOf(m.Loop); got != "32768" {
		t.Fatalf("map size %s sectors after resize, want 32768", got)
	}
	f.mustRun("multipath", "-f", m.WWID)
	if st := f.env.State(t); len(st.Maps) != 0 {
		t.Fatalf("map still there: %+v", st.Maps)
	}
}

func TestRefusesHostRoots(t *testing.T) {
	for _, v := range []string{"/sys", "/", "/dev"} {
		t.Setenv(shim.EnvState, t.TempDir())
		t.Setenv(shim.EnvDevDir, t.TempDir())
		t.Setenv(shim.EnvSysRoot, v)
		if _, err := shim.LoadEnv(); err == nil {
			t.Errorf("%s=%s accepted", shim.EnvSysRoot, v)
		}
	}
	t.Setenv(shim.EnvSysRoot, "")
	if _, err := shim.LoadEnv(); err == nil {
		t.Error("unset sysfs root accepted")
	}
}

// TestMultipathdThatBuildsNoMap: with ISCSI_SHIM_MAP_DELAY=never the paths
// appear with their links and no map ever does, as with a multipathd that
// ignores the LUN (blacklisted, find_multipaths): the node's "no map"
// branch runs through the shims too.
func TestMultipathdThatBuildsNoMap(t *testing.T) {
	f := setupWith(t, shimtest.Options{Multipath: true, MapDelay: "never"})
	id := f.san.Map(f.san.CreateLUN("vol_nomap", 8<<20), "host1", -1)
	portal := f.san.Portals[0]
	if out, code := f.login(portal, "manual"); code != 0 {
		t.Fatalf("login: %s", out)
	}
	host := f.env.State(t).Sessions[0].Host
	scan := filepath.Join(f.env.SysRoot, "class", "scsi_host", fmt.Sprintf("host%d", host), "scan")
	if err := os.WriteFile(scan, []byte(fmt.Sprintf("0 0 %d", id)), 0); err != nil {
		t.Fatal(err)
	}
	byPath := filepath.Join(f.env.DevDir, "disk", "by-path", fmt.Sprintf("ip-%s:3260-iscsi-%s-lun-%d", portal, f.san.Target, id))
	f.waitFor("udev's by-path link", func(*shim.State) bool { _, err := os.Lstat(byPath); return err == nil })
	time.Sleep(time.Second)
	if st := f.env.State(t); len(st.Maps) != 0 {
		t.Fatalf("maps %+v, want none", st.Maps)
	}
	if out := f.mustRun("multipathd", "show", "paths", "raw", "format", "%m %t"); strings.TrimSpace(out) != "[orphan] undef" {
		t.Fatalf("multipathd show paths: %q", out)
	}
}

// TestConcurrentScansAndDeletes runs the scans of both sessions at once
// (each host's one at a time, as the kernel's scan_mutex does) and then
// deletes every path at once: the kernel daemon works on them
// concurrently, and what it leaves must still be one consistent state:
// every LUN a path on each session and a map over both, every loop device
// recorded in the history (so that teardown finds it), and no history
// rewritten into state.json with every change.
func TestConcurrentScansAndDeletes(t *testing.T) {
	f := setup(t, true)
	const luns = 8
	ids := make([]int, luns)
	for i := range ids {
		ids[i] = f.san.Map(f.san.CreateLUN(fmt.Sprintf("vol_c%d", i), 4<<20), "host1", -1)
	}
	for _, p := range f.san.Portals {
		if out, code := f.login(p, "manual"); code != 0 {
			t.Fatalf("login %s: %s", p, out)
		}
	}
	sessions := f.env.State(t).Sessions
	if len(sessions) < 2 {
		t.Fatalf("%d sessions, want one per portal (%d)", len(sessions), len(f.san.Portals))
	}
	errs := make(chan error, len(sessions))
	for _, s := range sessions {
		go func() {
			scan := filepath.Join(f.env.SysRoot, "class", "scsi_host", fmt.Sprintf("host%d", s.Host), "scan")
			for _, id := range ids {
				if err := os.WriteFile(scan, []byte(fmt.Sprintf("0 0 %d", id)), 0); err != nil {
					errs <- err
					return
				}
				for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(time.Millisecond) {
					if fi, err := os.Stat(scan); err != nil || fi.Size() == 0 {
						break
					}
					if time.Now().After(deadline) {
						errs <- fmt.Errorf("scan of LUN %d on host%d not read", id, s.Host)
						return
					}
				}
			}
			errs <- nil
		}()
	}
	for range sessions {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	st := f.waitFor("a map over both paths of every LUN", func(st *shim.State) bool {
		if len(st.Maps) != luns {
			return false
		}
		for _, m := range st.Maps {
			if len(m.Slaves) != len(sessions) {
				return false
			}
		}
		return true
	})
	recorded := map[string]string{}
	for _, r := range st.History {
		recorded[r.Loop] = r.Backing
	}
	for _, s := range st.Sessions {
		if len(s.Devices) != luns {
			t.Errorf("session %d has %d devices, want %d", s.SID, len(s.Devices), luns)
		}
		for _, d := range s.Devices {
			if recorded[d.Loop] != d.File {
				t.Errorf("path %s over %s: history says %q", d.Loop, d.File, recorded[d.Loop])
			}
		}
	}
	for _, m := range st.Maps {
		if recorded[m.Loop] != "/dev/"+m.Backing {
			t.Errorf("map %s over %s: history says %q", m.Loop, m.Backing, recorded[m.Loop])
		}
	}
	if data, err := os.ReadFile(filepath.Join(f.env.StateDir, "state.json")); err != nil || strings.Contains(string(data), `"history"`) {
		t.Errorf("state.json holds the history (%v)", err)
	}

	for _, m := range st.Maps {
		f.mustRun("multipath", "-f", m.WWID)
	}
	for _, s := range st.Sessions {
		for _, d := range s.Devices {
			if err := os.WriteFile(filepath.Join(f.env.SysRoot, "block", d.Loop, "device", "delete"), []byte("1"), 0); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.waitFor("every path deleted", func(st *shim.State) bool {
		n := 0
		for _, s := range st.Sessions {
			n += len(s.Devices)
		}
		return n == 0 && len(st.Sessions) == len(sessions)
	})
	for _, s := range st.Sessions {
		for _, d := range s.Devices {
			if _, err := os.Lstat(filepath.Join(f.env.SysRoot, "block", d.Loop)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("path %s deleted but still in sysfs (%v)", d.Loop, err)
			}
		}
	}
}
