package localcluster

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestNodeAndContainerdLeaveNoTrace runs the node half of a two-node
// cluster (the namespaces and their network, containerd, an imported
// image, a running container, a mount inside the node, a loop device)
// without the Kubernetes binaries, and checks that Teardown leaves the
// host as it was. It is the quick check of everything the full e2e test
// builds on.
func TestNodeAndContainerdLeaveNoTrace(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	c := bareCluster(ctx, t)
	root := c.Root
	torn := false
	t.Cleanup(func() {
		if !torn {
			_, _ = c.Teardown()
		}
	})
	if err := c.startNodes(ctx); err != nil {
		t.Fatal(err)
	}
	n := c.Nodes[0]

	// The node sees its own /var/lib/kubelet and the placed file; the host
	// sees neither.
	if _, err := os.Stat(n.NodePath("/usr/sbin/mount.nfs")); err != nil {
		t.Errorf("the node has no /usr/sbin/mount.nfs: %v", err)
	}
	if err := os.WriteFile(n.NodePath("/var/lib/kubelet/probe"), []byte("x"), 0o644); err != nil {
		t.Errorf("writing the node's /var/lib/kubelet: %v", err)
	}
	if _, err := os.Stat(filepath.Join(n.Root, "kubelet", "probe")); err != nil {
		t.Errorf("/var/lib/kubelet on the node is not the root's kubelet/: %v", err)
	}
	// A tmpfs mounted inside the node stays there.
	if out, err := n.Exec(ctx, "mount", "-t", "tmpfs", "probe", "/var/lib/kubelet"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), root) {
		t.Errorf("a mount inside the node shows on the host")
	}
	// A container runs, in the cgroup root.
	if out, err := n.Ctr(ctx, "run", "-d", "--cgroup", "/"+n.cgroupName+"/probe", PauseImage, "probe"); err != nil {
		t.Fatalf("ctr run: %v: %s", err, out)
	}
	if out, err := n.Ctr(ctx, "tasks", "ls"); err != nil || !strings.Contains(string(out), "RUNNING") {
		t.Errorf("the probe container is not running: %v: %s", err, out)
	}
	// The network leads nowhere: no default route off the machine.
	if out, err := n.Exec(ctx, "ip", "-o", "route", "get", "1.1.1.1"); err != nil || !strings.Contains(string(out), "dev node0") {
		t.Errorf("route to the outside: %v: %s", err, out)
	}
	// The second node's NIC is a port of the bridge in the first's.
	if out, err := n.Exec(ctx, "ip", "-o", "link", "show", "master", "e2esw"); err != nil || !strings.Contains(string(out), "port2") {
		t.Errorf("node 2 is not on the bridge: %v: %s", err, out)
	}
	// A loop device on a file under the root is detached at teardown.
	loopFile := filepath.Join(root, "loop.img")
	if err := os.WriteFile(loopFile, make([]byte, 1<<20), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("losetup", "--find", "--show", loopFile).CombinedOutput(); err != nil {
		t.Fatalf("losetup: %v: %s", err, out)
	}

	torn = true
	rep, err := c.Teardown()
	if err != nil {
		t.Errorf("teardown: %v", err)
	}
	for _, nr := range rep.NodeNS {
		if nr.Unmounted == 0 || nr.CgroupsRemoved == 0 {
			t.Errorf("teardown undid nothing on a node: %+v", nr)
		}
	}
	if _, err := os.Stat(root); err == nil {
		t.Errorf("root %s is still there", root)
	}
	t.Logf("teardown: %+v in %s", rep.NodeNS, rep.Duration)
}

// bareCluster is a two-node Cluster without the Kubernetes binaries: the
// nodens and pause programs built, a pause image, a placeholder node file.
func bareCluster(ctx context.Context, t *testing.T) *Cluster {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("needs root (namespaces, mounts, cgroups)")
	}
	for _, tool := range []string{"containerd", "ctr", "runc", "nsenter", "ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install containerd runc util-linux iproute2 iptables)", tool)
		}
	}
	wd, _ := os.Getwd()
	module := filepath.Dir(wd)
	bin := t.TempDir()
	if err := GoBuild(ctx, module, bin, "./cmd/nodens", "./cmd/pause"); err != nil {
		t.Fatal(err)
	}
	pauseTar := filepath.Join(bin, "pause.tar")
	img := Image{Tags: []string{PauseImage}, Entrypoint: []string{"/pause"}, Files: map[string]string{"/pause": filepath.Join(bin, "pause")}, Dirs: []string{"/tmp"}}
	if err := img.WriteArchive(pauseTar); err != nil {
		t.Fatal(err)
	}
	shim := filepath.Join(bin, "fake-mount.nfs")
	if err := os.WriteFile(shim, []byte("not a real helper\n"), 0o755); err != nil {
		t.Fatal(err)
	}

	c := &Cluster{cfg: Config{NodeNS: filepath.Join(bin, "nodens"), NodeFiles: map[string]string{"/usr/sbin/mount.nfs": shim}, Logf: t.Logf}, logf: t.Logf, witnessedAt: map[string]bool{}}
	root, err := os.MkdirTemp("", "occ-")
	if err != nil {
		t.Fatal(err)
	}
	c.Root, c.LogDir = root, filepath.Join(root, "logs")
	c.apiSock = filepath.Join(root, "apiserver.sock")
	c.cgroupName = "ontap-csi-e2e-unittest"
	for _, p := range hostWitnesses {
		c.witnessedAt[p] = fileExists(p)
	}
	c.cfg.Nodes = 2
	c.cfg.Archives = []string{pauseTar}
	return c
}
