package plugintest

import (
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shimtest"
)

// StartISCSI installs the iSCSI shims (iscsiadm, multipathd running, the
// fake-sysfs kernel over real loop devices) for the simulator, with iqn as
// the host's initiator name. Plugins started with it get the shims first in
// PATH and their fake /dev and /sys.
func StartISCSI(t testing.TB, r Roots, s *Sim, iqn string) *shimtest.Env {
	t.Helper()
	e := shimtest.Start(t, shimtest.Options{SimURL: s.URL, SimCA: s.CAFile, Multipath: true, InitiatorIQN: iqn})
	// Runs before the shims' teardown (cleanups run last-in first-out): a
	// mounted loop device cannot be detached.
	t.Cleanup(func() { UnmountBelow(t, r.Root) })
	return e
}

// AssertNoISCSI fails the test if an iSCSI session, a multipath map or a
// loop device of the shims is left. A path under a flushed map is released
// by the kernel at the map's last close, which may lag the detach a little.
func AssertNoISCSI(t testing.TB, e *shimtest.Env) {
	t.Helper()
	st := e.State(t)
	if len(st.Sessions) > 0 || len(st.Maps) > 0 {
		t.Errorf("iSCSI left behind: %d sessions, %d multipath maps, loop devices %v", len(st.Sessions), len(st.Maps), st.Loops())
		return
	}
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		bound := e.State(t).StillBound()
		if len(bound) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Errorf("loop devices still bound: %v", bound)
			return
		}
	}
}
