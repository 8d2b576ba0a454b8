package plugintest

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shimtest"
)

// ISCSI is the node's iSCSI initiator side: the shims of test/shims/iscsi
// (a fake /dev and /sys over loop devices), or on a real kernel
// (RealKernel) the host's own iscsid, udev and multipathd.
type ISCSI struct {
	InitiatorIQN string
	DevDir       string // the plugin's --dev-dir: /dev on a real kernel
	SysRoot      string // the plugin's --sys-root: /sys on a real kernel
	// Shim is the shims' environment; nil on a real kernel.
	Shim *shimtest.Env
}

// StartISCSI installs the iSCSI shims (iscsiadm, multipathd running, the
// fake-sysfs kernel over real loop devices) for the simulator, with iqn as
// the host's initiator name. Plugins started with it get the shims first in
// PATH and their fake /dev and /sys. On a real kernel it installs nothing,
// and the initiator name is the host's (iqn is ignored); what a failed test
// leaves — mounts, multipath maps, sessions, node records — goes when the
// test ends.
func StartISCSI(t testing.TB, r Roots, s *Sim, iqn string) *ISCSI {
	t.Helper()
	if RealKernel() {
		t.Cleanup(func() {
			UnmountBelow(t, r.Root)
			for _, cmd := range [][]string{
				{"multipath", "-F"},
				{"iscsiadm", "-m", "node", "--logoutall=all"},
				{"iscsiadm", "-m", "node", "-o", "delete"},
			} {
				// Bounded: a test that failed may leave iscsid busy, and
				// the next suite in the VM must still get its turn.
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				if out, err := exec.CommandContext(ctx, cmd[0], cmd[1:]...).CombinedOutput(); err != nil && t.Failed() {
					t.Logf("cleanup: %v: %v %s", cmd, err, out)
				}
				cancel()
			}
		})
		return &ISCSI{InitiatorIQN: hostInitiatorName(t), DevDir: "/dev", SysRoot: "/sys"}
	}
	e := shimtest.Start(t, shimtest.Options{SimURL: s.URL, SimCA: s.CAFile, Multipath: true, InitiatorIQN: iqn})
	// Runs before the shims' teardown (cleanups run last-in first-out): a
	// mounted loop device cannot be detached.
	t.Cleanup(func() { UnmountBelow(t, r.Root) })
	return &ISCSI{InitiatorIQN: e.InitiatorIQN, DevDir: e.DevDir, SysRoot: e.SysRoot, Shim: e}
}

// Attachment counts what sysfs shows of the LUN with serial: its path
// devices (block devices whose VPD page 0x80 holds the serial) and the
// multipath maps holding any of them.
func (e *ISCSI) Attachment(t testing.TB, serial string) (maps, paths int) {
	t.Helper()
	held := map[string]bool{}
	for _, dev := range e.blockDevices(t) {
		if b, err := os.ReadFile(filepath.Join(dev, "device", "vpd_pg80")); err == nil && vpdSerial(b) == serial {
			paths++
			holders, _ := os.ReadDir(filepath.Join(dev, "holders"))
			for _, h := range holders {
				held[h.Name()] = true
			}
		}
	}
	for h := range held {
		if e.isMultipathMap(h) {
			maps++
		}
	}
	return maps, paths
}

// vpdSerial is the serial of a VPD page 0x80 as sysfs shows it: a 4-byte
// header, then the serial (the shims write the serial alone).
func vpdSerial(b []byte) string {
	if len(b) > 4 && b[1] == 0x80 {
		b = b[4:]
	}
	return strings.Trim(string(b), " \n\x00")
}

func (e *ISCSI) blockDevices(t testing.TB) []string {
	t.Helper()
	devs, err := filepath.Glob(filepath.Join(e.SysRoot, "block", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return devs
}

func (e *ISCSI) isMultipathMap(name string) bool {
	b, err := os.ReadFile(filepath.Join(e.SysRoot, "block", name, "dm", "uuid"))
	return err == nil && strings.HasPrefix(string(b), "mpath-")
}

// AssertNoISCSI fails the test if an iSCSI session, a multipath map or a
// path device is left (through the shims: a loop device). A path under a
// flushed map is released by the kernel at the map's last close, which may
// lag the detach a little.
func AssertNoISCSI(t testing.TB, e *ISCSI) {
	t.Helper()
	if e.Shim == nil {
		assertNoKernelISCSI(t, e)
		return
	}
	st := e.Shim.State(t)
	if len(st.Sessions) > 0 || len(st.Maps) > 0 {
		t.Errorf("iSCSI left behind: %d sessions, %d multipath maps, loop devices %v", len(st.Sessions), len(st.Maps), st.Loops())
		return
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		bound := e.Shim.State(t).StillBound()
		if len(bound) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("loop devices still bound: %v", bound)
			return
		}
	}
}

// assertNoKernelISCSI: on a real kernel (the tests own the VM) no iSCSI
// session, no multipath map and no SCSI disk may be left.
func assertNoKernelISCSI(t testing.TB, e *ISCSI) {
	t.Helper()
	var left []string
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(100 * time.Millisecond) {
		left = left[:0]
		sessions, _ := filepath.Glob(filepath.Join(e.SysRoot, "class", "iscsi_session", "session*"))
		left = append(left, sessions...)
		for _, dev := range e.blockDevices(t) {
			name := filepath.Base(dev)
			if strings.HasPrefix(name, "sd") || e.isMultipathMap(name) {
				left = append(left, dev)
			}
		}
		if len(left) == 0 {
			return
		}
		if time.Now().After(deadline) {
			break
		}
	}
	out, _ := exec.Command("iscsiadm", "-m", "session").CombinedOutput()
	mp, _ := exec.Command("multipath", "-ll").CombinedOutput()
	t.Errorf("iSCSI left behind: %v\niscsiadm -m session:\n%s\nmultipath -ll:\n%s", left, out, mp)
}
