package vm

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// The guest tests (test/vm/guest) run in the VM, with the binaries they
// drive: make vm builds them into $ONTAP_CSI_VM_BIN; without it they are
// built here, once per test process.
var guestBins struct {
	sync.Mutex
	dir   string
	built bool // by this process: TestMain removes it
}

func TestMain(m *testing.M) {
	code := m.Run()
	if guestBins.built {
		os.RemoveAll(guestBins.dir)
	}
	os.Exit(code)
}

func guestBinaries(t *testing.T) map[string]string {
	t.Helper()
	guestBins.Lock()
	defer guestBins.Unlock()
	if guestBins.dir == "" {
		guestBins.dir = os.Getenv("ONTAP_CSI_VM_BIN")
	}
	if guestBins.dir == "" {
		dir, err := os.MkdirTemp("", "ontap-csi-vm-bin-")
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range [][]string{
			{"build", "-o", filepath.Join(dir, "ontap-csi"), "../../cmd/ontap-csi"},
			{"build", "-o", filepath.Join(dir, "ontap-sim"), "../../cmd/ontap-sim"},
			{"test", "-c", "-o", filepath.Join(dir, "guest.test"), "./guest"},
		} {
			cmd := exec.Command("go", b...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				os.RemoveAll(dir)
				t.Fatalf("go %s: %v\n%s", strings.Join(b, " "), err, out)
			}
		}
		guestBins.dir, guestBins.built = dir, true
	}
	files := map[string]string{}
	for _, name := range []string{"ontap-csi", "ontap-sim", "guest.test"} {
		files[name] = filepath.Join(guestBins.dir, name)
	}
	return files
}

// runGuest runs one guest test in a VM and fails with its logs if it does.
func runGuest(t *testing.T, name string) {
	t.Helper()
	Available(t)
	res := Run(t, Options{
		Files:   guestBinaries(t),
		Command: []string{"/host/in/guest.test", "-test.run=^" + name + "$", "-test.v", "-test.count=1", "-test.timeout=12m"},
		Env:     []string{"ONTAP_CSI_VM_GUEST=/host/in", "ONTAP_CSI_VM_OUT=/host/out"},
	})
	if res.ExitCode != 0 || !strings.Contains(res.Output, "--- PASS: "+name) {
		var logs strings.Builder
		for _, f := range []string{"ontap-csi.log", "ontap-sim.log", "dmesg.log"} {
			b, _ := os.ReadFile(filepath.Join(res.OutDir, f))
			logs.WriteString("\n--- " + f + " (tail) ---\n" + tail(string(b), 20000))
		}
		t.Fatalf("%s in the VM: exit %d\n%s%s", name, res.ExitCode, res.Output, logs.String())
	}
	t.Logf("%s: boot %s, whole run %s", name, res.Boot.Round(100e6), res.Elapsed.Round(100e6))
	// What the plugin complained about on a passing run is where the real
	// kernel disagrees with it without failing a call.
	b, _ := os.ReadFile(filepath.Join(res.OutDir, "ontap-csi.log"))
	for _, line := range strings.Split(string(b), "\n") {
		if strings.Contains(line, "level=warning") || strings.Contains(line, "level=error") {
			t.Logf("ontap-csi: %s", line)
		}
	}
}

// TestNFSVolumeLife: an ontap-nas volume's life through the real ontap-csi
// on the real NFS client and nfsd (guest/nfs_test.go).
func TestNFSVolumeLife(t *testing.T) { runGuest(t, "TestNFSVolumeLife") }

// TestISCSIVolumeLife: an ontap-san volume's life through the real
// ontap-csi on the real initiator and multipath over two portals to LIO
// (guest/iscsi_test.go).
func TestISCSIVolumeLife(t *testing.T) { runGuest(t, "TestISCSIVolumeLife") }

// TestKernelDataPlaneSAN: the simulator's kernel data plane under REST
// calls, seen by the VM's own initiator (guest/dataplane_test.go).
func TestKernelDataPlaneSAN(t *testing.T) { runGuest(t, "TestKernelDataPlaneSAN") }
