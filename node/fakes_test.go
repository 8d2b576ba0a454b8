package node

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
	"github.com/ontap-csi/ontap-csi/node/iscsi"
)

// fakeHost stands in for the host's tools in unit tests. It keeps a mount
// table of its own, written in mountinfo format to the file the service's
// mounter reads, so that the service sees the effect of its mount calls
// without anything being mounted. As with the real tools, which run
// chrooted into the host root, a mount made at P is listed at root+P.
type fakeHost struct {
	mu        sync.Mutex
	root      string // the service's HostRoot
	mountinfo string
	mounts    []fakeMount
	fs        map[string]string // device -> file system blkid reports
	calls     []string
	fail      map[string]*hostexec.ExitError // tool -> failure to return
	nextMinor int
	// copies are mount points listed at their bare path, not under root:
	// the container's own copies of mounts, which the host tools do not see.
	copies []string
}

type fakeMount struct {
	source, target, fsType string
	ro                     bool
	minor                  int
}

func newFakeHost(t *testing.T) *fakeHost {
	h := &fakeHost{
		mountinfo: filepath.Join(t.TempDir(), "mountinfo"),
		fs:        map[string]string{},
		fail:      map[string]*hostexec.ExitError{},
		nextMinor: 100,
	}
	h.write()
	return h
}

func (h *fakeHost) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.calls = append(h.calls, strings.Join(append([]string{name}, args...), " "))
	if e := h.fail[name]; e != nil {
		return nil, e
	}
	switch name {
	case "mount":
		return nil, h.mount(args)
	case "umount":
		target := args[len(args)-1]
		for i := len(h.mounts) - 1; i >= 0; i-- {
			if h.mounts[i].target == target {
				h.mounts = slices.Delete(h.mounts, i, i+1)
				h.write()
				return nil, nil
			}
		}
		return nil, &hostexec.ExitError{Name: name, Code: 32, Stderr: "umount: " + target + ": not mounted."}
	case "blkid":
		fs := h.fs[args[len(args)-1]]
		if fs == "" {
			return nil, &hostexec.ExitError{Name: name, Code: 2}
		}
		if pt, ok := strings.CutPrefix(fs, "PTTYPE="); ok {
			return []byte("PTTYPE=" + pt + "\n"), nil
		}
		return []byte("DEVNAME=" + args[len(args)-1] + "\nTYPE=" + fs + "\n"), nil
	case "mkfs.ext4", "mkfs.ext3", "mkfs.xfs":
		h.fs[args[len(args)-1]] = strings.TrimPrefix(name, "mkfs.")
		return nil, nil
	case "e2fsck", "resize2fs", "xfs_growfs":
		return nil, nil
	}
	return nil, fmt.Errorf("fakeHost: unexpected tool %s", name)
}

func (h *fakeHost) mount(args []string) error {
	var fsType string
	var opts, pos []string
	for i := 0; i < len(args); i++ {
		switch args[i] {
		case "-t":
			i++
			fsType = args[i]
		case "-o":
			i++
			opts = strings.Split(args[i], ",")
		default:
			pos = append(pos, args[i])
		}
	}
	target := pos[len(pos)-1]
	if slices.Contains(opts, "remount") {
		for i := len(h.mounts) - 1; i >= 0; i-- {
			if h.mounts[i].target == target {
				h.mounts[i].ro = slices.Contains(opts, "ro")
				h.write()
				return nil
			}
		}
		return &hostexec.ExitError{Name: "mount", Code: 32, Stderr: "not mounted"}
	}
	source := pos[0]
	m := fakeMount{source: source, target: target, fsType: fsType, ro: slices.Contains(opts, "ro")}
	if slices.Contains(opts, "bind") {
		for i := len(h.mounts) - 1; i >= 0; i-- {
			if h.mounts[i].target == source { // bind of a mount point shares its file system
				m.fsType, m.minor, m.source = h.mounts[i].fsType, h.mounts[i].minor, h.mounts[i].source
				break
			}
		}
	}
	if m.minor == 0 {
		h.nextMinor++
		m.minor = h.nextMinor
	}
	h.mounts = append(h.mounts, m)
	h.write()
	return nil
}

func (h *fakeHost) write() {
	var b strings.Builder
	fmt.Fprintf(&b, "1 0 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n")
	for i, m := range h.mounts {
		opt := "rw"
		if m.ro {
			opt = "ro"
		}
		fsType := m.fsType
		if fsType == "" {
			fsType = "none"
		}
		fmt.Fprintf(&b, "%d 1 0:%d / %s %s,relatime - %s %s rw\n", i+10, m.minor, filepath.Join("/", h.root, m.target), opt, fsType, m.source)
	}
	for i, c := range h.copies {
		fmt.Fprintf(&b, "%d 1 0:%d / %s rw,relatime - ext4 /dev/dm-0 rw\n", i+1000, 900+i, c)
	}
	if err := os.WriteFile(h.mountinfo, []byte(b.String()), 0o600); err != nil {
		panic(err)
	}
}

// count returns how many calls ran the tool.
func (h *fakeHost) count(tool string) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, c := range h.calls {
		if c == tool || strings.HasPrefix(c, tool+" ") {
			n++
		}
	}
	return n
}

func (h *fakeHost) mountedAt(target string) *fakeMount {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i := len(h.mounts) - 1; i >= 0; i-- {
		if h.mounts[i].target == target {
			m := h.mounts[i]
			return &m
		}
	}
	return nil
}

// fakeInitiator attaches LUNs as zero-filled files.
type fakeInitiator struct {
	mu      sync.Mutex
	dir     string
	devices map[string]string // serial -> device file
	size    int64
	attach  int
	detach  int
	find    int
	fail    map[string]error // method -> its scripted failure
	// onRelease, if set, runs on ReleaseDeadMapsDuring, before its unmount.
	onRelease func(iscsi.Target)
}

func newFakeInitiator(t *testing.T) *fakeInitiator {
	return &fakeInitiator{dir: t.TempDir(), devices: map[string]string{}, size: 4 << 20, fail: map[string]error{}}
}

func (f *fakeInitiator) Attach(_ context.Context, t iscsi.Target) (*iscsi.Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.attach++
	if err := f.fail["Attach"]; err != nil {
		return nil, err
	}
	dev, ok := f.devices[t.Serial]
	if !ok {
		dev = filepath.Join(f.dir, "dev-"+t.Serial)
		if err := os.WriteFile(dev, nil, 0o600); err != nil {
			return nil, err
		}
		if err := os.Truncate(dev, f.size); err != nil {
			return nil, err
		}
		f.devices[t.Serial] = dev
	}
	return &iscsi.Device{Path: dev, Size: f.size}, nil
}

func (f *fakeInitiator) Detach(_ context.Context, t iscsi.Target) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.detach++
	if err := f.fail["Detach"]; err != nil {
		return err
	}
	delete(f.devices, t.Serial)
	return nil
}

func (f *fakeInitiator) ReleaseDeadMapsDuring(_ context.Context, t iscsi.Target, unmount func() error) error {
	f.mu.Lock()
	onRelease := f.onRelease
	f.mu.Unlock()
	if onRelease != nil {
		onRelease(t)
	}
	return unmount()
}

func (f *fakeInitiator) Find(_ context.Context, t iscsi.Target) (*iscsi.Device, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.find++
	if err := f.fail["Find"]; err != nil {
		return nil, err
	}
	dev, ok := f.devices[t.Serial]
	if !ok {
		return nil, nil
	}
	return &iscsi.Device{Path: dev, Size: f.size}, nil
}

func (f *fakeInitiator) Resize(_ context.Context, t iscsi.Target, minBytes int64) (int64, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if err := f.fail["Resize"]; err != nil {
		return 0, err
	}
	if _, ok := f.devices[t.Serial]; !ok {
		return 0, iscsi.ErrNotAttached
	}
	if minBytes > f.size {
		return 0, fmt.Errorf("LUN did not grow to %d", minBytes)
	}
	return f.size, nil
}

// testService is a service over fakes, with its kubelet dir.
type testService struct {
	*Service
	host    *fakeHost
	ini     *fakeInitiator
	kubelet string
	root    string
}

func newTestService(t *testing.T) *testService {
	t.Helper()
	root := t.TempDir()
	host := newFakeHost(t)
	ini := newFakeInitiator(t)
	cfg := Config{
		NodeID:      "node-1",
		KubeletDir:  filepath.Join(root, "kubelet"),
		TrackingDir: filepath.Join(root, "tracking"),
		LockDir:     filepath.Join(root, "locks"),
		HostRoot:    filepath.Join(root, "host"),
		Exec:        host,
	}
	// The DaemonSet's hostPath (DirectoryOrCreate) provides both.
	for _, dir := range []string{cfg.KubeletDir, cfg.TrackingDir} {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	// The host root shows this test's tree where the host has it, as /host
	// shows the host's / in the DaemonSet.
	if err := os.MkdirAll(filepath.Join(cfg.HostRoot, filepath.Dir(root)), 0o750); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(root, filepath.Join(cfg.HostRoot, root)); err != nil {
		t.Fatal(err)
	}
	if err := cfg.setDefaults(); err != nil {
		t.Fatal(err)
	}
	s, err := newService(cfg, ini)
	if err != nil {
		t.Fatal(err)
	}
	s.mounter.mountInfo = host.mountinfo
	s.mounter.statx = false // the fake host's mounts are not in this kernel
	host.root = cfg.HostRoot
	return &testService{Service: s, host: host, ini: ini, kubelet: cfg.KubeletDir, root: root}
}

func (ts *testService) staging(t *testing.T, vol string) string {
	p := filepath.Join(ts.kubelet, "plugins/kubernetes.io/csi/pv", vol, "globalmount")
	if err := os.MkdirAll(p, 0o750); err != nil {
		t.Fatal(err)
	}
	return p
}

func (ts *testService) target(t *testing.T, pod, vol string) string {
	p := filepath.Join(ts.kubelet, "pods", pod, "volumes/kubernetes.io~csi", vol, "mount")
	if err := os.MkdirAll(filepath.Dir(p), 0o750); err != nil {
		t.Fatal(err)
	}
	return p
}
