package plugintest

import (
	"bytes"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"golang.org/x/sys/unix"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// Options describe one plugin process.
type Options struct {
	Roots Roots
	// Role is --csi_role: "allInOne" (default) or "node" (the DaemonSet's
	// process: no controller, kubelet registration sockets below the
	// kubelet dir).
	Role string
	// Sim is the simulator; the shims ask its data plane about exports and
	// LUNs.
	Sim *Sim
	// Backends are the --backend-config files (WriteBackendConfig).
	Backends []string
	// NodeID is --csi_node_name; default "node-1".
	NodeID string
	// NodeIPs are --node-ips: the addresses the node reports to the
	// controller for export rules.
	NodeIPs []string
	// NFSClientIP is the address the NFS shim mounts from; default
	// NodeIPs[0].
	NFSClientIP string
	// Topology is --node-topology, "key=value[,key=value]".
	Topology string
	// ISCSI is the node's iSCSI side (StartISCSI). With the shims, they
	// come first in PATH and their initiator name is the node's
	// --iscsi-initiator-name; nil: no shims in PATH.
	ISCSI *ISCSI
	// Tags are build tags of the binary, e.g. "crashpoints".
	Tags []string
	// Env adds environment variables, e.g. ONTAP_CSI_CRASHPOINT=<step>.
	Env []string
	// Args are appended to the command line; a repeated flag's last value
	// wins (--log_level=info).
	Args []string
}

// StartupTimeout bounds how long a plugin may take to serve: generous, the
// test machines are loaded.
const StartupTimeout = 2 * time.Minute

// Plugin is a running ontap-csi process, serving CSI Identity, Node and
// (allInOne) Controller on its socket.
type Plugin struct {
	Roots
	Endpoint   string // "unix:///…/csi.sock"
	Conn       *grpc.ClientConn
	Identity   csi.IdentityClient
	Controller csi.ControllerClient
	Node       csi.NodeClient

	role string
	cmd  *exec.Cmd
	out  *syncBuffer
	done chan struct{}
	err  error // of Wait, once done is closed
}

// Start runs ontap-csi and returns once it serves its socket and, in the
// allInOne role, its node has reported to its controller (so that
// ControllerPublishVolume knows the node). The process is stopped when the
// test ends; its log is printed if the test failed, or always with
// ONTAP_CSI_E2E_VERBOSE set.
func Start(t testing.TB, o Options) *Plugin {
	t.Helper()
	p := Launch(t, o)
	p.waitServing(t)
	if p.role == "allInOne" {
		p.WaitLog(t, "node info reported to the controller")
	}
	conn, err := grpc.NewClient(p.Endpoint, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	p.Conn = conn
	p.Identity, p.Controller, p.Node = csi.NewIdentityClient(conn), csi.NewControllerClient(conn), csi.NewNodeClient(conn)
	return p
}

// Launch runs ontap-csi as Start does but returns at once, without waiting
// for it to serve or connecting to it: a node plugin that starts as a
// standby serves nothing until it takes over (the demo's rollouts).
func Launch(t testing.TB, o Options) *Plugin {
	t.Helper()
	RequireRoot(t)
	bin := Binary(t, o.Tags...)
	if o.NodeID == "" {
		o.NodeID = "node-1"
	}
	if o.NFSClientIP == "" && len(o.NodeIPs) > 0 {
		o.NFSClientIP = o.NodeIPs[0]
	}
	if o.Role == "" {
		o.Role = "allInOne"
	}
	r := o.Roots
	args := []string{
		"--csi_role=" + o.Role,
		"--csi_endpoint=unix://" + r.Socket,
		"--csi_node_name=" + o.NodeID,
		"--kubelet-dir=" + r.KubeletDir,
		"--tracking-dir=" + r.TrackingDir,
		"--lock-dir=" + r.LockDir,
		// No chroot: the shims are found through PATH.
		"--host-root=/",
		// No fixed host port (Trident's 127.0.0.1:8000): plugins of
		// several tests and packages run at once.
		"--rest=false",
		"--log_level=debug",
	}
	for _, b := range o.Backends {
		args = append(args, "--backend-config="+b)
	}
	if o.Role == "node" {
		// No successor will come: stop at once on SIGTERM.
		args = append(args, "--handover-grace=0s")
	}
	if len(o.NodeIPs) > 0 {
		args = append(args, "--node-ips="+strings.Join(o.NodeIPs, ","))
	}
	if o.Topology != "" {
		args = append(args, "--node-topology="+o.Topology)
	}
	args, env := toolArgs(t, o, args)
	env = append(env, o.Env...)

	p := &Plugin{Roots: r, Endpoint: "unix://" + r.Socket, role: o.Role, out: &syncBuffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, append(args, o.Args...)...)
	p.cmd.Env = MergeEnv(os.Environ(), env)
	p.cmd.Stdout, p.cmd.Stderr = p.out, p.out
	// Its own process group, so that what a killed plugin leaves running
	// can be killed with it; and killed if the test binary dies.
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	runtime.LockOSThread() // Pdeathsig fires when the forking thread exits
	err := p.cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	go p.wait()
	t.Cleanup(func() {
		p.Stop()
		if t.Failed() || os.Getenv("ONTAP_CSI_E2E_VERBOSE") != "" {
			t.Logf("ontap-csi (pid %d) log:\n%s", p.cmd.Process.Pid, tail(p.Log(), 1<<20))
		}
		p.keepWarnings(t)
	})
	return p
}

// toolArgs adds the flags and environment that point the plugin at its
// host tools: the shims, or on a real kernel the host's own.
func toolArgs(t testing.TB, o Options, args []string) ([]string, []string) {
	if RealKernel() {
		// Generous: udev and multipathd under TCG on a loaded machine.
		return append(args, "--iscsi-device-timeout=2m"), nil
	}
	path := NFSShimDir(t)
	env := []string{"NFS_SHIM_CLIENT_IP=" + o.NFSClientIP}
	if o.Sim != nil {
		env = append(env, "ONTAP_SIM_URL="+o.Sim.URL, "ONTAP_SIM_CA="+o.Sim.CAFile)
	}
	if o.ISCSI != nil && o.ISCSI.Shim != nil {
		e := o.ISCSI.Shim
		path += string(os.PathListSeparator) + e.BinDir
		for _, kv := range e.Environ() {
			if strings.HasPrefix(kv, "ISCSI_SHIM_") {
				env = append(env, kv)
			}
		}
		args = append(args,
			"--iscsi-initiator-name="+e.InitiatorIQN,
			"--dev-dir="+e.DevDir,
			"--sys-root="+e.SysRoot,
			// Generous: the kernel daemon of the shims competes for CPU.
			"--iscsi-device-timeout=1m",
		)
	}
	env = append(env, "PATH="+path+string(os.PathListSeparator)+os.Getenv("PATH"))
	return args, env
}

// keepWarnings appends the plugin's warnings and errors to
// $ONTAP_CSI_VM_OUT/ontap-csi-warnings.log when the tests run in the VM
// of test/vm (it reports them for passing tests too: where the real
// kernel disagrees with the plugin without failing a call).
func (p *Plugin) keepWarnings(t testing.TB) {
	dir := os.Getenv("ONTAP_CSI_VM_OUT")
	if dir == "" {
		return
	}
	var b strings.Builder
	for _, line := range strings.Split(p.Log(), "\n") {
		// A failed call is the test's business (it asked for it or fails).
		if strings.Contains(line, `msg="CSI call failed"`) {
			continue
		}
		if strings.Contains(line, "level=warning") || strings.Contains(line, "level=error") {
			b.WriteString(t.Name() + ": " + line + "\n")
		}
	}
	if b.Len() == 0 {
		return
	}
	f, err := os.OpenFile(filepath.Join(dir, "ontap-csi-warnings.log"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	defer f.Close()
	_, _ = f.WriteString(b.String())
}

// MergeEnv returns base with the variables of set replacing or added.
func MergeEnv(base, set []string) []string {
	names := map[string]bool{}
	for _, kv := range set {
		k, _, _ := strings.Cut(kv, "=")
		names[k] = true
	}
	var out []string
	for _, kv := range base {
		if k, _, _ := strings.Cut(kv, "="); !names[k] {
			out = append(out, kv)
		}
	}
	return append(out, set...)
}

// wait reaps the plugin. It first waits for the exit without reaping, so
// that the process group id cannot have been reused when it kills the
// group: a plugin killed mid-call leaves its tools (mkfs, mount, iscsiadm)
// running, which a container's death would not.
func (p *Plugin) wait() {
	pid := p.cmd.Process.Pid
	var info unix.Siginfo
	for unix.Waitid(unix.P_PID, pid, &info, unix.WEXITED|unix.WNOWAIT, nil) == unix.EINTR {
	}
	_ = unix.Kill(-pid, unix.SIGKILL)
	p.err = p.cmd.Wait()
	close(p.done)
}

// waitServing waits until the socket accepts connections: a socket file may
// be left by a plugin that was killed.
func (p *Plugin) waitServing(t testing.TB) {
	t.Helper()
	for deadline := time.Now().Add(StartupTimeout); ; time.Sleep(20 * time.Millisecond) {
		if c, err := net.Dial("unix", p.Socket); err == nil {
			c.Close()
			return
		}
		select {
		case <-p.done:
			t.Fatalf("ontap-csi exited at start: %v\n%s", p.err, p.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ontap-csi does not serve %s after %s\n%s", p.Socket, StartupTimeout, p.Log())
		}
	}
}

// WaitLog waits until the plugin has logged s.
func (p *Plugin) WaitLog(t testing.TB, s string) {
	t.Helper()
	for deadline := time.Now().Add(StartupTimeout); !strings.Contains(p.Log(), s); time.Sleep(20 * time.Millisecond) {
		select {
		case <-p.done:
			t.Fatalf("ontap-csi exited (%v) before logging %q\n%s", p.err, s, p.Log())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("ontap-csi did not log %q in %s\n%s", s, StartupTimeout, p.Log())
		}
	}
}

// Stop ends the plugin: SIGTERM, then SIGKILL if it has not exited after
// its drain timeout. It may be called more than once.
func (p *Plugin) Stop() {
	if p.Conn != nil {
		p.Conn.Close()
	}
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(30 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Terminate sends SIGTERM, as kubelet does to a deleted pod, and returns
// at once; Done tells when the plugin has exited.
func (p *Plugin) Terminate() { _ = p.cmd.Process.Signal(syscall.SIGTERM) }

// Done is closed once the plugin has exited.
func (p *Plugin) Done() <-chan struct{} { return p.done }

// WaitKilled waits for the plugin to die of SIGKILL (a crash point).
func (p *Plugin) WaitKilled(t testing.TB) {
	t.Helper()
	select {
	case <-p.done:
	case <-time.After(StartupTimeout):
		t.Fatalf("ontap-csi did not die\n%s", p.Log())
	}
	var ee *exec.ExitError
	if !errors.As(p.err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("ontap-csi ended with %v, want SIGKILL\n%s", p.err, p.Log())
	}
	p.Conn.Close()
}

// Pid is the plugin's process id.
func (p *Plugin) Pid() int { return p.cmd.Process.Pid }

// Log is what the plugin wrote to stdout and stderr so far.
func (p *Plugin) Log() string { return p.out.String() }

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "[… earlier output cut …]\n" + s[len(s)-n:]
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(b []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(b)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
