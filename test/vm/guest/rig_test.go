package guest

import (
	"bufio"
	"context"
	"encoding/base64"
	"encoding/json"
	"io"
	"net"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// The VM's node: its address (the source of its connections to the data
// LIFs, test/vm/init.sh) and its initiator name.
const (
	nodeID = "node-1"
	nodeIP = "127.0.0.20"
)

// bin is where test/vm put the binaries: $ONTAP_CSI_VM_GUEST.
func bin(t testing.TB, name string) string {
	t.Helper()
	dir := os.Getenv("ONTAP_CSI_VM_GUEST")
	if dir == "" {
		t.Skip("runs inside the VM of test/vm")
	}
	return filepath.Join(dir, name)
}

func ctxT(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// sim is ontap-sim with its kernel data plane, serving HTTPS on the
// loopback; its data LIFs are the VM's aliases (127.0.0.10, .11, .12).
type sim struct {
	url, dataDir string
	ca           []byte
	cmd          *exec.Cmd
}

func startSim(t testing.TB, root string) *sim {
	t.Helper()
	s := &sim{dataDir: filepath.Join(root, "sim")}
	s.cmd = exec.Command(bin(t, "ontap-sim"), "--dataplane=kernel", "--listen=127.0.0.1:0", "--data-dir="+s.dataDir, "--log-level=debug")
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logFile, err := os.Create(filepath.Join(os.Getenv("ONTAP_CSI_VM_OUT"), "ontap-sim.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = logFile
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		// SIGTERM: the simulator removes its LIO objects and exports.
		_ = s.cmd.Process.Signal(syscall.SIGTERM)
		if err := s.cmd.Wait(); err != nil {
			t.Errorf("ontap-sim: %v", err)
		}
		logFile.Close()
		assertNoKernelObjects(t)
	})
	line, err := bufio.NewReader(out).ReadString('\n')
	if !strings.HasPrefix(line, "listening on ") {
		t.Fatalf("ontap-sim: %q, %v (log: ontap-sim.log)", line, err)
	}
	go io.Copy(io.Discard, out)
	s.url = strings.TrimSpace(strings.TrimPrefix(line, "listening on "))
	if s.ca, err = os.ReadFile(filepath.Join(s.dataDir, "tls", "ca.pem")); err != nil {
		t.Fatal(err)
	}
	return s
}

// assertNoKernelObjects fails unless the simulator left nothing in LIO or
// the export table.
func assertNoKernelObjects(t testing.TB) {
	t.Helper()
	if left, _ := filepath.Glob("/sys/kernel/config/target/iscsi/iqn.1992-08.com.netapp:*"); len(left) > 0 {
		t.Errorf("LIO targets left after the simulator stopped: %v", left)
	}
	if left, _ := filepath.Glob("/sys/kernel/config/target/core/fileio_*/*/enable"); len(left) > 0 {
		t.Errorf("LIO backstores left after the simulator stopped: %v", left)
	}
	if etab, _ := os.ReadFile("/var/lib/nfs/etab"); len(strings.TrimSpace(string(etab))) > 0 {
		t.Errorf("exports left after the simulator stopped:\n%s", etab)
	}
}

// writeBackend writes a Trident backend config for driver on s.
func (s *sim) writeBackend(t testing.TB, dir, driver string, extra map[string]any) string {
	t.Helper()
	u, err := url.Parse(s.url)
	if err != nil {
		t.Fatal(err)
	}
	cfg := map[string]any{
		"version": 1, "storageDriverName": driver, "backendName": driver + "-sim",
		"managementLIF": u.Host, "svm": "svm0", "username": "admin", "password": "password",
		"trustedCACertificate": base64.StdEncoding.EncodeToString(s.ca), "storagePrefix": "trident_",
	}
	for k, v := range extra {
		cfg[k] = v
	}
	data, _ := json.Marshal(cfg)
	path := filepath.Join(dir, driver+".json")
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// plugin is the real ontap-csi, allInOne, on the VM's real /dev and /sys
// with the VM's iscsiadm, multipath and mount.nfs.
type plugin struct {
	csi.ControllerClient
	csi.NodeClient
	roots plugintest.Roots
}

func startPlugin(t testing.TB, roots plugintest.Roots, backend string) *plugin {
	t.Helper()
	logFile, err := os.Create(filepath.Join(os.Getenv("ONTAP_CSI_VM_OUT"), "ontap-csi.log"))
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin(t, "ontap-csi"),
		"--csi_role=allInOne", "--csi_endpoint=unix://"+roots.Socket, "--csi_node_name="+nodeID,
		"--kubelet-dir="+roots.KubeletDir, "--tracking-dir="+roots.TrackingDir, "--lock-dir="+roots.LockDir,
		"--host-root=/", "--rest=false", "--log_level=debug", "--backend-config="+backend, "--node-ips="+nodeIP,
		// Generous: udev and multipathd under TCG on a loaded machine.
		"--iscsi-device-timeout=2m")
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		logFile.Close()
	})
	// Serving (the socket answers) and, allInOne, its node known to its
	// controller: these two come in either order.
	for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(100 * time.Millisecond) {
		log, _ := os.ReadFile(logFile.Name())
		if c, err := net.Dial("unix", roots.Socket); err == nil {
			c.Close()
			if strings.Contains(string(log), "node info reported to the controller") {
				break
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("ontap-csi did not start (ontap-csi.log)")
		}
	}
	conn, err := grpc.NewClient("unix://"+roots.Socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return &plugin{ControllerClient: csi.NewControllerClient(conn), NodeClient: csi.NewNodeClient(conn), roots: roots}
}

// Kubelet's paths for a volume.
func (p *plugin) staging(t testing.TB, vol string) string {
	t.Helper()
	dir := filepath.Join(p.roots.KubeletDir, "plugins/kubernetes.io/csi/pv", vol, "globalmount")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (p *plugin) target(t testing.TB, pod, vol string) string {
	t.Helper()
	dir := filepath.Join(p.roots.KubeletDir, "pods", pod, "volumes/kubernetes.io~csi", vol, "mount")
	if err := os.MkdirAll(filepath.Dir(dir), 0o750); err != nil {
		t.Fatal(err)
	}
	return dir
}

func mountCap(fsType string, mode csi.VolumeCapability_AccessMode_Mode) *csi.VolumeCapability {
	return &csi.VolumeCapability{
		AccessType: &csi.VolumeCapability_Mount{Mount: &csi.VolumeCapability_MountVolume{FsType: fsType}},
		AccessMode: &csi.VolumeCapability_AccessMode{Mode: mode},
	}
}

// run runs a host tool and returns its output.
func run(t testing.TB, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// mountsOfType lists the mount points of file system type fsType.
func mountsOfType(t testing.TB, fsType string) []string {
	t.Helper()
	data, err := os.ReadFile("/proc/self/mounts")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		if f := strings.Fields(line); len(f) > 2 && f[2] == fsType {
			out = append(out, f[1])
		}
	}
	return out
}
