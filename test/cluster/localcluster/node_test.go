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

// TestNodeAndContainerdLeaveNoTrace runs the node half of a cluster (the
// namespaces, containerd, an imported image, a running container with a
// Bidirectional-style mount inside the node) without the Kubernetes
// binaries, and checks that Teardown leaves the host as it was. It is the
// quick check of everything the full e2e test builds on.
func TestNodeAndContainerdLeaveNoTrace(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root (namespaces, mounts, cgroups)")
	}
	for _, tool := range []string{"containerd", "ctr", "runc", "nsenter", "ip", "iptables"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Fatalf("%s is not installed (apt-get install containerd runc util-linux iproute2 iptables)", tool)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
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
	c.ContainerdSocket = filepath.Join(root, "containerd", "containerd.sock")
	c.apiSock = filepath.Join(root, "apiserver.sock")
	c.cgroupName = "ontap-csi-e2e-unittest"
	for _, p := range hostWitnesses {
		c.witnessedAt[p] = fileExists(p)
	}
	torn := false
	t.Cleanup(func() {
		if !torn {
			_, _ = c.Teardown()
		}
	})
	if err := os.MkdirAll(c.LogDir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := c.startNode(); err != nil {
		t.Fatal(err)
	}
	if err := c.writePKI(); err != nil {
		t.Fatal(err)
	}
	if err := c.writeCNIConfig(); err != nil {
		t.Fatal(err)
	}
	if err := c.startContainerd(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.ImportImage(ctx, pauseTar); err != nil {
		t.Fatal(err)
	}

	// The node sees its own /var/lib/kubelet and the placed file; the host
	// sees neither.
	if _, err := os.Stat(c.NodePath("/usr/sbin/mount.nfs")); err != nil {
		t.Errorf("the node has no /usr/sbin/mount.nfs: %v", err)
	}
	if err := os.WriteFile(c.NodePath("/var/lib/kubelet/probe"), []byte("x"), 0o644); err != nil {
		t.Errorf("writing the node's /var/lib/kubelet: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "kubelet", "probe")); err != nil {
		t.Errorf("/var/lib/kubelet on the node is not the root's kubelet/: %v", err)
	}
	// A tmpfs mounted inside the node stays there.
	if out, err := c.Exec(ctx, "mount", "-t", "tmpfs", "probe", "/var/lib/kubelet"); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if b, _ := os.ReadFile("/proc/self/mountinfo"); strings.Contains(string(b), root) {
		t.Errorf("a mount inside the node shows on the host")
	}
	// A container runs, in the cgroup root.
	if out, err := c.Ctr(ctx, "run", "-d", "--cgroup", "/"+c.cgroupName+"/probe", PauseImage, "probe"); err != nil {
		t.Fatalf("ctr run: %v: %s", err, out)
	}
	if out, err := c.Ctr(ctx, "tasks", "ls"); err != nil || !strings.Contains(string(out), "RUNNING") {
		t.Errorf("the probe container is not running: %v: %s", err, out)
	}
	// The network leads nowhere: no default route off the machine.
	if out, err := c.Exec(ctx, "ip", "-o", "route", "get", "1.1.1.1"); err != nil || !strings.Contains(string(out), "dev node0") {
		t.Errorf("route to the outside: %v: %s", err, out)
	}

	torn = true
	rep, err := c.Teardown()
	if err != nil {
		t.Errorf("teardown: %v", err)
	}
	if rep.NodeNS.Unmounted == 0 || rep.NodeNS.CgroupsRemoved == 0 {
		t.Errorf("teardown undid nothing: %+v", rep.NodeNS)
	}
	if _, err := os.Stat(root); err == nil {
		t.Errorf("root %s is still there", root)
	}
	t.Logf("teardown: %+v in %s", rep.NodeNS, rep.Duration)
}
