package plugintest

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
	mount "k8s.io/mount-utils"
)

// Roots are the directories of one test "node", all below Root.
type Roots struct {
	Root        string
	KubeletDir  string // --kubelet-dir: staging and target paths lie below it
	TrackingDir string // --tracking-dir (never Trident's /var/lib/trident/tracking)
	LockDir     string // --lock-dir
	Socket      string // the CSI socket
}

// NewRoots makes the roots below a new temporary directory. It is short —
// a unix socket path has at most 107 bytes, and t.TempDir embeds the test's
// name — and is removed when the test ends, after everything mounted below
// it is unmounted (removing a directory with a bind mount of the
// simulator's data below it would delete the data through the mount).
func NewRoots(t testing.TB) Roots {
	t.Helper()
	root, err := os.MkdirTemp("", "ontap-csi-e2e-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		UnmountBelow(t, root)
		if len(MountPointsBelow(t, root)) == 0 {
			os.RemoveAll(root)
		}
	})
	r := Roots{
		Root:        root,
		KubeletDir:  filepath.Join(root, "kubelet"),
		TrackingDir: filepath.Join(root, "tracking"),
		LockDir:     filepath.Join(root, "locks"),
		Socket:      filepath.Join(root, "csi.sock"),
	}
	// kubelet makes its directories before any plugin runs.
	for _, d := range []string{r.KubeletDir, filepath.Join(r.KubeletDir, "pods"), filepath.Join(r.KubeletDir, "plugins")} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	return r
}

// TrackingFile is the node state file of a volume.
func (r Roots) TrackingFile(volumeID string) string {
	return filepath.Join(r.TrackingDir, volumeID+".json")
}

// TrackingFiles lists the node state files left in the tracking dir.
func (r Roots) TrackingFiles(t testing.TB) []string {
	t.Helper()
	entries, err := os.ReadDir(r.TrackingDir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// UnmountBelow unmounts everything mounted below dir, deepest first.
func UnmountBelow(t testing.TB, dir string) {
	t.Helper()
	for i := 0; i < 10; i++ {
		mps := MountPointsBelow(t, dir)
		if len(mps) == 0 {
			return
		}
		for _, mp := range mps {
			if err := unix.Unmount(mp, 0); err != nil {
				_ = unix.Unmount(mp, unix.MNT_DETACH)
			}
		}
	}
	t.Errorf("mounts left below %s after cleanup: %v", dir, MountPointsBelow(t, dir))
}

// MountPointsBelow lists the mount points below dir, deepest first.
func MountPointsBelow(t testing.TB, dir string) []string {
	t.Helper()
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatalf("read mountinfo: %v", err)
	}
	var out []string
	for _, mi := range infos {
		if strings.HasPrefix(mi.MountPoint, dir+"/") {
			out = append(out, mi.MountPoint)
		}
	}
	slices.SortFunc(out, func(a, b string) int { return len(b) - len(a) })
	return out
}

// MountsAt counts the mounts stacked on p.
func MountsAt(t testing.TB, p string) int {
	t.Helper()
	infos, err := mount.ParseMountInfo("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, mi := range infos {
		if mi.MountPoint == p {
			n++
		}
	}
	return n
}
