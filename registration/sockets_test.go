package registration

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A socket takes a path over by renaming onto it when that path is a socket
// (the handover, I3), or free; a file of any other kind stays untouched.
func TestMoveToReplacesOnlySockets(t *testing.T) {
	dir := t.TempDir()
	other := filepath.Join(dir, "other.sock")
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: other, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	l.SetUnlinkOnClose(false)
	defer l.Close()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("precious"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, target string
		ok           bool
	}{
		{"free path", filepath.Join(dir, "free.sock"), true},
		{"another process's socket", other, true},
		{"regular file", file, false},
		{"directory", dir, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := listenSocket(filepath.Join(dir, "tmp-"+strings.ReplaceAll(tc.name, " ", "-")))
			if err != nil {
				t.Fatal(err)
			}
			defer s.close()
			err = s.moveTo(tc.target)
			if (err == nil) != tc.ok {
				t.Fatalf("moveTo(%s): %v, want ok=%v", tc.target, err, tc.ok)
			}
			if tc.ok && !s.owned() {
				t.Error("the socket does not own its new path")
			}
		})
	}
	if b, _ := os.ReadFile(file); string(b) != "precious" {
		t.Fatal("the regular file was replaced")
	}
}
