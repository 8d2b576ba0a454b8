package vm

import (
	"strings"
	"testing"
)

// TestBoot boots the image and runs a command: the kernel is Debian's.
func TestBoot(t *testing.T) {
	res := Run(t, Options{Command: []string{"uname", "-r"}})
	if res.ExitCode != 0 || !strings.HasSuffix(strings.TrimSpace(res.Output), "-amd64") {
		t.Fatalf("uname -r: exit %d, %q\n%s", res.ExitCode, res.Output, res.Console)
	}
	t.Logf("kernel %s; boot %s, run %s", strings.TrimSpace(res.Output), res.Boot.Round(100e6), res.Elapsed.Round(100e6))
}
