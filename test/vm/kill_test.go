package vm

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestKilledTestLeavesNoQEMU runs a test that boots a VM in a process of
// its own and kills that process while the VM runs: with SIGTERM (what CI
// and `go test -timeout` send) everything goes at once; with SIGKILL,
// which no cleanup sees, qemu dies with its parent (Pdeathsig), its overlay
// was already unlinked, and the next run sweeps the shares.
func TestKilledTestLeavesNoQEMU(t *testing.T) {
	Available(t)
	CachedImage(t) // built here, not in the child we kill
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		t.Run(sig.String(), func(t *testing.T) {
			report := filepath.Join(t.TempDir(), "started")
			child := exec.Command(os.Args[0], "-test.run=^TestHelperLongVM$", "-test.count=1")
			child.Env = append(os.Environ(), "ONTAP_CSI_VM_HELPER="+report)
			// The child fails as it dies (its VM ends without an exit
			// code): its output only matters if this test fails.
			var out bytes.Buffer
			child.Stdout, child.Stderr = &out, &out
			defer func() {
				if t.Failed() {
					t.Logf("the killed test's output:\n%s", out.String())
				}
			}()
			if err := child.Start(); err != nil {
				t.Fatal(err)
			}
			defer child.Process.Kill()
			pid, dir := waitReport(t, report)
			if err := child.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			_ = child.Wait()
			waitGone(t, pid)
			if _, err := os.Stat(filepath.Join(dir, "overlay.qcow2")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the overlay is still there: %v", err)
			}
			if sig == syscall.SIGKILL {
				sweepStale()
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the VM's directory %s is still there: %v", dir, err)
			}
		})
	}
}

// TestHelperLongVM is the child of TestKilledTestLeavesNoQEMU: a VM that
// runs until it is killed.
func TestHelperLongVM(t *testing.T) {
	report := os.Getenv("ONTAP_CSI_VM_HELPER")
	if report == "" {
		t.Skip("run by TestKilledTestLeavesNoQEMU")
	}
	onStart = func(pid int, dir string) {
		_ = os.WriteFile(report+".tmp", []byte(fmt.Sprintf("%d %s", pid, dir)), 0o644)
		_ = os.Rename(report+".tmp", report)
	}
	Run(t, Options{Command: []string{"sleep", "600"}})
	t.Error("the VM ended before it was killed")
}

func waitReport(t *testing.T, report string) (int, string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		b, err := os.ReadFile(report)
		if err != nil {
			continue
		}
		pidStr, dir, _ := strings.Cut(string(b), " ")
		pid, err := strconv.Atoi(pidStr)
		if err != nil {
			t.Fatalf("report %q", b)
		}
		return pid, dir
	}
	t.Fatal("the child did not start a VM")
	return 0, ""
}

// waitGone waits until process pid (qemu) no longer exists.
func waitGone(t *testing.T, pid int) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		if unix.Kill(pid, 0) == unix.ESRCH {
			return
		}
	}
	cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	t.Fatalf("qemu (pid %d, %q) still runs after its test was killed", pid, strings.ReplaceAll(string(cmdline), "\x00", " "))
}
