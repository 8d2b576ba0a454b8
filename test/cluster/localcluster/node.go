package localcluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Node is one node of the cluster: its own mount and network namespaces
// (cmd/nodens), containerd and kubelet. The first node also runs the
// control plane and whatever the test starts with Cluster.StartProcess.
type Node struct {
	// Name is the Kubernetes node name; IP its address on the cluster
	// network; PodCIDR the subnet of its CNI bridge.
	Name, IP, PodCIDR string
	// Root holds the node's files (overlay layers, kubelet dir,
	// containerd); ContainerdSocket is its containerd's.
	Root             string
	ContainerdSocket string
	// Kubelet is the node's kubelet; its log records the volume operations.
	Kubelet *Process

	index      int
	c          *Cluster
	cgroupName string
	nodeNS     *nodeNS
	containerd *Process
	procs      []*Process // started by the test; stopped in reverse
}

// nodeAddress is node i's (0-based) IP: 10.250.0.10, .11, ...
func nodeAddress(i int) string { return fmt.Sprintf("10.250.0.%d", 10+i) }

// nodePodCIDR is node i's pod subnet: 10.252.0.0/24, 10.252.1.0/24, ...
func nodePodCIDR(i int) string { return fmt.Sprintf("10.252.%d.0/24", i) }

func (c *Cluster) newNode(i int) *Node {
	root := filepath.Join(c.Root, "n"+strconv.Itoa(i+1))
	return &Node{
		Name:             fmt.Sprintf("e2e-node-%d", i+1),
		IP:               nodeAddress(i),
		PodCIDR:          nodePodCIDR(i),
		Root:             root,
		ContainerdSocket: filepath.Join(root, "containerd", "containerd.sock"),
		index:            i,
		c:                c,
		cgroupName:       c.cgroupName + "-" + strconv.Itoa(i+1),
	}
}

// start creates the node's namespaces. Files the node must have (the NFS
// shim as mount.nfs) go into the upper layer of their overlay first.
func (n *Node) start() error {
	for dst, src := range n.c.cfg.NodeFiles {
		upper, rel, ok := overlayUpper(n.Root, dst)
		if !ok {
			return fmt.Errorf("node file %s is not under an overlaid directory %v", dst, nodeOverlays)
		}
		if err := CopyFile(src, filepath.Join(upper, rel)); err != nil {
			return err
		}
	}
	kubeletDir := filepath.Join(n.Root, "kubelet")
	binds := []string{kubeletDir + ":/var/lib/kubelet"}
	for _, d := range n.c.cfg.NodeDirs {
		binds = append(binds, n.DirSource(d)+":"+d)
	}
	for _, b := range binds {
		if err := os.MkdirAll(strings.Split(b, ":")[0], 0o755); err != nil {
			return err
		}
	}
	api := net.JoinHostPort(nodeAddress(0), strconv.Itoa(apiServerPort))
	args := []string{
		"-root", n.Root, "-loop-root", n.c.Root, "-tmpfs", "/run",
		"-node-cidr", n.IP + "/24",
		"-service-ip", serviceIP, "-apiserver", api,
		"-cgroup", n.cgroupName,
	}
	if n.index == 0 {
		args = append(args, "-forward", n.c.apiSock+":"+api)
		for name, addr := range n.c.cfg.Forwards {
			args = append(args, "-forward", n.c.ForwardSocket(name)+":"+addr)
		}
	}
	for _, o := range nodeOverlays {
		args = append(args, "-overlay", o)
	}
	for _, b := range binds {
		args = append(args, "-bind", b)
	}
	for _, s := range kubeletSysctls {
		args = append(args, "-sysctl", s)
	}
	ns, err := startNodeNS(n.c.cfg.NodeNS, filepath.Join(n.c.LogDir, n.Name+"-nodens.log"), args)
	if err != nil {
		return err
	}
	n.nodeNS = ns
	return nil
}

// connect joins the nodes' networks: each node's NIC (node0, with its IP)
// is one end of a veth pair; the other ends (node1) all join a bridge in
// the first node's network namespace, which leads nowhere else. Each node
// routes the other nodes' pod subnets to them, as a flat pod network does.
func (c *Cluster) connect() error {
	first := c.Nodes[0]
	type ipCmd struct {
		n    *Node
		argv []string
	}
	cmds := []ipCmd{
		{first, []string{"link", "add", "e2esw", "type", "bridge"}},
		{first, []string{"link", "set", "e2esw", "up"}},
		{first, []string{"link", "set", "node1", "master", "e2esw"}},
	}
	for _, n := range c.Nodes[1:] {
		port := "port" + strconv.Itoa(n.index+1)
		cmds = append(cmds,
			ipCmd{n, []string{"link", "set", "node1", "down"}},
			ipCmd{n, []string{"link", "set", "node1", "name", port}},
			ipCmd{n, []string{"link", "set", port, "netns", strconv.Itoa(first.nodeNS.pid)}},
			ipCmd{first, []string{"link", "set", port, "master", "e2esw"}},
			ipCmd{first, []string{"link", "set", port, "up"}})
	}
	for _, n := range c.Nodes {
		for _, m := range c.Nodes {
			if m != n {
				cmds = append(cmds, ipCmd{n, []string{"route", "add", m.PodCIDR, "via", m.IP, "dev", "node0"}})
			}
		}
	}
	for _, cmd := range cmds {
		args := append([]string{"--target", strconv.Itoa(cmd.n.nodeNS.pid), "--net", "--", "ip"}, cmd.argv...)
		if out, err := exec.Command("nsenter", args...).CombinedOutput(); err != nil {
			return fmt.Errorf("%s: ip %s: %v: %s", cmd.n.Name, strings.Join(cmd.argv, " "), err, bytes.TrimSpace(out))
		}
	}
	return nil
}

// DirSource is the directory of the node's root behind one of
// Config.NodeDirs.
func (n *Node) DirSource(dir string) string {
	return filepath.Join(n.Root, "dirs", strings.ReplaceAll(strings.Trim(dir, "/"), "/", "_"))
}

// Exec runs a command inside the node's mount and network namespaces.
func (n *Node) Exec(ctx context.Context, argv ...string) ([]byte, error) {
	args := append([]string{"--target", strconv.Itoa(n.nodeNS.pid), "--mount", "--net", "--"}, argv...)
	cmd := exec.CommandContext(ctx, "nsenter", args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return out, fmt.Errorf("%s: %s: %v: %s", n.Name, strings.Join(argv, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}

// Ctr runs ctr against the node's containerd, in the k8s.io namespace (the
// one CRI uses).
func (n *Node) Ctr(ctx context.Context, args ...string) ([]byte, error) {
	return n.Exec(ctx, append([]string{"ctr", "--address", n.ContainerdSocket, "--namespace", "k8s.io"}, args...)...)
}

// ImportImage imports a docker-archive tarball for the kubelet to use.
func (n *Node) ImportImage(ctx context.Context, archive string) error {
	_, err := n.Ctr(ctx, "images", "import", archive)
	return err
}

// NodePath is where the test reads or writes a path as the node sees it
// (through nodens' root, in the node's mount namespace).
func (n *Node) NodePath(p string) string {
	return filepath.Join(fmt.Sprintf("/proc/%d/root", n.nodeNS.pid), p)
}

// StartProcess runs a daemon inside the node's namespaces; it is stopped at
// teardown.
func (n *Node) StartProcess(name string, argv, env []string) (*Process, error) {
	p := &Process{Name: name, Log: filepath.Join(n.c.LogDir, name+".log"), argv: argv, env: env}
	if err := p.start(n.nodeNS.pid); err != nil {
		return nil, err
	}
	n.procs = append(n.procs, p)
	return p, nil
}

func (n *Node) startContainerd(ctx context.Context) error {
	conf, err := n.writeContainerdConfig()
	if err != nil {
		return err
	}
	p := &Process{Name: n.Name + "-containerd", Log: filepath.Join(n.c.LogDir, n.Name+"-containerd.log"),
		argv: []string{"containerd", "--config", conf}}
	if err := p.start(n.nodeNS.pid); err != nil {
		return err
	}
	n.containerd = p
	return poll(ctx, time.Minute, func() (bool, error) {
		if exited, err := p.Exited(); exited {
			return false, fmt.Errorf("containerd exited: %v (see %s)", err, p.Log)
		}
		_, err := n.Ctr(ctx, "version")
		return err == nil, nil
	})
}

func (n *Node) kubeletArgv() ([]string, error) {
	conf, err := n.writeKubeletConfig()
	if err != nil {
		return nil, err
	}
	v := n.c.cfg.KubeletVerbosity
	if v == 0 {
		v = 2
	}
	return []string{n.c.cfg.Kube.Path("kubelet"),
		"--config=" + conf,
		"--kubeconfig=" + n.c.pki.path(n.Name+"-kubelet.kubeconfig"),
		"--hostname-override=" + n.Name,
		"--node-ip=" + n.IP,
		"--v=" + strconv.Itoa(v),
	}, nil
}

func (n *Node) startKubelet() error {
	argv, err := n.kubeletArgv()
	if err != nil {
		return err
	}
	p := &Process{Name: n.Name + "-kubelet", Log: filepath.Join(n.c.LogDir, n.Name+"-kubelet.log"), argv: argv}
	if err := p.start(n.nodeNS.pid); err != nil {
		return err
	}
	n.Kubelet = p
	return nil
}

// RestartKubelet stops the node's kubelet (SIGTERM, as a service manager
// would) and starts it again with the same configuration.
func (n *Node) RestartKubelet() error {
	n.Kubelet.Stop(syscall.SIGTERM, 30*time.Second)
	return n.Kubelet.start(n.nodeNS.pid)
}

// StopKubelet stops the node's kubelet for good (a node being removed).
func (n *Node) StopKubelet() {
	n.Kubelet.Stop(syscall.SIGTERM, 30*time.Second)
}

// stopWorkloads stops the kubelet, so it does not restart what is stopped
// next, then every container, then the processes the test started on the
// node, newest first. containerd stays up for the caller to stop last.
func (n *Node) stopWorkloads(ctx context.Context) {
	if n.Kubelet != nil {
		n.Kubelet.Stop(syscall.SIGTERM, 10*time.Second)
	}
	if n.containerd != nil {
		if out, err := n.Ctr(ctx, "tasks", "ls", "-q"); err == nil {
			for _, id := range strings.Fields(string(out)) {
				_, _ = n.Ctr(ctx, "tasks", "kill", "--signal", "SIGKILL", id)
			}
		}
	}
	for i := len(n.procs) - 1; i >= 0; i-- {
		n.procs[i].Stop(syscall.SIGTERM, 10*time.Second)
	}
}

// KillKubelet SIGKILLs the node's kubelet, as a node that dies or hangs
// stops it: nothing of it runs on, and its pods' containers stay as they
// were. StartKubelet brings it back with the same configuration.
func (n *Node) KillKubelet() {
	n.Kubelet.Stop(syscall.SIGKILL, 10*time.Second)
}

// StartKubelet starts a kubelet stopped by KillKubelet or StopKubelet.
func (n *Node) StartKubelet() error {
	return n.Kubelet.start(n.nodeNS.pid)
}
