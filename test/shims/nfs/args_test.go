package main

import (
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

func TestParseArgs(t *testing.T) {
	tests := []struct {
		prog string
		args []string
		want *request // nil: a usage error
	}{
		{"mount", []string{"-t", "nfs", "-o", "nfsvers=4.1,hard", "10.0.0.1:/vol", "/mnt"},
			&request{nfs: true, source: "10.0.0.1:/vol", target: "/mnt", options: []string{"nfsvers=4.1", "hard"}}},
		{"mount", []string{"-tnfs4", "-oro", "[fd20::1]:/vol", "/mnt"},
			&request{nfs: true, source: "[fd20::1]:/vol", target: "/mnt", options: []string{"ro"}, readOnly: true}},
		{"mount", []string{"--types=nfs", "--options", "rw", "-r", "h:/v", "/m"},
			&request{nfs: true, source: "h:/v", target: "/m", options: []string{"rw"}}},
		{"mount.nfs", []string{"10.0.0.1:/vol", "/mnt", "-o", "ro"},
			&request{nfs: true, source: "10.0.0.1:/vol", target: "/mnt", options: []string{"ro"}, readOnly: true}},
		// Not NFS: handed on whatever it is.
		{"mount", []string{"-o", "bind", "/a", "/b"}, &request{options: []string{"bind"}}},
		{"mount", []string{"-t", "ext4", "--weird", "/dev/x", "/b"}, &request{options: nil}},
		// Malformed NFS mounts.
		{"mount", []string{"-t", "nfs", "10.0.0.1:/vol"}, nil},
		{"mount", []string{"-t", "nfs", "--bind", "10.0.0.1:/vol", "/mnt"}, nil},
		{"mount", []string{"-t", "nfs", "a:/v", "/m", "/extra"}, nil},
		{"mount", []string{"-t"}, nil},
	}
	for _, tc := range tests {
		got, err := parseArgs(tc.prog, tc.args)
		if tc.want == nil {
			var ue usageError
			if !errors.As(err, &ue) {
				t.Errorf("%s %q: %+v, %v; want a usage error", tc.prog, tc.args, got, err)
			}
			continue
		}
		if err != nil || got.nfs != tc.want.nfs || got.source != tc.want.source || got.target != tc.want.target ||
			got.readOnly != tc.want.readOnly || strings.Join(got.options, ",") != strings.Join(tc.want.options, ",") {
			t.Errorf("%s %q = %+v, %v; want %+v", tc.prog, tc.args, got, err, tc.want)
		}
	}
}

func TestSplitSource(t *testing.T) {
	for src, want := range map[string]string{
		"10.0.0.1:/vol":    "10.0.0.1|/vol",
		"[fd20::1]:/a/b":   "fd20::1|/a/b",
		"nfs.example:/vol": "nfs.example|/vol",
		"10.0.0.1:vol":     "",
		":/vol":            "",
		"[fd20::1]/vol":    "",
		"no-colon":         "",
	} {
		server, path, err := splitSource(src)
		got := server + "|" + path
		if err != nil {
			got = ""
		}
		if got != want {
			t.Errorf("splitSource(%q) = %q, %v; want %q", src, got, err, want)
		}
	}
}

// fakeDataPlane answers the shim's export queries from client 192.0.2.1
// to server 10.0.0.1: /rw and /ro export backing, /denied refuses the
// client, anything else is unknown.
func fakeDataPlane(backing string) *httptest.Server {
	return httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		q := r.URL.Query()
		if q.Get("client") != "192.0.2.1" || q.Get("server") != "10.0.0.1" {
			http.Error(w, `{"error":"bad query"}`, http.StatusBadRequest)
			return
		}
		switch q.Get("path") {
		case "/rw":
			json.NewEncoder(w).Encode(export{Volume: "v", Directory: backing, Access: "rw"})
		case "/ro":
			json.NewEncoder(w).Encode(export{Volume: "v", Directory: backing, Access: "ro"})
		case "/denied":
			w.WriteHeader(http.StatusForbidden)
			w.Write([]byte(`{"error":"access denied"}`))
		default:
			w.WriteHeader(http.StatusNotFound)
			w.Write([]byte(`{"error":"no such export"}`))
		}
	}))
}

// TestMountNFS runs an NFS mount against a fake data plane: admitted
// read-write, admitted read-only, refused, unknown.
func TestMountNFS(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("bind mounts need root")
	}
	backing := t.TempDir()
	os.WriteFile(filepath.Join(backing, "f"), []byte("x"), 0o644)
	srv := fakeDataPlane(backing)
	defer srv.Close()
	t.Setenv("ONTAP_SIM_URL", srv.URL)
	t.Setenv("NFS_SHIM_CLIENT_IP", "192.0.2.1")

	mnt := t.TempDir()
	mountAt := func(path string, opts ...string) error {
		return mountNFS(&request{nfs: true, source: "10.0.0.1:" + path, target: mnt, options: opts, readOnly: len(opts) > 0 && opts[0] == "ro"})
	}
	writable := func() bool {
		err := os.WriteFile(filepath.Join(mnt, "w"), nil, 0o644)
		os.Remove(filepath.Join(mnt, "w"))
		return err == nil
	}
	for _, tc := range []struct {
		path     string
		opts     []string
		writable bool
	}{{"/rw", nil, true}, {"/ro", nil, false}, {"/rw", []string{"ro"}, false}} {
		if err := mountAt(tc.path, tc.opts...); err != nil {
			t.Fatalf("%s %v: %v", tc.path, tc.opts, err)
		}
		if _, err := os.Stat(filepath.Join(mnt, "f")); err != nil {
			t.Fatalf("%s: backing directory not mounted: %v", tc.path, err)
		}
		if w := writable(); w != tc.writable {
			t.Errorf("%s %v: writable %v", tc.path, tc.opts, w)
		}
		if err := unix.Unmount(mnt, 0); err != nil {
			t.Fatal(err)
		}
	}
	// Generic options show on the mount, as on a real NFS mount.
	if err := mountAt("/rw", "nfsvers=4.1", "hard", "nosuid", "nodev", "noexec", "timeo=600"); err != nil {
		t.Fatal(err)
	}
	var st unix.Statfs_t
	err := unix.Statfs(mnt, &st)
	unix.Unmount(mnt, 0)
	if err != nil || st.Flags&(unix.ST_NOSUID|unix.ST_NODEV|unix.ST_NOEXEC) != unix.ST_NOSUID|unix.ST_NODEV|unix.ST_NOEXEC {
		t.Fatalf("mount flags %#x, %v: want nosuid, nodev, noexec", st.Flags, err)
	}
	// Options mount.nfs or the kernel refuse fail the mount, before any.
	for _, opts := range [][]string{{"bogus"}, {"nfsvers=5"}, {"timeo=soon"}, {"hard=1"}, {"bind"}} {
		if err := mountAt("/rw", opts...); !errors.Is(err, errBadOption) {
			t.Errorf("mount with %v: %v, want %v", opts, err, errBadOption)
		}
		if isMounted(t, mnt) {
			t.Fatalf("mount with %v mounted", opts)
		}
	}
	if err := mountAt("/denied"); !errors.Is(err, errAccessDenied) {
		t.Fatalf("refused export: %v", err)
	}
	if err := mountAt("/missing"); err == nil || !strings.Contains(err.Error(), "No such file") {
		t.Fatalf("unknown export: %v", err)
	}
}

func isMounted(t *testing.T, p string) bool {
	data, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 4 && f[4] == p {
			return true
		}
	}
	return false
}
