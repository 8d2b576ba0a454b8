package iscsi_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
	"github.com/ontap-csi/ontap-csi/node/iscsi"
)

// The crash test runs Attach or Detach in a child process (this test
// binary) that SIGKILLs itself right before its n-th side effect (a host
// tool or a sysfs write), for n = 1, 2, ... until the call completes
// without reaching n. After each kill, the same call is retried in this
// process and must succeed with exactly one device per session and one map.

const crashEnv = "ISCSI_CRASH_CHILD"

type crashSpec struct {
	Op        string // "attach" or "detach"
	KillAt    int
	Target    iscsi.Target
	DevDir    string
	SysRoot   string
	LockDir   string
	Multipath iscsi.MultipathMode
}

// runCrashChild is the child's side: one call, then exit.
func runCrashChild(raw string) {
	var spec crashSpec
	if err := json.Unmarshal([]byte(raw), &spec); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	n := 0
	iscsi.SetBeforeSideEffect(func(what string) {
		n++
		if n == spec.KillAt {
			fmt.Fprintf(os.Stderr, "killed before step %d: %s\n", n, what)
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	})
	c, err := iscsi.New(iscsi.Config{Exec: &hostexec.Host{}, DevDir: spec.DevDir, SysRoot: spec.SysRoot, LockDir: spec.LockDir, Multipath: spec.Multipath})
	if err == nil {
		switch spec.Op {
		case "attach":
			_, err = c.Attach(context.Background(), spec.Target)
		case "detach":
			err = c.Detach(context.Background(), spec.Target)
		}
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Exit(0)
}

// runChild runs one crashing call; done reports that it completed.
func (r *rig) runChild(t *testing.T, op string, tgt iscsi.Target, killAt int) (done bool) {
	t.Helper()
	spec, _ := json.Marshal(crashSpec{Op: op, KillAt: killAt, Target: tgt, DevDir: r.cfg.DevDir, SysRoot: r.cfg.SysRoot, LockDir: r.cfg.LockDir, Multipath: r.cfg.Multipath})
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashEnv+"="+string(spec))
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	switch {
	case err == nil:
		return true
	case errors.As(err, &ee) && ee.ProcessState.Sys().(syscall.WaitStatus).Signal() == syscall.SIGKILL:
		for _, line := range strings.Split(string(out), "\n") {
			if strings.HasPrefix(line, "killed before") {
				t.Logf("%s: %s", op, line)
			}
		}
		return false
	default:
		t.Fatalf("%s child (kill at %d): %v: %s", op, killAt, err, out)
		return false
	}
}

// checkAttachedOnce asserts one session per portal, one device per session
// and at most one map for the LUN: nothing attached twice.
func (r *rig) checkAttachedOnce(t *testing.T, tgt iscsi.Target, dev *iscsi.Device, multipath bool) {
	t.Helper()
	st := r.state()
	portals := map[string]int{}
	for _, s := range st.Sessions {
		portals[s.Portal]++
	}
	for p, n := range portals {
		if n != 1 {
			t.Fatalf("%d sessions to %s", n, p)
		}
	}
	want := 1
	if multipath {
		want = len(tgt.Portals)
	}
	if got := devicesOf(st, tgt.LUN); got != want || len(dev.Paths) != want {
		t.Fatalf("%d SCSI devices of the LUN, %d paths in the device; want %d", got, len(dev.Paths), want)
	}
	if len(st.Maps) > 1 || (multipath && len(st.Maps) != 1) {
		t.Fatalf("%d multipath maps", len(st.Maps))
	}
	if multipath != dev.Multipath {
		t.Fatalf("device %+v, multipath %v", dev, multipath)
	}
}

func TestCrashDuringAttachAndDetach(t *testing.T) {
	for _, mp := range []bool{false, true} {
		t.Run(fmt.Sprintf("multipath=%v", mp), func(t *testing.T) {
			r := newRig(t, mp)
			tgt, _ := r.lun("vol_crash", 32<<20)
			steps := 0
			for n := 1; ; n++ {
				done := r.runChild(t, "attach", tgt, n)
				dev, err := r.client.Attach(ctx(t), tgt)
				if err != nil {
					t.Fatalf("attach retried after a kill before step %d: %v", n, err)
				}
				r.checkAttachedOnce(t, tgt, dev, mp)
				if err := r.client.Detach(ctx(t), tgt); err != nil {
					t.Fatal(err)
				}
				if done {
					steps = n - 1
					break
				}
			}
			t.Logf("attach: killed before each of %d steps and retried", steps)
			for n := 1; ; n++ {
				if _, err := r.client.Attach(ctx(t), tgt); err != nil {
					t.Fatal(err)
				}
				done := r.runChild(t, "detach", tgt, n)
				if err := r.client.Detach(ctx(t), tgt); err != nil {
					t.Fatalf("detach retried after a kill before step %d: %v", n, err)
				}
				if st := r.state(); len(st.Sessions) != 0 || len(st.Maps) != 0 || len(st.Nodes) != 0 {
					t.Fatalf("after a retried detach (kill before step %d): %d sessions, %d maps, %d records", n, len(st.Sessions), len(st.Maps), len(st.Nodes))
				}
				if done {
					steps = n - 1
					break
				}
			}
			t.Logf("detach: killed before each of %d steps and retried", steps)
			if bound := r.env.LeakedLoops(); len(bound) != 0 {
				t.Fatalf("loop devices still bound: %v", bound)
			}
		})
	}
}
