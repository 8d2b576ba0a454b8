package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// The tests below run ontap-csi the way Trident's operator objects run it:
// in a "container" whose filesystem has exactly the objects' mounts (remapped
// to temp dirs: the host's /var/lib/kubelet, /var/lib/trident and / stay
// untouched) and the image's layout (/ontap-csi, /trident_orchestrator,
// /bin/tridentctl), in a network namespace shared with the rest of the
// "cluster" like a pod's. The test binary re-executes itself to build such a
// container and then execs the command inside it (runContainer).

const containerEnv = "ONTAP_CSI_TEST_CONTAINER"

// containerSpec describes one container.
type containerSpec struct {
	// Root is an empty directory: a tmpfs private to the container is
	// mounted on it and becomes the container's /.
	Root string
	// Binary is the ontap-csi binary, placed at /ontap-csi.
	Binary string
	Mounts []mountSpec
	// NetNS is the network namespace to join (/proc/<pid>/ns/net); empty
	// means the fresh one the container was started in.
	NetNS string
	// Pause keeps the container's network namespace alive and does nothing
	// else (Kubernetes' pause container).
	Pause bool
	Argv  []string
	Env   []string
}

type mountSpec struct {
	Source, Target string
	ReadOnly       bool
}

// container is a running container process.
type container struct {
	*proc
	netns string
}

// startContainer runs spec in new mount namespace, and a new network
// namespace unless spec.NetNS names one to join.
func startContainer(t *testing.T, spec containerSpec) *container {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root for mount and network namespaces")
	}
	if spec.Root == "" {
		spec.Root = filepath.Join(shortTempDir(t), "root")
		if err := os.Mkdir(spec.Root, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if spec.Binary == "" {
		spec.Binary = binary
	}
	specFile := filepath.Join(t.TempDir(), "container.json")
	data, err := json.Marshal(spec)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(specFile, data, 0o600); err != nil {
		t.Fatal(err)
	}
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(os.Args[0])
	p.cmd.Env = []string{containerEnv + "=" + specFile}
	p.cmd.Stdout, p.cmd.Stderr = p, p
	flags := uintptr(syscall.CLONE_NEWNS)
	if spec.NetNS == "" {
		flags |= syscall.CLONE_NEWNET
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: flags}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() && !spec.Pause {
			t.Logf("%s output:\n%s", strings.Join(spec.Argv, " "), p.logs())
		}
	})
	c := &container{proc: p, netns: spec.NetNS}
	if c.netns == "" {
		c.netns = fmt.Sprintf("/proc/%d/ns/net", p.cmd.Process.Pid)
	}
	return c
}

// startSandbox starts a pause container: a network namespace with a
// loopback interface, for the containers of a "pod" or "cluster" to join.
func startSandbox(t *testing.T) string {
	t.Helper()
	c := startContainer(t, containerSpec{Pause: true})
	// The namespace is ready once lo is up in it.
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(c.logs(), "sandbox ready") {
		if time.Now().After(deadline) {
			t.Fatalf("sandbox did not start: %s", c.logs())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return c.netns
}

// runContainer is the test binary in a container's namespaces: it joins
// the network namespace, builds the filesystem and execs the command.
func runContainer() int {
	var spec containerSpec
	data, err := os.ReadFile(os.Getenv(containerEnv))
	if err == nil {
		err = json.Unmarshal(data, &spec)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "container spec:", err)
		return 1
	}
	// Namespaces are per thread; exec keeps the calling thread's.
	runtime.LockOSThread()
	if err := enterNetNS(spec.NetNS); err != nil {
		fmt.Fprintln(os.Stderr, "network namespace:", err)
		return 1
	}
	if spec.Pause {
		fmt.Println("sandbox ready")
		select {}
	}
	if err := buildRoot(spec); err != nil {
		fmt.Fprintln(os.Stderr, "container filesystem:", err)
		return 1
	}
	argv0 := spec.Argv[0]
	if !strings.Contains(argv0, "/") {
		// As the container runtime does: look the command up in $PATH.
		if argv0, err = lookPath(argv0, spec.Env); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 127
		}
	}
	err = syscall.Exec(argv0, spec.Argv, spec.Env)
	fmt.Fprintln(os.Stderr, "exec:", err)
	return 1
}

// enterNetNS joins path, or, when it is empty, brings up the loopback
// interface of the fresh namespace the process was started in.
func enterNetNS(path string) error {
	if path != "" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		return unix.Setns(int(f.Fd()), unix.CLONE_NEWNET)
	}
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

func buildRoot(spec containerSpec) error {
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_PRIVATE, ""); err != nil {
		return fmt.Errorf("make / private: %w", err)
	}
	root := spec.Root
	if err := unix.Mount("tmpfs", root, "tmpfs", 0, "size=16m,mode=0755"); err != nil {
		return err
	}
	// The image: the binary and the names it answers to.
	if err := bindMount(spec.Binary, filepath.Join(root, "ontap-csi"), true); err != nil {
		return err
	}
	if err := os.Symlink("ontap-csi", filepath.Join(root, "trident_orchestrator")); err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Join(root, "bin"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("/ontap-csi", filepath.Join(root, "bin", tridentctlName)); err != nil {
		return err
	}
	// What every container has, then the pod's mounts.
	mounts := append([]mountSpec{{Source: "/proc", Target: "/proc"}, {Source: "/dev", Target: "/dev"}, {Source: "/sys", Target: "/sys"}}, spec.Mounts...)
	for _, m := range mounts {
		if err := bindMount(m.Source, filepath.Join(root, m.Target), m.ReadOnly); err != nil {
			return fmt.Errorf("%s on %s: %w", m.Source, m.Target, err)
		}
	}
	if err := unix.Chroot(root); err != nil {
		return err
	}
	return os.Chdir("/")
}

func bindMount(src, dst string, readOnly bool) error {
	fi, err := os.Stat(src)
	if err != nil {
		return err
	}
	if fi.IsDir() {
		err = os.MkdirAll(dst, 0o755)
	} else {
		if err = os.MkdirAll(filepath.Dir(dst), 0o755); err == nil {
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY, 0o755); err == nil {
				f.Close()
			}
		}
	}
	if err != nil {
		return err
	}
	if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
		return err
	}
	if readOnly {
		return unix.Mount("", dst, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, "")
	}
	return nil
}

// containerdPath is the PATH of a container whose image sets none.
const containerdPath = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"

func lookPath(name string, env []string) (string, error) {
	path := containerdPath
	for _, e := range env {
		if v, ok := strings.CutPrefix(e, "PATH="); ok {
			path = v
		}
	}
	for _, dir := range filepath.SplitList(path) {
		p := filepath.Join(dir, name)
		if fi, err := os.Stat(p); err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0 {
			return p, nil
		}
	}
	return "", fmt.Errorf("%s: executable file not found in $PATH (%s)", name, path)
}

// inNetNS runs f on a thread in the network namespace at path: sockets f
// creates live in that namespace for good.
func inNetNS(path string, f func() error) error {
	errc := make(chan error, 1)
	go func() {
		runtime.LockOSThread()
		orig, err := os.Open("/proc/thread-self/ns/net")
		if err != nil {
			errc <- err
			return
		}
		defer orig.Close()
		ns, err := os.Open(path)
		if err != nil {
			errc <- err
			runtime.UnlockOSThread()
			return
		}
		defer ns.Close()
		if err := unix.Setns(int(ns.Fd()), unix.CLONE_NEWNET); err != nil {
			errc <- err
			runtime.UnlockOSThread()
			return
		}
		ferr := f()
		if err := unix.Setns(int(orig.Fd()), unix.CLONE_NEWNET); err != nil {
			// The thread stays locked and dies with this goroutine.
			errc <- fmt.Errorf("restoring the network namespace: %w", err)
			return
		}
		runtime.UnlockOSThread()
		errc <- ferr
	}()
	return <-errc
}

// listenIn listens on addr in the network namespace at path.
func listenIn(path, addr string) (net.Listener, error) {
	var l net.Listener
	err := inNetNS(path, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	})
	return l, err
}

// dialerIn dials in the network namespace at path.
func dialerIn(path string) func(ctx context.Context, network, addr string) (net.Conn, error) {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		var c net.Conn
		err := inNetNS(path, func() (err error) {
			var d net.Dialer
			c, err = d.DialContext(ctx, network, addr)
			return err
		})
		return c, err
	}
}
