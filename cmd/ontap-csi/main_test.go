package main

import (
	"bytes"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// binary is the real ontap-csi, built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	if os.Getenv(isolatedEnv) != "" {
		os.Exit(runIsolated())
	}
	if os.Getenv(containerEnv) != "" {
		os.Exit(runContainer())
	}
	dir, err := os.MkdirTemp("", "ontap-csi-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	binary = filepath.Join(dir, "ontap-csi")
	build := exec.Command("go", "build", "-o", binary, ".")
	// Static, as in the image: the container tests run it in a root
	// without a C library.
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building ontap-csi:", err)
		os.Exit(1)
	}
	// Trident's host paths must never appear on the test machine.
	hostPaths := []string{"/var/lib/trident", "/var/lib/kubelet/plugins_registry", "/plugin"}
	existed := map[string]bool{}
	for _, p := range hostPaths {
		_, err := os.Lstat(p)
		existed[p] = err == nil
	}
	// The parallel tests (the Trident DaemonSets' and the operator's) spend
	// most of their time in the node role's --handover-grace after SIGTERM,
	// not on a CPU: run them all at once unless -test.parallel says
	// otherwise (its default is the CPUs).
	flag.Parse()
	parallelSet := false
	flag.Visit(func(f *flag.Flag) { parallelSet = parallelSet || f.Name == "test.parallel" })
	if !parallelSet {
		_ = flag.Set("test.parallel", "8")
	}
	code := m.Run()
	os.RemoveAll(dir)
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); err == nil && !existed[p] {
			fmt.Fprintf(os.Stderr, "FAIL: the tests created the host path %s\n", p)
			code = 1
		}
	}
	os.Exit(code)
}

const isolatedEnv = "ONTAP_CSI_TEST_ISOLATED_BINARY"

// runIsolated runs in the namespaces start created: it hides the host's
// /var/lib behind a tmpfs private to this namespace and becomes ontap-csi.
func runIsolated() int {
	bin := os.Getenv(isolatedEnv)
	if err := syscall.Mount("", "/", "", syscall.MS_REC|syscall.MS_PRIVATE, ""); err != nil {
		fmt.Fprintln(os.Stderr, "make / private:", err)
		return 1
	}
	if err := syscall.Mount("tmpfs", "/var/lib", "tmpfs", 0, "size=16m"); err != nil {
		fmt.Fprintln(os.Stderr, "tmpfs on /var/lib:", err)
		return 1
	}
	env := slices.DeleteFunc(os.Environ(), func(e string) bool { return strings.HasPrefix(e, isolatedEnv+"=") })
	err := syscall.Exec(bin, append([]string{bin}, os.Args[1:]...), env)
	fmt.Fprintln(os.Stderr, "exec ontap-csi:", err)
	return 1
}

// proc is a running ontap-csi process.
type proc struct {
	cmd    *exec.Cmd
	mu     sync.Mutex
	stderr bytes.Buffer
	done   chan struct{}
	err    error
}

func (p *proc) Write(b []byte) (int, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.Write(b)
}

func (p *proc) logs() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stderr.String()
}

// start runs the binary with args and env. With isolate it runs in its own
// network namespace, so Trident's fixed ports (8001, 8443, 17546) cannot
// collide with anything on the test machine, and its own mount namespace
// with an empty /var/lib, so Trident's fixed host paths
// (/var/lib/trident/tracking) are never created on the test machine.
func start(t *testing.T, args, env []string, isolate bool) *proc {
	t.Helper()
	p := &proc{done: make(chan struct{})}
	p.cmd = exec.Command(binary, args...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stderr = p
	p.cmd.Stdout = p
	if isolate {
		if os.Geteuid() != 0 {
			t.Skip("needs root for network and mount namespaces")
		}
		// The test binary re-executes itself in new namespaces and then
		// execs ontap-csi there (runIsolated).
		p.cmd = exec.Command(os.Args[0], args...)
		p.cmd.Env = append(os.Environ(), append(env, isolatedEnv+"="+binary)...)
		p.cmd.Stderr, p.cmd.Stdout = p, p
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Cloneflags: syscall.CLONE_NEWNET | syscall.CLONE_NEWNS}
	}
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { p.err = p.cmd.Wait(); close(p.done) }()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		if t.Failed() {
			t.Logf("ontap-csi output:\n%s", p.logs())
		}
	})
	return p
}

// stop sends SIGTERM and returns the exit code.
func (p *proc) stop(t *testing.T) int {
	t.Helper()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		t.Fatal("ontap-csi did not exit within 30s of SIGTERM")
	}
	return p.cmd.ProcessState.ExitCode()
}

// dial waits for a unix socket to accept connections and returns a client.
func dial(t *testing.T, p *proc, path string) *grpc.ClientConn {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.Dial("unix", path)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-p.done:
			t.Fatalf("ontap-csi exited before serving %s: %v", path, p.err)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never accepted a connection: %v", path, err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	conn, err := grpc.NewClient("unix://"+path, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn
}

// tridentEndpoint is Trident's endpoint form, unix://<path without leading
// slash>, pointing at a test directory.
func tridentEndpoint(dir string) string {
	return "unix://" + strings.TrimPrefix(filepath.Join(dir, "csi.sock"), "/")
}

// expandK8s substitutes $(VAR) references the way kubelet does for args.
func expandK8s(args []string, env map[string]string) []string {
	out := make([]string, len(args))
	for i, a := range args {
		for k, v := range env {
			a = strings.ReplaceAll(a, "$("+k+")", v)
		}
		out[i] = a
	}
	return out
}

func TestTridentContainerArgs(t *testing.T) {
	t.Parallel() // see TestTridentOperatorObjects
	for _, tc := range tridentContainers {
		if tc.role == roleController {
			// With --crd_persistence and --https_rest the controller needs
			// the Kubernetes API and /certs: TestTridentOperatorObjects runs
			// it with both, and calls Identity and Controller there.
			continue
		}
		t.Run(tc.name, func(t *testing.T) {
			// Node roles wait --handover-grace (20 s) for a successor after
			// SIGTERM; the cases are isolated from each other, so overlap them.
			t.Parallel()
			root := shortTempDir(t)
			pluginDir := filepath.Join(root, "plugin")
			env := map[string]string{
				"KUBE_NODE_NAME": "worker-1",
				"CSI_ENDPOINT":   tridentEndpoint(pluginDir),
				"KUBELET_DIR":    filepath.Join(root, "kubelet"),
			}
			var environ []string
			for k, v := range env {
				environ = append(environ, k+"="+v)
			}
			p := start(t, expandK8s(tc.args, env), environ, true)
			conn := dial(t, p, filepath.Join(pluginDir, "csi.sock"))
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()

			id := csi.NewIdentityClient(conn)
			info, err := id.GetPluginInfo(ctx, &csi.GetPluginInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if info.Name != "csi.trident.netapp.io" || info.VendorVersion == "" {
				t.Errorf("GetPluginInfo = %v", info)
			}
			probe, err := id.Probe(ctx, &csi.ProbeRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if !probe.GetReady().GetValue() {
				t.Error("Probe: not ready")
			}
			caps, err := id.GetPluginCapabilities(ctx, &csi.GetPluginCapabilitiesRequest{})
			if err != nil {
				t.Fatal(err)
			}
			hasController := false
			for _, c := range caps.Capabilities {
				if c.GetService().GetType() == csi.PluginCapability_Service_CONTROLLER_SERVICE {
					hasController = true
				}
			}
			if hasController != (tc.role != roleNode) {
				t.Errorf("CONTROLLER_SERVICE advertised = %v in role %s", hasController, tc.role)
			}

			ni, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{})
			if err != nil {
				t.Fatal(err)
			}
			if ni.NodeId != "worker-1" {
				t.Errorf("NodeGetInfo node id = %q, want worker-1", ni.NodeId)
			}
			assertRegistrationOffered(t, filepath.Join(root, "kubelet"), pluginDir)

			if code := p.stop(t); code != 0 {
				t.Fatalf("exit code after SIGTERM = %d, want 0", code)
			}
			logs := p.logs()
			checkIgnoredFlags(t, logs, tc.ignored)
			if strings.Contains(logs, "panic") {
				t.Errorf("log mentions a panic:\n%s", logs)
			}
		})
	}
}

// assertRegistrationOffered checks, through `ontap-csi status`, that the
// node role took the lease and offers kubelet a live registration socket
// (no kubelet runs here to complete the registration).
func assertRegistrationOffered(t *testing.T, kubeletDir, pluginDir string) {
	t.Helper()
	var st struct {
		Lease *struct {
			Generation uint64 `json:"generation"`
		} `json:"lease"`
		HolderAlive bool `json:"holderAlive"`
		Sockets     []struct {
			Role      string `json:"role"`
			Listening bool   `json:"listening"`
		} `json:"sockets"`
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		out, code := runToExit(t, "status", "--kubelet-dir", kubeletDir, "--plugin-dir", pluginDir, "--json")
		if code == 0 && json.Unmarshal([]byte(out), &st) == nil && st.Lease != nil && st.HolderAlive {
			roles := map[string]bool{}
			for _, s := range st.Sockets {
				if s.Listening {
					roles[s.Role] = true
				}
			}
			if roles["registration"] && roles["endpoint"] && roles["csi-endpoint"] {
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no live lease with listening registration, endpoint and csi.sock sockets; last status (exit %d):\n%s", code, out)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

func TestBadCommandLines(t *testing.T) {
	dir := t.TempDir()
	ep := "unix://" + filepath.Join(dir, "csi.sock")
	long := "unix:///" + strings.Repeat("d/", 60) + "csi.sock"
	cases := []struct {
		name string
		args []string
		code int
		msg  string
	}{
		{"no role", []string{"--csi_endpoint=" + ep}, 2, "--csi_role is required"},
		{"unknown subcommand", []string{"statuss"}, 2, `ontap-csi: unknown subcommand "statuss"`},
		{"status: unknown flag", []string{"status", "--bogus"}, 2, "ontap-csi status: flag provided but not defined: -bogus"},
		{"status: stray argument", []string{"status", "now"}, 2, `ontap-csi status: unexpected argument "now"`},
		{"deregister: bad timeout", []string{"deregister", "--timeout=x"}, 2, `ontap-csi deregister: invalid value "x" for flag -timeout`},
		{"probe: unknown endpoint", []string{"probe", "--pod-uid=u", "metrics"}, 2, "ontap-csi probe: want one of readyz, healthz"},
		{"version: argument", []string{"version", "x"}, 2, "usage: ontap-csi version"},
		{"drain timeout", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--drain-timeout=-1s"}, 2, "--drain-timeout -1s must be positive"},
		{"mkfs cap", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--max-formats=0"}, 2, "--max-formats 0 must be at least 1"},
		{"iSCSI cap", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--max-iscsi-operations=0"}, 2, "--max-iscsi-operations 0 must be at least 1"},
		{"NFS cap", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--max-nfs-mounts=-2"}, 2, "--max-nfs-mounts -2 must be at least 1"},
		{"volume limit", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--max-volumes-per-node=-1"}, 2, "--max-volumes-per-node -1 must not be negative"},
		{"device timeout", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--iscsi-device-timeout=0s"}, 2, "--iscsi-device-timeout 0s must be positive"},
		{"dead path grace", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--iscsi-dead-path-grace=-1s"}, 2, "--iscsi-dead-path-grace -1s must be positive"},
		{"relative tracking dir", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--tracking-dir=rel"}, 2, "--tracking-dir \"rel\" must be an absolute path"},
		{"relative dev dir", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--dev-dir=rel"}, 2, "--dev-dir \"rel\" must be an absolute path"},
		{"relative sys root", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--sys-root=rel"}, 2, "--sys-root \"rel\" must be an absolute path"},
		{"relative lock dir", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--lock-dir=rel"}, 2, "--lock-dir \"rel\" must be an absolute path"},
		{"host root not a directory", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--host-root=/etc/hostname"}, 2, "--host-root: \"/etc/hostname\" is not a directory"},
		{"node IP", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--node-ips=1.2.3"}, 2, "--node-ips: \"1.2.3\" is not an IP address"},
		{"empty driver name", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--driver-name="}, 2, "--driver-name must not be empty"},
		{"topology key twice", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--node-topology=zone=a,zone=b"}, 2, "--node-topology: key \"zone\" given twice"},
		{"unknown role", []string{"--csi_role=nodes", "--csi_endpoint=" + ep, "--csi_node_name=n"}, 2, `--csi_role "nodes" is not one of node, controller, allInOne`},
		{"role wrong case", []string{"--csi_role=allinone", "--csi_endpoint=" + ep, "--csi_node_name=n"}, 2, `--csi_role "allinone" is not one of`},
		{"no endpoint", []string{"--csi_role=controller"}, 2, "--csi_endpoint is required"},
		{"tcp endpoint", []string{"--csi_role=controller", "--csi_endpoint=tcp://127.0.0.1:10000"}, 2, `scheme "tcp" is not supported`},
		{"bare path endpoint", []string{"--csi_role=controller", "--csi_endpoint=/tmp/x.sock"}, 2, "expected unix://<path>"},
		{"empty unix path", []string{"--csi_role=controller", "--csi_endpoint=unix://"}, 2, "empty socket path"},
		{"endpoint too long", []string{"--csi_role=controller", "--csi_endpoint=" + long}, 2, "the limit is 107"},
		{"node without node name", []string{"--csi_role=node", "--csi_endpoint=" + ep}, 2, "--csi_node_name is required in the node role"},
		{"allInOne without node name", []string{"--csi_role=allInOne", "--csi_endpoint=" + ep}, 2, "--csi_node_name is required in the allInOne role"},
		{"blank node name", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name= "}, 2, "--csi_node_name is required"},
		{"bad log format", []string{"--csi_role=controller", "--csi_endpoint=" + ep, "--log_format=xml"}, 2, `--log_format "xml" is not one of text, json`},
		{"bad log level", []string{"--csi_role=controller", "--csi_endpoint=" + ep, "--log_level=loud"}, 2, `--log_level "loud"`},
		{"bad deregister mode", []string{"--csi_role=controller", "--csi_endpoint=" + ep, "--deregister-on-shutdown=sometimes"}, 2, `--deregister-on-shutdown "sometimes"`},
		{"negative grace", []string{"--csi_role=controller", "--csi_endpoint=" + ep, "--handover-grace=-1s"}, 2, "--handover-grace -1s must not be negative"},
		{"relative kubelet dir", []string{"--csi_role=controller", "--csi_endpoint=" + ep, "--kubelet-dir=var/lib/kubelet"}, 2, "must be an absolute path"},
		{"bad topology", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--node-topology=zone"}, 2, `--node-topology: "zone" is not key=value`},
		{"bad metrics address", []string{"--csi_role=controller", "--csi_endpoint=" + ep, "--metrics-address=8001"}, 2, `--metrics-address "8001"`},
		{"non-bool for a Trident bool flag", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--rest=maybe"}, 2, `invalid boolean value "maybe" for -rest`},
		{"unknown flag", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "--no-such-flag"}, 2, "flag provided but not defined: -no-such-flag"},
		{"stray argument", []string{"--csi_role=node", "--csi_endpoint=" + ep, "--csi_node_name=n", "extra"}, 2, `unexpected argument "extra"`},
		{"unknown subcommand", []string{"serve"}, 2, `unknown subcommand "serve"`},
		{"version with arguments", []string{"version", "--json"}, 2, "usage: ontap-csi version"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, code := runToExit(t, tc.args...)
			if code != tc.code {
				t.Errorf("exit code = %d, want %d; output:\n%s", code, tc.code, out)
			}
			if !strings.Contains(out, tc.msg) {
				t.Errorf("output does not contain %q:\n%s", tc.msg, out)
			}
			if n := strings.Count(strings.TrimSpace(out), "\n"); n != 0 {
				t.Errorf("want one line, got %d:\n%s", n+1, out)
			}
			if strings.Contains(out, "goroutine ") {
				t.Errorf("stack trace in output:\n%s", out)
			}
		})
	}
}

func TestUnusableEndpoint(t *testing.T) {
	dir := t.TempDir()

	// The endpoint's directory cannot be made: the one line names the flag,
	// in every role (the node's lock dir defaults into that directory).
	for _, role := range []string{"controller", "node", "allInOne"} {
		t.Run("directory cannot be made/"+role, func(t *testing.T) {
			ep := "unix:///proc/ontap-csi-nope/csi.sock"
			out, code := runToExit(t, "--csi_role="+role, "--csi_endpoint="+ep, "--csi_node_name=n",
				"--kubelet-dir="+filepath.Join(dir, "kubelet"), "--tracking-dir="+filepath.Join(dir, "tracking"), "--host-root=/")
			want := "--csi_endpoint " + ep + ": mkdir /proc/ontap-csi-nope"
			if code != 1 || !strings.Contains(out, want) {
				t.Fatalf("exit %d, want 1 and %q; output:\n%s", code, want, out)
			}
		})
	}

	t.Run("path is a regular file", func(t *testing.T) {
		path := filepath.Join(dir, "file.sock")
		if err := os.WriteFile(path, []byte("keep me"), 0o600); err != nil {
			t.Fatal(err)
		}
		out, code := runToExit(t, "--csi_role=controller", "--csi_endpoint=unix://"+path)
		if code != 1 || !strings.Contains(out, "is not a socket; refusing to replace it") {
			t.Fatalf("exit %d, output:\n%s", code, out)
		}
		if b, _ := os.ReadFile(path); string(b) != "keep me" {
			t.Fatal("the file was touched")
		}
	})

	t.Run("socket held by a live process is never stolen", func(t *testing.T) {
		sockDir := filepath.Join(dir, "live")
		ep := "unix://" + filepath.Join(sockDir, "csi.sock")
		first := start(t, []string{"--csi_role=controller", "--csi_endpoint=" + ep}, nil, false)
		conn := dial(t, first, filepath.Join(sockDir, "csi.sock"))

		out, code := runToExit(t, "--csi_role=controller", "--csi_endpoint="+ep)
		if code != 1 || !strings.Contains(out, "socket is in use by a live process") {
			t.Fatalf("exit %d, output:\n%s", code, out)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}); err != nil {
			t.Fatalf("the first process no longer serves: %v", err)
		}
	})

	t.Run("stale socket of a dead process is replaced", func(t *testing.T) {
		path := filepath.Join(dir, "stale.sock")
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		l.Close() // the file stays, nobody listens: a crashed process's socket
		p := start(t, []string{"--csi_role=controller", "--csi_endpoint=unix://" + path}, nil, false)
		conn := dial(t, p, path)
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if _, err := csi.NewIdentityClient(conn).Probe(ctx, &csi.ProbeRequest{}); err != nil {
			t.Fatal(err)
		}
		if code := p.stop(t); code != 0 {
			t.Fatalf("exit %d", code)
		}
		if _, err := os.Lstat(path); !os.IsNotExist(err) {
			t.Errorf("own socket not removed on shutdown: %v", err)
		}
	})
}

func TestHealthAndMetrics(t *testing.T) {
	dir := t.TempDir()
	p := start(t, []string{"--csi_role=allInOne", "--csi_node_name=n1", "--csi_endpoint=unix://" + filepath.Join(dir, "csi.sock"), "--metrics-address=127.0.0.1:0",
		"--kubelet-dir=" + filepath.Join(dir, "kubelet"), "--tracking-dir=" + filepath.Join(dir, "tracking")}, nil, false)
	conn := dial(t, p, filepath.Join(dir, "csi.sock"))
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := csi.NewNodeClient(conn).NodeGetInfo(ctx, &csi.NodeGetInfoRequest{}); err != nil {
		t.Fatal(err)
	}
	// Unimplemented calls are answered with a code, not a crash.
	_, err := csi.NewNodeClient(conn).NodePublishVolume(ctx, &csi.NodePublishVolumeRequest{})
	if err == nil {
		t.Fatal("NodePublishVolume succeeded on the foundation build")
	}

	addr := metricsAddr(t, p)
	for path, want := range map[string]string{"/healthz": "ok", "/readyz": "ok", "/metrics": `csi_plugin_operations_seconds_count{grpc_status_code="OK",method="NodeGetInfo"} 1`} {
		body := httpGet(t, "http://"+addr+path)
		if !strings.Contains(body, want) {
			t.Errorf("GET %s: missing %q in:\n%s", path, want, body)
		}
	}
	if code := p.stop(t); code != 0 {
		t.Fatalf("exit %d", code)
	}
}

func TestVersion(t *testing.T) {
	out, code := runToExit(t, "version")
	if code != 0 || !strings.HasPrefix(out, "ontap-csi ") {
		t.Fatalf("exit %d, output %q", code, out)
	}
}

func TestBadBackendConfigStopsStartup(t *testing.T) {
	dir := t.TempDir()
	bad := filepath.Join(dir, "nas.json")
	if err := os.WriteFile(bad, []byte(`{"version": 1, "storageDriverName": "ontap-nas", "managementLIF": "127.0.0.1", "svm": "svm0",
		"username": "admin", "password": "x", "defaults": {"snapshotReserve": "abc"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	ep := "unix://" + filepath.Join(dir, "csi.sock")
	out, code := runToExit(t, "--csi_role=controller", "--csi_endpoint="+ep, "--backend-config="+bad)
	if code != 1 || !strings.Contains(out, "nas.json") || !strings.Contains(out, "defaults.snapshotReserve") {
		t.Fatalf("exit %d, output:\n%s", code, out)
	}
	out, code = runToExit(t, "--csi_role=controller", "--csi_endpoint="+ep, "--backend-config="+filepath.Join(dir, "missing.json"))
	if code != 1 || !strings.Contains(out, "missing.json") {
		t.Fatalf("missing file: exit %d, output:\n%s", code, out)
	}
	out, code = runToExit(t, "--csi_role=node", "--csi_node_name=n", "--csi_endpoint="+ep, "--backend-config="+bad)
	if code != 2 || !strings.Contains(out, "only used in the controller and allInOne roles") {
		t.Fatalf("node role with a backend: exit %d, output:\n%s", code, out)
	}
	if _, err := os.Stat(filepath.Join(dir, "csi.sock")); !os.IsNotExist(err) {
		t.Fatal("a failed start left a socket behind")
	}
}
