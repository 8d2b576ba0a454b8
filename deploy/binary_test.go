//go:build linux

package deploy

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// The real binary, started with exactly the command, arguments, environment
// and mounts of the rendered node DaemonSet and controller Deployment, in a
// filesystem that holds only the binary (as the image does) under a
// read-only root. Host paths live under the test's temp dir; kubelet's dir
// is <tmp>/host/var/lib/kubelet, never the machine's own.

func TestBinaryRunsAsRenderedNodeDaemonSet(t *testing.T) {
	requireRoot(t)
	ds := get[*appsv1.DaemonSet](t, kustomize(t, "kustomize/base"), nodeDaemonSet)
	host := shortTempDir(t)
	ns := newNetNS(t)
	p := startPod(t, &ds.Spec.Template.Spec, mainContainer, host, ns, nil)

	// kubelet dials the endpoint at its host path.
	endpoint := p.hostPathOf(t, strings.TrimPrefix(p.arg(t, "--csi_endpoint"), "unix://"))
	p.waitCSI(t, endpoint)
	_, port, _ := net.SplitHostPort(p.arg(t, "--metrics-address"))
	p.waitHTTP(t, ns, "127.0.0.1:"+port, "/healthz")

	grace := time.Duration(*ds.Spec.Template.Spec.TerminationGracePeriodSeconds) * time.Second
	p.stop(t, grace)
}

func TestBinaryRunsAsRenderedControllerDeployment(t *testing.T) {
	requireRoot(t)
	d := get[*appsv1.Deployment](t, kustomize(t, "kustomize/base"), controllerName)
	host := shortTempDir(t)
	ns := newNetNS(t)

	// The example backend, pointed at an ONTAP simulator inside the pod's
	// network namespace (as a managementLIF on the cluster network would be).
	s, err := ontapsim.New(ontapsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var url string
	ns.Do(func() { url, err = s.Start("127.0.0.1:0", true) })
	if err != nil {
		t.Fatal(err)
	}
	backend := exampleBackend(t, "examples/backend-ontap-nas.yaml", map[string]any{
		"managementLIF":        strings.TrimPrefix(url, "https://"),
		"dataLIF":              "127.0.0.10",
		"svm":                  "svm0",
		"username":             "admin",
		"password":             "password",
		"trustedCACertificate": base64.StdEncoding.EncodeToString(s.CACertificatePEM()),
	})
	secrets := map[string]map[string][]byte{"ontap-csi-backends": {"backend.json": backend}}
	p := startPod(t, &d.Spec.Template.Spec, mainContainer, host, ns, secrets)

	endpoint := p.hostPathOf(t, strings.TrimPrefix(p.arg(t, "--csi_endpoint"), "unix://"))
	p.waitCSI(t, endpoint)
	_, port, _ := net.SplitHostPort(p.arg(t, "--metrics-address"))
	p.waitHTTP(t, ns, "127.0.0.1:"+port, "/healthz")
	p.stop(t, 30*time.Second) // the Deployment's default grace period
}

// The uninstall DaemonSet's init container: `ontap-csi deregister` with its
// rendered arguments finds the plugin and registration dirs through its
// mounts, and finishes (exit 0) on a node whose plugin is gone, so the pod
// turns Ready and the uninstall goes on.
func TestBinaryRunsAsRenderedDeregisterInitContainer(t *testing.T) {
	requireRoot(t)
	ds := get[*appsv1.DaemonSet](t, kustomize(t, "kustomize/uninstall"), deregisterDS)
	host := shortTempDir(t)
	// The registration socket of a node plugin that is no longer running.
	regDir := filepath.Join(host, "var/lib/kubelet/plugins_registry")
	if err := os.MkdirAll(regDir, 0o755); err != nil {
		t.Fatal(err)
	}
	l, err := net.Listen("unix", filepath.Join(regDir, driverName+"-g1-reg.sock"))
	if err != nil {
		t.Fatal(err)
	}
	l.(*net.UnixListener).SetUnlinkOnClose(false)
	l.Close()

	p := startPod(t, &ds.Spec.Template.Spec, "deregister", host, newNetNS(t), nil)
	select {
	case <-p.exited:
		if p.err != nil {
			t.Fatalf("deregister failed: %v\n%s", p.err, p.out.String())
		}
	case <-time.After(2 * time.Minute):
		t.Fatalf("deregister did not finish:\n%s", p.out.String())
	}
	if _, err := os.Stat(filepath.Join(regDir, driverName+"-g1-reg.sock")); !os.IsNotExist(err) {
		t.Errorf("the stale registration socket is still there (%v):\n%s", err, p.out.String())
	}
}

// shortTempDir is a temp dir with a short path: the fake host's sockets,
// dialled from outside the container, must fit sun_path (107 bytes), which a
// t.TempDir() named after the test does not leave room for.
func shortTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "ocsi-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: mount and network namespaces")
	}
}

// exampleBackend returns the backend config of an example Secret with some
// keys replaced.
func exampleBackend(t *testing.T, file string, set map[string]any) []byte {
	t.Helper()
	secret := get[*corev1.Secret](t, readObjects(t, file), "ontap-csi-backends")
	var cfg map[string]any
	if err := json.Unmarshal([]byte(secret.StringData["backend.json"]), &cfg); err != nil {
		t.Fatal(err)
	}
	for k, v := range set {
		cfg[k] = v
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// ---- the binary ----

var (
	binaryOnce sync.Once
	binaryDir  string
	binaryPath string
	binaryErr  error
)

// ontapCSIBinary is $ONTAP_CSI_BINARY (make passes bin/ontap-csi) or else
// ./cmd/ontap-csi built once per test run like `make build` and the
// Dockerfile do (static, so that it runs in a root without a libc; the same
// flags, so that it shares their build cache).
func ontapCSIBinary(t *testing.T) string {
	t.Helper()
	binaryOnce.Do(func() {
		if p := os.Getenv("ONTAP_CSI_BINARY"); p != "" {
			binaryPath, binaryErr = filepath.Abs(p)
			return
		}
		if binaryDir, binaryErr = os.MkdirTemp("", "ontap-csi-deploy-test-"); binaryErr != nil {
			return
		}
		binaryPath = filepath.Join(binaryDir, "ontap-csi")
		cmd := exec.Command("go", "build", "-trimpath", "-o", binaryPath, "./cmd/ontap-csi")
		cmd.Dir = ".."
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if out, err := cmd.CombinedOutput(); err != nil {
			binaryErr = fmt.Errorf("go build ./cmd/ontap-csi: %v\n%s", err, out)
		}
	})
	if binaryErr != nil {
		t.Fatal(binaryErr)
	}
	return binaryPath
}

func cleanupBinary() {
	if binaryDir != "" {
		os.RemoveAll(binaryDir)
	}
}

// ---- the pod ----

type pod struct {
	cmd    *exec.Cmd
	args   []string
	mounts []bindMount
	out    *syncBuffer
	exited chan struct{}
	err    error // set when exited is closed
}

// startPod runs one container of spec the way kubelet would: the volumes
// become bind mounts (hostPath under host, emptyDir and Secret volumes in
// temp dirs), the environment is resolved with a fake downward API and
// $(VAR) references in command and args are expanded.
func startPod(t *testing.T, spec *corev1.PodSpec, container, host string, ns *netNS, secrets map[string]map[string][]byte) *pod {
	t.Helper()
	var c *corev1.Container
	for _, list := range [][]corev1.Container{spec.InitContainers, spec.Containers} {
		for i := range list {
			if list[i].Name == container {
				c = &list[i]
			}
		}
	}
	if c == nil {
		t.Fatalf("no container %s", container)
	}
	env := resolveEnv(t, c.Env, fakePod{nodeName: "node-1", podName: "ontap-csi-x1", podUID: "7d0c7c9e-0000-4000-8000-000000000001", namespace: namespace})
	argv := expandAll(append(append([]string{}, c.Command...), c.Args...), env)
	if len(c.Command) == 0 {
		t.Fatalf("%s has no command: the image's entrypoint would run", container)
	}

	tmp := t.TempDir()
	rootfs := filepath.Join(tmp, "rootfs")
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		t.Fatal(err)
	}
	// The image: the binary and the name Trident's objects start it by.
	mounts := []bindMount{{Source: ontapCSIBinary(t), Target: "/ontap-csi", ReadOnly: true}}
	if err := os.Symlink("ontap-csi", filepath.Join(rootfs, "trident_orchestrator")); err != nil {
		t.Fatal(err)
	}
	for _, m := range c.VolumeMounts {
		src := volumeSource(t, spec, m.Name, host, tmp, secrets)
		mounts = append(mounts, bindMount{Source: src, Target: m.MountPath, ReadOnly: m.ReadOnly})
	}
	readOnlyRoot := c.SecurityContext != nil && c.SecurityContext.ReadOnlyRootFilesystem != nil && *c.SecurityContext.ReadOnlyRootFilesystem

	var envList []string
	for k, v := range env {
		envList = append(envList, k+"="+v)
	}
	specJSON, err := json.Marshal(containerSpec{
		Rootfs: rootfs, Mounts: mounts, ReadOnlyRootfs: readOnlyRoot, NetNS: ns.path, Argv: argv, Env: envList,
	})
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	p := &pod{args: argv[1:], mounts: mounts, out: &syncBuffer{}, exited: make(chan struct{})}
	p.cmd = exec.Command(self)
	p.cmd.Env = []string{containerInitEnv + "=" + string(specJSON)}
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNS, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.exited) }()
	t.Cleanup(func() {
		select {
		case <-p.exited:
		default:
			_ = p.cmd.Process.Kill()
			<-p.exited
		}
		if t.Failed() {
			t.Logf("%s output:\n%s", container, p.out.String())
		}
	})
	t.Logf("started %s: %s", container, strings.Join(argv, " "))
	return p
}

// volumeSource is where a pod volume's content lives on the (fake) host.
func volumeSource(t *testing.T, spec *corev1.PodSpec, name, host, tmp string, secrets map[string]map[string][]byte) string {
	t.Helper()
	for _, v := range spec.Volumes {
		if v.Name != name {
			continue
		}
		switch {
		case v.HostPath != nil:
			// A real node has the Directory ones; DirectoryOrCreate ones
			// kubelet creates. Either way the directory exists at start.
			src := filepath.Join(host, v.HostPath.Path)
			if err := os.MkdirAll(src, 0o755); err != nil {
				t.Fatal(err)
			}
			return src
		case v.EmptyDir != nil:
			src := filepath.Join(tmp, "emptydir", name)
			if err := os.MkdirAll(src, 0o777); err != nil {
				t.Fatal(err)
			}
			return src
		case v.Secret != nil:
			data, ok := secrets[v.Secret.SecretName]
			if !ok {
				t.Fatalf("volume %s: no test data for Secret %s", name, v.Secret.SecretName)
			}
			src := filepath.Join(tmp, "secret", name)
			if err := os.MkdirAll(src, 0o755); err != nil {
				t.Fatal(err)
			}
			mode := os.FileMode(0o644)
			if v.Secret.DefaultMode != nil {
				mode = os.FileMode(*v.Secret.DefaultMode)
			}
			for k, b := range data {
				if err := os.WriteFile(filepath.Join(src, k), b, mode); err != nil {
					t.Fatal(err)
				}
			}
			return src
		default:
			t.Fatalf("volume %s: unsupported source %s", name, toYAML(v.VolumeSource))
		}
	}
	t.Fatalf("no volume %s", name)
	return ""
}

func (p *pod) arg(t *testing.T, name string) string { t.Helper(); return argValue(t, p.args, name) }

// hostPathOf maps a path in the container to the host, through the mounts.
func (p *pod) hostPathOf(t *testing.T, containerPath string) string {
	t.Helper()
	best := -1
	for i, m := range p.mounts {
		if (containerPath == m.Target || strings.HasPrefix(containerPath, strings.TrimSuffix(m.Target, "/")+"/")) &&
			(best < 0 || len(m.Target) > len(p.mounts[best].Target)) {
			best = i
		}
	}
	if best < 0 {
		t.Fatalf("%s is on the container's read-only root, not on a volume", containerPath)
	}
	m := p.mounts[best]
	return filepath.Join(m.Source, strings.TrimPrefix(containerPath, m.Target))
}

// waitCSI waits until the endpoint answers GetPluginInfo with our driver.
func (p *pod) waitCSI(t *testing.T, socket string) {
	t.Helper()
	conn, err := grpc.NewClient("unix://"+socket, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	id := csi.NewIdentityClient(conn)
	var last error
	p.poll(t, "GetPluginInfo on "+socket, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
		if err != nil {
			last = err
			return false
		}
		if info.GetName() != driverName {
			t.Fatalf("GetPluginInfo name %q, want %q", info.GetName(), driverName)
		}
		return true
	}, &last)
}

// waitHTTP waits for a 200 from path on addr inside the pod's network
// namespace.
func (p *pod) waitHTTP(t *testing.T, ns *netNS, addr, path string) {
	t.Helper()
	var last error
	p.poll(t, "GET "+path, func() bool {
		var conn net.Conn
		var err error
		ns.Do(func() { conn, err = net.DialTimeout("tcp", addr, 2*time.Second) })
		if err != nil {
			last = err
			return false
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
		req, _ := http.NewRequest(http.MethodGet, "http://"+addr+path, nil)
		if err := req.Write(conn); err != nil {
			last = err
			return false
		}
		resp, err := http.ReadResponse(bufio.NewReader(conn), req)
		if err != nil {
			last = err
			return false
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			last = fmt.Errorf("status %s", resp.Status)
			return false
		}
		return true
	}, &last)
}

// poll retries ok until it holds, the process exits, or a minute passes
// (a generous bound for a loaded machine, not a performance claim).
func (p *pod) poll(t *testing.T, what string, ok func() bool, last *error) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !ok() {
		select {
		case <-p.exited:
			t.Fatalf("%s: the process exited (%v) before it answered", what, p.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no answer within a minute: %v", what, *last)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// stop sends SIGTERM, as kubelet does, and expects exit code 0 before kubelet
// would send SIGKILL.
func (p *pod) stop(t *testing.T, grace time.Duration) {
	t.Helper()
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.exited:
		if p.err != nil {
			t.Errorf("exit after SIGTERM: %v", p.err)
		}
	case <-time.After(grace):
		t.Errorf("still running %s after SIGTERM: kubelet would SIGKILL it", grace)
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
