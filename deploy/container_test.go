//go:build linux

package deploy

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"
)

// A small container runtime for the tests: the test binary re-executes
// itself in a new mount namespace as containerInit, which builds the
// container's filesystem from bind mounts (as kubelet and the runtime would
// from the pod's volumes), joins a network namespace, chroots and execs the
// container's command. Every mount lives and dies with that mount
// namespace, so nothing leaks onto the host even if a test fails.

const containerInitEnv = "ONTAP_CSI_DEPLOY_TEST_CONTAINER"

type containerSpec struct {
	Rootfs         string      `json:"rootfs"`
	Mounts         []bindMount `json:"mounts"`
	ReadOnlyRootfs bool        `json:"readOnlyRootfs"`
	NetNS          string      `json:"netns"` // path of a network namespace to join
	Argv           []string    `json:"argv"`
	Env            []string    `json:"env"`
}

type bindMount struct {
	Source   string `json:"source"` // host path
	Target   string `json:"target"` // path in the container
	ReadOnly bool   `json:"readOnly"`
}

func init() {
	if os.Getenv(containerInitEnv) != "" {
		// Namespaces set with setns are per thread: keep main on one thread
		// until it execs.
		runtime.LockOSThread()
	}
}

func TestMain(m *testing.M) {
	if spec := os.Getenv(containerInitEnv); spec != "" {
		containerInit(spec) // does not return
	}
	code := m.Run()
	cleanupBinary()
	os.Exit(code)
}

func containerInit(specJSON string) {
	fail := func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "container init: "+format+"\n", args...)
		os.Exit(127)
	}
	var s containerSpec
	if err := json.Unmarshal([]byte(specJSON), &s); err != nil {
		fail("spec: %v", err)
	}
	// The new mount namespace must not propagate anything back to the host.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		fail("make / private: %v", err)
	}
	if err := unix.Mount(s.Rootfs, s.Rootfs, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		fail("bind rootfs: %v", err)
	}
	// Parents before children.
	sort.SliceStable(s.Mounts, func(i, j int) bool {
		return strings.Count(s.Mounts[i].Target, "/") < strings.Count(s.Mounts[j].Target, "/")
	})
	for _, m := range s.Mounts {
		target := filepath.Join(s.Rootfs, m.Target)
		if err := mountPoint(m.Source, target); err != nil {
			fail("mount point %s: %v", m.Target, err)
		}
		if err := unix.Mount(m.Source, target, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			fail("bind %s at %s: %v", m.Source, m.Target, err)
		}
		if m.ReadOnly {
			if err := unix.Mount("", target, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
				fail("read-only %s: %v", m.Target, err)
			}
		}
	}
	if s.ReadOnlyRootfs {
		if err := unix.Mount("", s.Rootfs, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
			fail("read-only rootfs: %v", err)
		}
	}
	if s.NetNS != "" {
		fd, err := unix.Open(s.NetNS, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			fail("open netns: %v", err)
		}
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			fail("setns: %v", err)
		}
		unix.Close(fd)
	}
	if err := unix.Chroot(s.Rootfs); err != nil {
		fail("chroot: %v", err)
	}
	if err := unix.Chdir("/"); err != nil {
		fail("chdir: %v", err)
	}
	err := syscall.Exec(s.Argv[0], s.Argv, s.Env)
	fail("exec %v: %v", s.Argv, err)
}

// mountPoint creates the target of a bind mount: a file for a file, else a
// directory.
func mountPoint(source, target string) error {
	fi, err := os.Stat(source)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return os.MkdirAll(target, 0o755)
	}
	if err := os.MkdirAll(filepath.Dir(target), 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(target, os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return err
	}
	return f.Close()
}

// netNS is a network namespace held by one locked OS thread of the test
// process. Code that must create sockets inside it runs through Do.
type netNS struct {
	path string
	do   chan func()
}

func newNetNS(t *testing.T) *netNS {
	t.Helper()
	n := &netNS{do: make(chan func())}
	ready := make(chan error)
	go func() {
		// Never unlocked: when this goroutine returns, its thread exits and
		// takes the namespace with it (once no process or socket uses it).
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			ready <- fmt.Errorf("unshare network namespace: %w", err)
			return
		}
		if err := linkUp("lo"); err != nil {
			ready <- err
			return
		}
		n.path = fmt.Sprintf("/proc/%d/task/%d/ns/net", os.Getpid(), unix.Gettid())
		ready <- nil
		for f := range n.do {
			f()
		}
	}()
	if err := <-ready; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { close(n.do) })
	return n
}

// Do runs f on the namespace's thread. Sockets f creates (a listener, a
// dialled connection) belong to the namespace and may be used anywhere
// afterwards; f must not start goroutines that create sockets.
func (n *netNS) Do(f func()) {
	done := make(chan struct{})
	n.do <- func() { defer close(done); f() }
	<-done
}

func linkUp(name string) error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq(name)
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return fmt.Errorf("get flags of %s: %w", name, err)
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	if err := unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr); err != nil {
		return fmt.Errorf("set %s up: %w", name, err)
	}
	return nil
}
