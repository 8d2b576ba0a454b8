package guest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bin is where test/vm put the binaries: $ONTAP_CSI_VM_GUEST.
func bin(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("ONTAP_CSI_VM_GUEST")
	if dir == "" {
		t.Skip("runs inside the VM of test/vm")
	}
	return filepath.Join(dir, name)
}

// run runs a host tool and returns its output.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}
