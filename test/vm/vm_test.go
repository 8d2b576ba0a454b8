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

// TestLIOMultipath logs in to a LUN made by hand in LIO through two
// portals and gets a multipath map (testdata/lio-multipath.sh).
func TestLIOMultipath(t *testing.T) {
	res := Run(t, Options{
		Files:   map[string]string{"lio-multipath.sh": "testdata/lio-multipath.sh"},
		Command: []string{"/bin/bash", "/host/in/lio-multipath.sh"},
	})
	if res.ExitCode != 0 || !strings.Contains(res.Output, "\nPASS\n") {
		t.Fatalf("lio-multipath.sh: exit %d\n%s", res.ExitCode, res.Output)
	}
	t.Logf("boot %s, run %s", res.Boot.Round(100e6), res.Elapsed.Round(100e6))
}
