// Command nodens is the "node" of the local test cluster: a process born in
// a new mount namespace and a new network namespace (the test starts it with
// CLONE_NEWNS|CLONE_NEWNET), which every cluster daemon then joins with
// nsenter. It makes that namespace look like a fresh node without touching
// the real host:
//
//   - "/" becomes a recursive slave, so nothing mounted inside ever
//     propagates back to the host (on a systemd host "/" is shared), and
//     then shared again within the namespace, for the containers'
//     mount propagation;
//   - /run is a fresh tmpfs, and the host directories the kubelet,
//     containerd, CNI and the node plugin write to (/var/lib, /var/log,
//     /opt, /usr/libexec, /usr/sbin) are overlays whose upper layers live
//     in the test's root, so the host's /var/lib/kubelet, /var/lib/cni,
//     /var/log/pods, ... are never created (docs/design/local-cluster.md §6);
//   - directories of the test root can be bind-mounted over paths
//     (/var/lib/kubelet is the test root's kubelet/, on ext4 and not on
//     overlayfs, as the kubelet expects);
//   - the network is loopback plus a veth pair whose both ends stay inside
//     the namespace: the node IP and a default route the kubelet needs, and
//     nothing that leads off the machine (docs/design/local-cluster.md §3.2). A DNAT
//     rule stands in for kube-proxy for the one Service pods use, the API
//     server's "kubernetes" Service;
//   - a cgroup root (one directory per hierarchy) for the kubelet's
//     cgroupRoot, so every container lands below it.
//
// Several nodes each have a nodens; the test joins their NICs on a bridge
// in the first one's network namespace (localcluster.Cluster.connect).
//
// It then prints one JSON line on stdout and waits. A "teardown" line on
// stdin, or stdin closing (the test died, even by SIGKILL or a test
// timeout), makes it sweep: SIGKILL every process in its namespaces and
// cgroups, unmount everything it and the cluster mounted (deepest first),
// detach the loop devices on files under the test root, remove the cgroup
// directories (deepest first), restore the global sysctls
// the kubelet changes, print a JSON report and exit. With the last process
// gone, the kernel frees both namespaces and the veth pair.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/ontap-csi/ontap-csi/test/cluster/internal/loopdev"
)

// listFlag collects a repeated flag.
type listFlag []string

func (l *listFlag) String() string     { return strings.Join(*l, ",") }
func (l *listFlag) Set(v string) error { *l = append(*l, v); return nil }

type config struct {
	root       string   // the test root; overlay layers live in <root>/nodens
	overlays   listFlag // host directories to overlay
	binds      listFlag // src:dst
	tmpfs      listFlag // directories to cover with a fresh tmpfs
	nodeCIDR   string   // node IP with prefix, on the veth
	serviceIP  string   // the "kubernetes" Service ClusterIP
	apiServer  string   // ip:port the Service forwards to
	cgroupName string   // cgroup root created in every hierarchy
	sysctls    listFlag // global sysctls to restore at teardown
	forwards   listFlag // unix-socket:tcp-address
	loopRoot   string   // loop devices on files under it are detached at teardown
}

// Ready is the line printed once the namespace is set up.
type Ready struct {
	PID     int               `json:"pid"`
	Sysctls map[string]string `json:"sysctls"`
}

// Report is the line printed after the sweep.
type Report struct {
	Killed          []string          `json:"killed,omitempty"`
	Unmounted       int               `json:"unmounted"`
	MountsLeft      []string          `json:"mountsLeft,omitempty"`
	CgroupsRemoved  int               `json:"cgroupsRemoved"`
	CgroupsLeft     []string          `json:"cgroupsLeft,omitempty"`
	SysctlsRestored map[string]string `json:"sysctlsRestored,omitempty"`
	Errors          []string          `json:"errors,omitempty"`
}

func main() {
	c := &config{}
	flag.StringVar(&c.root, "root", "", "test root directory")
	flag.Var(&c.overlays, "overlay", "host directory to overlay (repeatable)")
	flag.Var(&c.binds, "bind", "src:dst bind mount (repeatable; dst is created in its overlay)")
	flag.Var(&c.tmpfs, "tmpfs", "directory to cover with a tmpfs (repeatable)")
	flag.StringVar(&c.nodeCIDR, "node-cidr", "10.250.0.10/24", "node IP/prefix on the veth")
	flag.StringVar(&c.serviceIP, "service-ip", "", "ClusterIP of the kubernetes Service")
	flag.StringVar(&c.apiServer, "apiserver", "", "ip:port of the API server behind the Service")
	flag.StringVar(&c.cgroupName, "cgroup", "", "cgroup root to create in every hierarchy")
	flag.Var(&c.sysctls, "sysctl", "global sysctl (dotted name) to restore at teardown (repeatable)")
	flag.Var(&c.forwards, "forward", "unix-socket-path:tcp-address to forward into the namespace (repeatable)")
	flag.StringVar(&c.loopRoot, "loop-root", "", "detach loop devices on files under this directory at teardown (default -root)")
	flag.Parse()
	if c.root == "" || c.cgroupName == "" || strings.Contains(c.cgroupName, "/") {
		fmt.Fprintln(os.Stderr, "nodens: -root and a plain -cgroup name are required")
		os.Exit(2)
	}

	// Keep running whatever the test does to its process group; only stdin
	// and SIGKILL end this process.
	signal.Ignore(syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGPIPE)

	baseline, err := mountIDs()
	if err != nil {
		fail(err)
	}
	saved := readSysctls(c.sysctls)
	if err := setup(c); err != nil {
		// Undo what was done and say why.
		rep := sweep(c, baseline, saved)
		rep.Errors = append([]string{err.Error()}, rep.Errors...)
		emit(rep)
		os.Exit(1)
	}
	for _, f := range c.forwards {
		if err := forward(f); err != nil {
			rep := sweep(c, baseline, saved)
			rep.Errors = append([]string{err.Error()}, rep.Errors...)
			emit(rep)
			os.Exit(1)
		}
	}
	emit(Ready{PID: os.Getpid(), Sysctls: saved})

	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		if strings.TrimSpace(in.Text()) == "teardown" {
			break
		}
	}
	emit(sweep(c, baseline, saved))
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "nodens: %v\n", err)
	os.Exit(1)
}

func emit(v any) {
	b, _ := json.Marshal(v)
	fmt.Println(string(b))
}

func setup(c *config) error {
	// Nothing mounted here may reach the host (slave), but mounts must
	// propagate between this namespace and the containers' (shared): a
	// Bidirectional hostPath needs a shared source, and CSI mounts made in
	// the node plugin's container must show here. Mounts made below
	// inherit the shared state.
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SLAVE, ""); err != nil {
		return fmt.Errorf("make / a slave: %w", err)
	}
	if err := unix.Mount("", "/", "", unix.MS_REC|unix.MS_SHARED, ""); err != nil {
		return fmt.Errorf("make / shared: %w", err)
	}
	for _, dir := range c.tmpfs {
		if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, "mode=755"); err != nil {
			return fmt.Errorf("tmpfs on %s: %w", dir, err)
		}
	}
	for _, dir := range c.overlays {
		if err := overlay(c.root, dir); err != nil {
			return err
		}
	}
	for _, b := range c.binds {
		src, dst, ok := strings.Cut(b, ":")
		if !ok {
			return fmt.Errorf("-bind %q: want src:dst", b)
		}
		if err := os.MkdirAll(dst, 0o755); err != nil {
			return err
		}
		if err := unix.Mount(src, dst, "", unix.MS_BIND|unix.MS_REC, ""); err != nil {
			return fmt.Errorf("bind %s on %s: %w", src, dst, err)
		}
	}
	if err := network(c); err != nil {
		return err
	}
	return makeCgroups(c.cgroupName)
}

// overlay puts a copy-on-write layer over a host directory; the upper layer
// may already hold files the test placed there (the NFS shim in /usr/sbin).
func overlay(root, dir string) error {
	base := filepath.Join(root, "nodens", "overlay", strings.ReplaceAll(strings.Trim(dir, "/"), "/", "_"))
	upper, work := filepath.Join(base, "upper"), filepath.Join(base, "work")
	for _, d := range []string{upper, work} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	opts := "lowerdir=" + dir + ",upperdir=" + upper + ",workdir=" + work
	if err := unix.Mount("overlay", dir, "overlay", 0, opts); err != nil {
		return fmt.Errorf("overlay on %s: %w", dir, err)
	}
	return nil
}

func network(c *config) error {
	ip, _, err := net.ParseCIDR(c.nodeCIDR)
	if err != nil {
		return fmt.Errorf("-node-cidr: %w", err)
	}
	cmds := [][]string{
		{"ip", "link", "set", "lo", "up"},
		// Both ends stay here: the node NIC leads nowhere.
		{"ip", "link", "add", "node0", "type", "veth", "peer", "name", "node1"},
		{"ip", "addr", "add", c.nodeCIDR, "dev", "node0"},
		{"ip", "link", "set", "node0", "up"},
		{"ip", "link", "set", "node1", "up"},
		// The kubelet picks its node IP from the default route.
		{"ip", "route", "add", "default", "dev", "node0", "src", ip.String()},
	}
	if c.serviceIP != "" && c.apiServer != "" {
		host, port, err := net.SplitHostPort(c.apiServer)
		if err != nil {
			return fmt.Errorf("-apiserver: %w", err)
		}
		for _, chain := range []string{"OUTPUT", "PREROUTING"} {
			cmds = append(cmds, []string{"iptables", "-w", "-t", "nat", "-A", chain,
				"-d", c.serviceIP, "-p", "tcp", "--dport", "443",
				"-j", "DNAT", "--to-destination", net.JoinHostPort(host, port)})
		}
	}
	for _, argv := range cmds {
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: %v: %s", strings.Join(argv, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// forward serves a unix socket (reachable from the host, which shares the
// file system) that connects to a TCP address inside the namespace: that is
// how the test reaches the API server without the network namespace ever
// reaching out.
func forward(spec string) error {
	sock, addr, ok := strings.Cut(spec, ":")
	if !ok {
		return fmt.Errorf("-forward %q: want socket-path:host:port", spec)
	}
	_ = os.Remove(sock)
	l, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer in.Close()
				out, err := net.DialTimeout("tcp", addr, 10*time.Second)
				if err != nil {
					return
				}
				defer out.Close()
				done := make(chan struct{}, 2)
				go func() { _, _ = io.Copy(out, in); closeWrite(out); done <- struct{}{} }()
				go func() { _, _ = io.Copy(in, out); closeWrite(in); done <- struct{}{} }()
				<-done
				<-done
			}()
		}
	}()
	return nil
}

func closeWrite(c net.Conn) {
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		_ = cw.CloseWrite()
	}
}

// cgroupHierarchies lists the mounted cgroup hierarchies (v1 controllers and
// the hybrid unified one).
func cgroupHierarchies() ([]string, error) {
	entries, err := os.ReadDir("/sys/fs/cgroup")
	if err != nil {
		return nil, err
	}
	var out []string
	for _, e := range entries {
		p := filepath.Join("/sys/fs/cgroup", e.Name())
		var st unix.Statfs_t
		if !e.IsDir() || unix.Statfs(p, &st) != nil {
			continue
		}
		if st.Type == unix.CGROUP_SUPER_MAGIC || st.Type == unix.CGROUP2_SUPER_MAGIC {
			out = append(out, p)
		}
	}
	return out, nil
}

func makeCgroups(name string) error {
	hs, err := cgroupHierarchies()
	if err != nil {
		return err
	}
	for _, h := range hs {
		dir := filepath.Join(h, name)
		if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
			return fmt.Errorf("cgroup %s: %w", dir, err)
		}
		// A new cpuset cgroup has no CPUs or memory nodes; nothing can
		// join it until they are copied from the parent.
		if filepath.Base(h) == "cpuset" {
			for _, f := range []string{"cpuset.cpus", "cpuset.mems"} {
				v, err := os.ReadFile(filepath.Join(h, f))
				if err != nil {
					return err
				}
				if err := os.WriteFile(filepath.Join(dir, f), v, 0o644); err != nil {
					return fmt.Errorf("%s/%s: %w", dir, f, err)
				}
			}
		}
	}
	return nil
}

func sysctlPath(name string) string {
	return filepath.Join("/proc/sys", strings.ReplaceAll(name, ".", "/"))
}

func readSysctls(names []string) map[string]string {
	out := map[string]string{}
	for _, n := range names {
		if v, err := os.ReadFile(sysctlPath(n)); err == nil {
			out[n] = strings.TrimSpace(string(v))
		}
	}
	return out
}

// sweep undoes everything; it never stops at the first error.
func sweep(c *config, baseline map[int]bool, saved map[string]string) Report {
	rep := Report{SysctlsRestored: map[string]string{}}
	errorf := func(format string, args ...any) { rep.Errors = append(rep.Errors, fmt.Sprintf(format, args...)) }

	rep.Killed = killAll(c.cgroupName, errorf)

	// Deepest first, then newest first for mounts stacked on one path.
	ms, err := mounts()
	if err != nil {
		errorf("mountinfo: %v", err)
	}
	var ours []mountEntry
	for _, m := range ms {
		if !baseline[m.id] {
			ours = append(ours, m)
		}
	}
	sort.Slice(ours, func(i, j int) bool {
		di, dj := strings.Count(ours[i].point, "/"), strings.Count(ours[j].point, "/")
		if di != dj {
			return di > dj
		}
		return ours[i].id > ours[j].id
	})
	for _, m := range ours {
		if err := unix.Unmount(m.point, 0); err != nil && !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOENT) {
			if err := unix.Unmount(m.point, unix.MNT_DETACH); err != nil && !errors.Is(err, unix.EINVAL) {
				errorf("umount %s: %v", m.point, err)
				continue
			}
		}
		rep.Unmounted++
	}
	if ms, err := mounts(); err == nil {
		for _, m := range ms {
			if !baseline[m.id] {
				rep.MountsLeft = append(rep.MountsLeft, m.point)
			}
		}
	}

	// Loop devices are global: the iSCSI shim's, on the simulator's LUN
	// files, would outlive the namespaces. Unmounted above, so free now.
	loopRoot := c.loopRoot
	if loopRoot == "" {
		loopRoot = c.root
	}
	for _, err := range loopdev.DetachUnder(loopRoot) {
		errorf("%v", err)
	}

	rep.CgroupsRemoved, rep.CgroupsLeft = removeCgroups(c.cgroupName, errorf)

	for name, v := range saved {
		cur, err := os.ReadFile(sysctlPath(name))
		if err == nil && strings.TrimSpace(string(cur)) == v {
			continue
		}
		if err := os.WriteFile(sysctlPath(name), []byte(v), 0o644); err != nil {
			errorf("sysctl %s=%s: %v", name, v, err)
			continue
		}
		rep.SysctlsRestored[name] = strings.TrimSpace(string(cur)) + " -> " + v
	}
	return rep
}

// killAll SIGKILLs every other process in this mount or network namespace
// (daemons, shims, the simulator) and in the cgroup root (containers, which
// have namespaces of their own), until none is left.
func killAll(cgroupName string, errorf func(string, ...any)) []string {
	self := os.Getpid()
	myMnt, _ := nsID(self, "mnt")
	myNet, _ := nsID(self, "net")
	seen := map[int]string{}
	deadline := time.Now().Add(60 * time.Second)
	for {
		pids := map[int]bool{}
		entries, _ := os.ReadDir("/proc")
		for _, e := range entries {
			pid, err := strconv.Atoi(e.Name())
			if err != nil || pid == self || zombie(pid) {
				continue
			}
			if mnt, err := nsID(pid, "mnt"); err == nil && mnt == myMnt {
				pids[pid] = true
			} else if net, err := nsID(pid, "net"); err == nil && net == myNet {
				pids[pid] = true
			}
		}
		hs, _ := cgroupHierarchies()
		for _, h := range hs {
			_ = filepath.WalkDir(filepath.Join(h, cgroupName), func(p string, d fs.DirEntry, err error) error {
				if err != nil || !d.IsDir() {
					return nil
				}
				b, _ := os.ReadFile(filepath.Join(p, "cgroup.procs"))
				for _, f := range strings.Fields(string(b)) {
					if pid, err := strconv.Atoi(f); err == nil && pid != self && !zombie(pid) {
						pids[pid] = true
					}
				}
				return nil
			})
		}
		if len(pids) == 0 {
			break
		}
		if time.Now().After(deadline) {
			errorf("processes still alive after 60 s: %v", keys(pids))
			break
		}
		for pid := range pids {
			if _, ok := seen[pid]; !ok {
				comm, _ := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid))
				seen[pid] = fmt.Sprintf("%d:%s", pid, strings.TrimSpace(string(comm)))
			}
			_ = unix.Kill(pid, unix.SIGKILL)
		}
		// Reap our own children (none expected) and give the kernel time.
		var ws unix.WaitStatus
		for {
			if p, _ := unix.Wait4(-1, &ws, unix.WNOHANG, nil); p <= 0 {
				break
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	out := make([]string, 0, len(seen))
	for _, s := range seen {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// zombie reports a process that has exited and waits to be reaped by its
// parent; it can no longer be killed and holds nothing.
func zombie(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	// The state follows the parenthesised command name, which may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	return i < 0 || i+2 >= len(b) || b[i+2] == 'Z' || b[i+2] == 'X'
}

func keys(m map[int]bool) []int {
	out := make([]int, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Ints(out)
	return out
}

func nsID(pid int, ns string) (string, error) {
	return os.Readlink(fmt.Sprintf("/proc/%d/ns/%s", pid, ns))
}

// removeCgroups removes the cgroup root's directories, deepest first. An
// emptied cgroup can stay busy for a moment after its last process died.
func removeCgroups(name string, errorf func(string, ...any)) (int, []string) {
	hs, _ := cgroupHierarchies()
	var dirs []string
	for _, h := range hs {
		_ = filepath.WalkDir(filepath.Join(h, name), func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
	}
	sort.Slice(dirs, func(i, j int) bool { return strings.Count(dirs[i], "/") > strings.Count(dirs[j], "/") })
	removed := 0
	var left []string
	for _, d := range dirs {
		var err error
		for i := 0; i < 50; i++ {
			if err = unix.Rmdir(d); err == nil || errors.Is(err, unix.ENOENT) {
				break
			}
			time.Sleep(100 * time.Millisecond)
		}
		if err != nil && !errors.Is(err, unix.ENOENT) {
			errorf("rmdir %s: %v", d, err)
			left = append(left, d)
			continue
		}
		removed++
	}
	return removed, left
}

type mountEntry struct {
	id    int
	point string
}

func mounts() ([]mountEntry, error) {
	b, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		return nil, err
	}
	var out []mountEntry
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 {
			continue
		}
		id, err := strconv.Atoi(f[0])
		if err != nil {
			continue
		}
		out = append(out, mountEntry{id: id, point: unescapeMountPath(f[4])})
	}
	return out, nil
}

func mountIDs() (map[int]bool, error) {
	ms, err := mounts()
	if err != nil {
		return nil, err
	}
	out := map[int]bool{}
	for _, m := range ms {
		out[m.id] = true
	}
	return out, nil
}

// unescapeMountPath undoes mountinfo's octal escapes (\040 for a space).
func unescapeMountPath(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}
