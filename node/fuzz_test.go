package node

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
)

// Fuzz targets for what reaches the node from a request. Seed corpora live
// in testdata/fuzz/<FuzzName>/; make fuzz runs each target (docs/fuzz.md).

// confineTree is a kubelet dir with symlinks that stay in, lead out, dangle
// and point at /, beside a directory outside it.
func confineTree(tb testing.TB) (base, outside string) {
	root := tb.TempDir()
	base, outside = filepath.Join(root, "kubelet"), filepath.Join(root, "outside")
	for _, d := range []string{filepath.Join(base, "pods/p1/volumes"), filepath.Join(base, "real"), outside} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			tb.Fatal(err)
		}
	}
	for name, target := range map[string]string{
		"pods/p1/escape": outside, "pods/inner": filepath.Join(base, "real"),
		"pods/dangling": filepath.Join(base, "nowhere"), "pods/root": "/", "pods/rel": "../..",
	} {
		if err := os.Symlink(target, filepath.Join(base, name)); err != nil {
			tb.Fatal(err)
		}
	}
	return base, outside
}

// FuzzConfine: a path from a request is either refused or, cleaned and with
// its symlinks resolved, strictly below the kubelet dir; the cleaned path
// as given is below it too, and nothing on disk changes either way.
func FuzzConfine(f *testing.F) {
	for _, s := range []string{"pods/p1/volumes/x/mount", "pods/p1/escape/etc", "pods/inner/a", "pods/dangling", "pods/root/etc",
		"pods/rel/x", "../outside", "pods/../..", "pods//p1/./volumes", "", "/", "pods/p1/volumes/a\x00b", strings.Repeat("a/", 3000)} {
		f.Add(s, true)
	}
	f.Add("/etc/passwd", false)
	base, _ := confineTree(f)
	tree := listTree(f, filepath.Dir(base))
	c := paths{base: base}
	realBase, err := filepath.EvalSymlinks(base)
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, p string, relative bool) {
		if relative {
			p = base + "/" + p
		}
		got, err := c.confine(p)
		if err == nil {
			if !strictlyBelow(got, realBase) || !strictlyBelow(filepath.Clean(p), base) {
				t.Fatalf("confine(%q) = %q, not strictly below %s", p, got, base)
			}
			if strings.ContainsAny(p, "\x00\n\r") || slices.Contains(strings.Split(p, "/"), "..") || len(p) > maxPathLen {
				t.Fatalf("confine(%q) accepted a malformed path", p)
			}
			if r, err := resolveExisting(got); err == nil && !strictlyBelow(r, realBase) {
				t.Fatalf("confine(%q) = %q resolves to %s", p, got, r)
			}
		}
		if after := listTree(t, filepath.Dir(base)); !slices.Equal(tree, after) {
			t.Fatalf("confine(%q) changed the disk", p)
		}
	})
}

func listTree(tb testing.TB, root string) []string {
	var out []string
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		out = append(out, p)
		return err
	})
	if err != nil {
		tb.Fatal(err)
	}
	return out
}

// FuzzMountOptions: whatever the publish context's mountOptions and the
// capability's flags hold, what reaches mount(8) is a list of single
// options that each pass checkOption — no comma, no space, nothing denied
// — without repeats, within the length bound, and splitting it again
// changes nothing.
func FuzzMountOptions(f *testing.F) {
	for _, s := range [][2]string{{"-o nfsvers=4.1,hard", "noatime"}, {"-o", ""}, {"vers=4,bind", ""}, {"", "ro\n/dev/sda /mnt"},
		{"-onfsvers=3", "X-mount.mkdir"}, {" -o  a , b ,a", "addr=1.2.3.4"}, {"-o\tsec=sys", "--bind"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, fromContext, flag string) {
		opts, err := mountOptions(fromContext, []string{flag, flag})
		if err != nil {
			if c := status.Code(toStatus(err)); c != codes.InvalidArgument {
				t.Fatalf("mountOptions(%q, %q): code %v", fromContext, flag, c)
			}
			return
		}
		seen := map[string]bool{}
		for _, o := range opts {
			if checkOption(o) != nil || strings.ContainsAny(o, ", \t\r\n") || o == "" || seen[o] {
				t.Fatalf("mountOptions(%q, %q) passed %q", fromContext, flag, o)
			}
			seen[o] = true
		}
		if len(strings.Join(opts, ",")) > 2*maxOptionsLength {
			t.Fatalf("options of %d bytes", len(strings.Join(opts, ",")))
		}
		again, err := splitOptions(opts)
		if err != nil || !slices.Equal(again, opts) {
			t.Fatalf("splitting %q again gave %q, %v", opts, again, err)
		}
	})
}

// FuzzCheckCapability: any volume capability a CO can encode is either
// InvalidArgument or a capability with one access type, a mode of the CSI
// enum, a sane file system type and checked mount flags.
func FuzzCheckCapability(f *testing.F) {
	for _, vc := range []*csi.VolumeCapability{
		{AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: "ext4", MountFlags: []string{"noatime"}}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER}},
		{AccessType: &csi.VolumeCapability_Block{Block: &csi.VolumeCapability_BlockVolume{}},
			AccessMode: &csi.VolumeCapability_AccessMode{Mode: 99}},
		{AccessMode: &csi.VolumeCapability_AccessMode{Mode: csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER}},
	} {
		b, err := proto.Marshal(vc)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var vc csi.VolumeCapability
		if proto.Unmarshal(data, &vc) != nil {
			return
		}
		c, err := checkCapability(&vc)
		if err != nil {
			if code := status.Code(toStatus(err)); code != codes.InvalidArgument {
				t.Fatalf("code %v for %v", code, &vc)
			}
			return
		}
		if checkAccessMode(c.mode) != nil || c.block == (vc.GetMount() != nil) || c.block != (vc.GetBlock() != nil) {
			t.Fatalf("accepted %v as %+v", &vc, c)
		}
		if c.fsType != strings.ToLower(c.fsType) || strings.ContainsAny(c.fsType, "\x00\n,/ ") || len(c.fsType) > 32 {
			t.Fatalf("file system type %q accepted", c.fsType)
		}
		for _, o := range c.flags {
			if checkOption(o) != nil {
				t.Fatalf("flag %q accepted", o)
			}
		}
	})
}
