package server

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseEndpoint(t *testing.T) {
	cases := []struct {
		in, want, err string
	}{
		{in: "unix://plugin/csi.sock", want: "/plugin/csi.sock"}, // Trident's DaemonSet form
		{in: "unix:///plugin/csi.sock", want: "/plugin/csi.sock"},
		{in: "unix:///var/lib/kubelet/plugins/csi.trident.netapp.io/csi.sock", want: "/var/lib/kubelet/plugins/csi.trident.netapp.io/csi.sock"},
		{in: "unix://plugin/../plugin//csi.sock", want: "/plugin/csi.sock"},
		{in: "unix://../../etc/csi.sock", want: "/etc/csi.sock"}, // cannot climb above /
		{in: "tcp://127.0.0.1:9000", err: `scheme "tcp" is not supported`},
		{in: "/plugin/csi.sock", err: "expected unix://<path>"},
		{in: "unix:/plugin/csi.sock", err: "expected unix://<path>"},
		{in: "unix://", err: "empty socket path"},
		{in: "unix:///", err: "empty socket path"},
		{in: "unix://a\x00b", err: "NUL"},
		{in: "unix:///" + strings.Repeat("x", 120), err: "the limit is 107"},
	}
	for _, tc := range cases {
		got, err := ParseEndpoint(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParseEndpoint(%q) error = %v, want %q", tc.in, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("ParseEndpoint(%q) = %q, %v; want %q", tc.in, got, err, tc.want)
		}
	}
}

func TestListenAndRemoveOnlyOwnSocket(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "sub", "csi.sock")

	a, err := Listen(path)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	go func() {
		for {
			c, err := a.Accept()
			if err != nil {
				return
			}
			c.Close()
		}
	}()
	if _, err := Listen(path); !errors.Is(err, ErrSocketInUse) {
		t.Fatalf("second Listen on a live socket: %v, want ErrSocketInUse", err)
	}
	if !a.Owned() {
		t.Fatal("a does not own its fresh socket")
	}

	// A successor binds a temp name and renames it onto the path: the
	// predecessor must no longer consider the path its own.
	tmp := filepath.Join(dir, "sub", ".tmp.sock")
	b, err := Listen(tmp)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
	if a.Owned() {
		t.Fatal("a still claims a path that now names b's socket")
	}
	if err := a.Remove(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(path); err != nil {
		t.Fatalf("a removed b's socket: %v", err)
	}
	// Closing a listener never unlinks (I7).
	a.Close()
	if _, err := net.Dial("unix", path); err != nil {
		t.Fatalf("b's socket no longer answers after a closed: %v", err)
	}
}
