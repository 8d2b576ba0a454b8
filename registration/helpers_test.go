package registration

import (
	"bufio"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"
	"google.golang.org/grpc"
)

const testDriver = "csi.trident.netapp.io"

func TestMain(m *testing.M) {
	flag.Parse()
	// Keep test output readable; with -v, and in helper processes (whose
	// stderr a failing test prints), log everything.
	if !testing.Verbose() && os.Getenv(helperEnv) == "" {
		logrus.SetOutput(io.Discard)
	}
	os.Exit(m.Run())
}

// testTimings keep the protocol's order of events but make tests quick.
var testTimings = timings{
	tick:         50 * time.Millisecond,
	watchdog:     200 * time.Millisecond,
	retireDelay:  300 * time.Millisecond,
	linger:       500 * time.Millisecond,
	confirmAfter: 300 * time.Millisecond,
	drainDelay:   100 * time.Millisecond,
	backoffMin:   100 * time.Millisecond,
	backoffMax:   time.Second,
	apiWait:      5 * time.Second,
	csinodeGrace: 300 * time.Millisecond,
	gcEvery:      time.Second,
	nodeInfo:     5 * time.Second,
}

// testNode is a node's kubelet directory under the test's own TempDir. It
// is reached through a short symlink in /tmp, because t.TempDir() paths,
// which carry the test name, would not fit the 107-byte socket path limit.
// The kubelet path and the path in "the container" are the same.
type testNode struct {
	kubeletDir string
	pluginDir  string
	regDir     string
}

func newTestNode(t testing.TB) *testNode {
	t.Helper()
	link := filepath.Join(os.TempDir(), "rg-"+randomHex(8))
	if err := os.Symlink(t.TempDir(), link); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.Remove(link) })
	n := &testNode{
		kubeletDir: filepath.Join(link, "kubelet"),
		pluginDir:  filepath.Join(link, "kubelet", "plugins", testDriver),
		regDir:     filepath.Join(link, "kubelet", "plugins_registry"),
	}
	for _, d := range []string{n.pluginDir, n.regDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	return n
}

func (n *testNode) config(pod string, serve func(net.Listener) error) Config {
	return Config{
		DriverName:      testDriver,
		KubeletDir:      n.kubeletDir,
		PluginDir:       n.pluginDir,
		CSIEndpointPath: filepath.Join(n.pluginDir, "csi.sock"),
		RegistrationDir: n.regDir,
		HandoverGrace:   300 * time.Millisecond,
		PodName:         pod,
		PodUID:          "uid-" + pod,
		Serve:           serve,
	}
}

func (n *testNode) lease(t testing.TB) *Lease {
	t.Helper()
	l, err := readLease(filepath.Join(n.pluginDir, LeaseName))
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// regSockets lists the non-dot sockets in REG_DIR.
func (n *testNode) regSockets() []string {
	var out []string
	ents, _ := os.ReadDir(n.regDir)
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), ".") && e.Type()&os.ModeSocket != 0 {
			out = append(out, e.Name())
		}
	}
	return out
}

// fakeNode is the CSI Node service of a test plugin. NodeGetInfo answers from
// local state and never fails (I6).
type fakeNode struct {
	csi.UnimplementedNodeServer
	calls  atomic.Int64
	onInfo atomic.Pointer[func()] // run once, by the next NodeGetInfo
}

func (f *fakeNode) NodeGetInfo(context.Context, *csi.NodeGetInfoRequest) (*csi.NodeGetInfoResponse, error) {
	f.calls.Add(1)
	if hook := f.onInfo.Swap(nil); hook != nil {
		(*hook)()
	}
	return &csi.NodeGetInfoResponse{
		NodeId:             "node-1",
		AccessibleTopology: &csi.Topology{Segments: map[string]string{"topology.kubernetes.io/zone": "zone-a"}},
	}, nil
}

// plugin is a node plugin running in the test process: its own gRPC server
// and Manager, like one ontap-csi process. Lease locks are per open file,
// so two plugins in one process contend as two processes would.
type plugin struct {
	name   string
	m      *Manager
	node   *fakeNode
	cancel context.CancelFunc
	done   chan error

	mu     sync.Mutex
	exited bool
	err    error
}

func (n *testNode) startPlugin(t testing.TB, name string, mod func(*Config)) *plugin {
	t.Helper()
	srv := grpc.NewServer()
	node := &fakeNode{}
	csi.RegisterNodeServer(srv, node)
	cfg := n.config(name, srv.Serve)
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	m.timings = testTimings
	m.retirer.delay = testTimings.retireDelay
	m.log = m.log.WithField("plugin", name)
	m.retirer.log = m.log
	ctx, cancel := context.WithCancel(context.Background())
	p := &plugin{name: name, m: m, node: node, cancel: cancel, done: make(chan error, 1)}
	go func() {
		err := m.Run(ctx)
		srv.Stop()
		p.done <- err
	}()
	t.Cleanup(func() {
		p.cancel()
		p.wait(t)
	})
	return p
}

// terminate is SIGTERM.
func (p *plugin) terminate() { p.cancel() }

// wait waits (generously) for Run to return.
func (p *plugin) wait(t testing.TB) error {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return p.err
	}
	select {
	case p.err = <-p.done:
		p.exited = true
		return p.err
	case <-time.After(60 * time.Second):
		t.Fatalf("plugin %s did not stop", p.name)
		return nil
	}
}

// generation is the plugin's newest generation.
func (p *plugin) generation() uint64 { return p.m.published.generation.Load() }

func (p *plugin) role() role { return p.m.published.currentRole() }

// waitRole waits until the plugin is in role r.
func (p *plugin) waitRole(t testing.TB, r role) {
	t.Helper()
	eventually(t, p.name+" becomes "+string(r), func() bool { return p.role() == r })
}

// --- helper processes -------------------------------------------------------

// helperEnv selects what TestHelperProcess does in a re-executed test binary.
const helperEnv = "REGISTRATION_TEST_HELPER"

// TestHelperProcess is not a test: tests re-execute the test binary with
// helperEnv set to run lease acquirers and node plugins as separate
// processes, which the kernel's flock semantics and SIGKILL need.
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper process for other tests")
	}
	var err error
	switch mode {
	case "allocate":
		err = helperAllocate()
	case "hold":
		err = helperHold()
	case "plugin":
		err = helperPlugin()
	default:
		err = fmt.Errorf("unknown helper mode %q", mode)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helper:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

func helperLayout() layout {
	return newLayout(testDriver, os.Getenv("REG_KUBELET_DIR"), os.Getenv("REG_PLUGIN_DIR"), os.Getenv("REG_REG_DIR"), "")
}

// helperAllocate waits for the start file, then allocates REG_COUNT
// generations, printing "<previous lease generation> <new generation>" for
// each, as read and written inside the critical section.
func helperAllocate() error {
	lay := helperLayout()
	count, err := strconv.Atoi(os.Getenv("REG_COUNT"))
	if err != nil {
		return err
	}
	for !fileExists(os.Getenv("REG_START")) {
		time.Sleep(time.Millisecond)
	}
	out := bufio.NewWriter(os.Stdout)
	defer out.Flush()
	for range count {
		err := lay.withHandoverLock(func() error {
			a, err := lay.allocateGeneration(func(g uint64) *Lease {
				return &Lease{Generation: g, Holder: Holder{PID: os.Getpid()}, Phase: PhaseStarting}
			}, 0, 0)
			if err != nil {
				return err
			}
			var prev uint64
			if a.prev != nil {
				prev = a.prev.Generation
			}
			fmt.Fprintf(out, "%d %d\n", prev, a.g)
			a.alive.Release()
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

// helperHold allocates one generation, prints it and holds its lock until
// killed.
func helperHold() error {
	lay := helperLayout()
	var g uint64
	err := lay.withHandoverLock(func() error {
		a, err := lay.allocateGeneration(func(g uint64) *Lease {
			return &Lease{Generation: g, Holder: Holder{Pod: "holder", PID: os.Getpid()}, Phase: PhaseRegistered}
		}, 0, 0)
		if err == nil {
			g = a.g // a.alive stays open: the lock lives as long as we do
		}
		return err
	})
	if err != nil {
		return err
	}
	fmt.Printf("%d\n", g)
	select {}
}

// helperPlugin runs a node plugin until SIGTERM, like ontap-csi --csi_role=node.
func helperPlugin() error {
	n := &testNode{kubeletDir: os.Getenv("REG_KUBELET_DIR"), pluginDir: os.Getenv("REG_PLUGIN_DIR"), regDir: os.Getenv("REG_REG_DIR")}
	srv := grpc.NewServer()
	csi.RegisterNodeServer(srv, &fakeNode{})
	m, err := New(n.config(os.Getenv("REG_POD"), srv.Serve))
	if err != nil {
		return err
	}
	m.timings = testTimings
	m.retirer.delay = testTimings.retireDelay
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	err = m.Run(ctx)
	srv.Stop()
	return err
}

// helper is a running helper process.
type helper struct {
	cmd    *exec.Cmd
	lines  chan string // its stdout, line by line; closed at EOF
	exited chan error
}

func startHelper(t *testing.T, mode string, n *testNode, env ...string) *helper {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(),
		helperEnv+"="+mode,
		"REG_KUBELET_DIR="+n.kubeletDir,
		"REG_PLUGIN_DIR="+n.pluginDir,
		"REG_REG_DIR="+n.regDir,
	)
	cmd.Env = append(cmd.Env, env...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	stderr := &lockedBuffer{}
	cmd.Stderr = stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h := &helper{cmd: cmd, lines: make(chan string, 1024), exited: make(chan error, 1)}
	go func() {
		// Wait closes stdout, so finish reading it first.
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			h.lines <- sc.Text()
		}
		close(h.lines)
		h.exited <- cmd.Wait()
	}()
	t.Cleanup(func() {
		cmd.Process.Kill()
		for range h.lines {
		}
		<-h.exited
		if t.Failed() {
			t.Logf("helper %s stderr:\n%s", mode, stderr.String())
		}
	})
	return h
}

// line returns the helper's next line of output.
func (h *helper) line(t *testing.T) string {
	t.Helper()
	select {
	case l, ok := <-h.lines:
		if !ok {
			t.Fatal("helper exited early")
		}
		return l
	case <-time.After(30 * time.Second):
		t.Fatal("no output from helper")
		return ""
	}
}

// kill is SIGKILL.
func (h *helper) kill(t *testing.T) {
	t.Helper()
	if err := h.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	for range h.lines {
	}
	<-h.exited
	h.exited <- nil // for Cleanup
}

type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

var _ io.Writer = (*lockedBuffer)(nil)

func fileExists(p string) bool {
	_, err := os.Lstat(p)
	return err == nil
}
