package node

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestCheckVolumeID(t *testing.T) {
	for id, ok := range map[string]bool{
		"pvc-8d7c5f2e-1b3a-4c6d-9e8f-0a1b2c3d4e5f": true,
		"vol_1":                  true,
		strings.Repeat("a", 128): true,
		"":                       false,
		strings.Repeat("a", 129): false,
		"../../etc/passwd":       false,
		"a/b":                    false,
		"..":                     false,
		".tracking":              false,
		"a\x00b":                 false,
		"a\nb":                   false,
		"vol 1":                  false,
	} {
		err := checkVolumeID(id)
		if (err == nil) != ok {
			t.Errorf("checkVolumeID(%q) = %v", id, err)
		}
		if err != nil && status.Code(toStatus(err)) != codes.InvalidArgument {
			t.Errorf("checkVolumeID(%q): code %v", id, status.Code(toStatus(err)))
		}
	}
}

func TestConfine(t *testing.T) {
	root := t.TempDir()
	base := filepath.Join(root, "kubelet")
	outside := filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(base, "pods/p1/volumes"), filepath.Join(base, "real"), outside} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	link := func(target, name string) {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			t.Fatal(err)
		}
	}
	link(outside, "pods/p1/escape")                 // symlink out of the kubelet dir
	link(filepath.Join(base, "real"), "pods/inner") // symlink that stays inside
	link(filepath.Join(base, "nowhere"), "pods/dangling")
	link("/", "pods/root")

	c := paths{base: base}
	tests := []struct {
		path string
		want string // "" = rejected
	}{
		{base + "/pods/p1/volumes/x/mount", base + "/pods/p1/volumes/x/mount"},
		{base + "/pods/p1/volumes/x/mount/", base + "/pods/p1/volumes/x/mount"},
		{base + "//pods/./p1/volumes", base + "/pods/p1/volumes"},
		{base + "/pods/inner/x", base + "/real/x"},
		{base, ""},
		{base + "/", ""},
		{base + "2/pods/x", ""},
		{"/etc/kubernetes", ""},
		{"pods/p1", ""},
		{"some/path", ""},
		{base + "/pods/../../outside", ""},
		{base + "/pods/p1/../p1/volumes", ""}, // any '..' is refused
		{base + "/pods/p1/escape", ""},
		{base + "/pods/p1/escape/new/dir", ""},
		{base + "/pods/root/etc", ""},
		{base + "/pods/dangling", ""},
		{base + "/pods/p1\x00/x", ""},
		{base + "/pods/p1\n/x", ""},
		{base + "/" + strings.Repeat("a/", maxPathLen/2), ""},
	}
	for _, tc := range tests {
		got, err := c.confine(tc.path)
		switch {
		case tc.want == "" && err == nil:
			t.Errorf("confine(%q) = %q, want an error", tc.path, got)
		case tc.want != "" && (err != nil || got != tc.want):
			t.Errorf("confine(%q) = %q, %v; want %q", tc.path, got, err, tc.want)
		}
	}
}

// A path with something mounted on it is taken from the mount table and
// never stat'ed (a dead NFS server would block the stat forever).
func TestConfineDoesNotStatMountPoints(t *testing.T) {
	base := filepath.Join(t.TempDir(), "kubelet")
	target := filepath.Join(base, "pods/p1/mount")
	if err := os.MkdirAll(filepath.Dir(target), 0o750); err != nil {
		t.Fatal(err)
	}
	// Stands in for the unstat-able mount point: a stat would see a
	// dangling symlink and refuse it.
	if err := os.Symlink("/nonexistent", target); err != nil {
		t.Fatal(err)
	}
	c := paths{base: base, isMountPoint: func(p string) (bool, error) { return p == target, nil }}
	if got, err := c.confine(target); err != nil || got != target {
		t.Fatalf("confine(mount point) = %q, %v", got, err)
	}
	c.isMountPoint = nil
	if _, err := c.confine(target); err == nil {
		t.Fatal("dangling symlink accepted")
	}
}

func TestCheckOption(t *testing.T) {
	good := []string{
		"nfsvers=4.1", "vers=3", "hard", "rsize=1048576", "sec=krb5:krb5i", "noatime", "_netdev", "uid=1000",
		"context=system_u:object_r:container_file_t:s0", "nconnect=4", "lookupcache=positive", "clientaddr=fd20::1",
		"discard", "nouuid", "errors=remount-ro", "ro", "port=2049",
	}
	bad := []string{
		"bind", "BIND", "rbind", "remount", "move", "rshared", "make-private", "private",
		"x-mount.mkdir", "X-mount.idmap=b:0:1000:1", "X-foo", "helper=sshfs", "loop=/dev/loop0", "offset=0",
		"addr=10.9.9.9", "mountaddr=10.9.9.9", "user", "users", "owner", "fd=3", "source=/etc", "target=/",
		"-o", "--bind", "a b", `a"b`, "a'b", "a,b", "a;b", "$(id)", "a\nb", "a\x00b", "", "=x",
		strings.Repeat("a", maxOptionLen+1),
	}
	for _, o := range good {
		if err := checkOption(o); err != nil {
			t.Errorf("checkOption(%q) = %v, want ok", o, err)
		}
	}
	for _, o := range bad {
		if err := checkOption(o); err == nil {
			t.Errorf("checkOption(%q) passed", o)
		}
	}
}

func TestParseOptionList(t *testing.T) {
	for in, want := range map[string]string{
		"-o nfsvers=3":         "nfsvers=3",
		"  -o  nfsvers=4,hard": "nfsvers=4|hard",
		"nfsvers=4.1,,hard,":   "nfsvers=4.1|hard",
		"hard,hard":            "hard",
		"":                     "",
		"-o":                   "",
	} {
		got, err := parseOptionList(in)
		if err != nil || strings.Join(got, "|") != want {
			t.Errorf("parseOptionList(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, in := range []string{"-onfsvers=3", "nfsvers=3,bind", "-o ro -o remount", "vers=4 -t ext4", strings.Repeat("a,", maxOptionsLength)} {
		if got, err := parseOptionList(in); err == nil {
			t.Errorf("parseOptionList(%q) = %q, want an error", in, got)
		}
	}
}

func TestCheckCapability(t *testing.T) {
	snw := &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}
	mountCap := func(fs string, flags ...string) *csi.VolumeCapability {
		return &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fs, MountFlags: flags}}, AccessMode: snw}
	}
	withMode := func(m csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
		c := mountCap("ext4")
		c.AccessMode = &csi.VolumeCapability_AccessMode{Mode: m}
		return c
	}
	tests := []struct {
		name string
		vc   *csi.VolumeCapability
		ok   bool
	}{
		{"missing", nil, false},
		{"no access type", &csi.VolumeCapability{AccessMode: snw}, false},
		{"block", &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}, AccessMode: snw}, true},
		{"no access mode", &csi.VolumeCapability{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}}}, false},
		{"mode UNKNOWN", withMode(csi.VolumeCapability_AccessMode_UNKNOWN), false},
		{"mode 99", withMode(99), false},
		{"mode 8", withMode(8), false},
		{"mode -1", withMode(-1), false},
		{"mode SINGLE_NODE_MULTI_WRITER", withMode(csi.VolumeCapability_AccessMode_SINGLE_NODE_MULTI_WRITER), true},
		{"mode MULTI_NODE_READER_ONLY", withMode(csi.VolumeCapability_AccessMode_MULTI_NODE_READER_ONLY), true},
		{"mount", mountCap("ext4", "noatime", "discard,nodev"), true},
		{"flag injection", mountCap("ext4", "noatime,bind"), false},
		{"fs type with a comma", mountCap("ext4,bind"), false},
		{"fs type with a slash", mountCap("../xfs"), false},
	}
	for _, tc := range tests {
		c, err := checkCapability(tc.vc)
		if (err == nil) != tc.ok {
			t.Errorf("%s: %v", tc.name, err)
		}
		if err != nil && status.Code(toStatus(err)) != codes.InvalidArgument {
			t.Errorf("%s: code %v", tc.name, status.Code(toStatus(err)))
		}
		if tc.name == "mount" && strings.Join(c.flags, ",") != "noatime,discard,nodev" {
			t.Errorf("flags %v", c.flags)
		}
	}
}

func TestChooseFilesystem(t *testing.T) {
	tests := []struct {
		capFS, ctxFS string
		block        bool
		want         string
	}{
		{"", "", false, "ext4"},
		{"", "xfs", false, "xfs"},
		{"ext3", "xfs", false, "ext3"}, // the capability wins (Trident 26.06)
		{"XFS", "", false, ""},         // checkCapability lower-cases; chooseFilesystem sees "XFS" only in this table
		{"", "raw", false, ""},
		{"", "raw", true, "raw"},
		{"btrfs", "", false, ""},
	}
	for _, tc := range tests {
		got, err := chooseFilesystem(volumeCap{block: tc.block, fsType: tc.capFS}, tc.ctxFS)
		if (tc.want == "") != (err != nil) || got != tc.want {
			t.Errorf("chooseFilesystem(%q, %q, block=%v) = %q, %v; want %q", tc.capFS, tc.ctxFS, tc.block, got, err, tc.want)
		}
	}
}
