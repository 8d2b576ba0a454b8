package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// Factory creates the Kubelet of one Kubernetes version. t may be nil
// outside tests.
type Factory func(t *testing.T, cfg KubeletConfig) (Kubelet, error)

// watcherSettle is how long the plugin watcher gets after Start before the
// first socket appears: a socket created while the watcher starts can be
// added twice and deregistered once (docs/design/registration.md §7.1, K10).
const watcherSettle = 500 * time.Millisecond

// Paths of one node's kubelet directory, the layout of docs/design/registration.md §4.
type Paths struct {
	Root      string // kubelet root dir (--kubelet-dir, --root-dir)
	RegDir    string // Root/plugins_registry
	PluginDir string // Root/plugins/<driver>
}

// NewPaths lays out root.
func NewPaths(root string) Paths {
	return Paths{
		Root:      root,
		RegDir:    filepath.Join(root, "plugins_registry"),
		PluginDir: filepath.Join(root, "plugins", Driver),
	}
}

// Endpoint is E, the endpoint every generation gives kubelet (I3).
func (p Paths) Endpoint() string { return filepath.Join(p.PluginDir, "csi-node.sock") }

// CSISock is the --csi_endpoint path and the legacy registrar's endpoint.
func (p Paths) CSISock() string { return filepath.Join(p.PluginDir, "csi.sock") }

// LegacyRegSock is node-driver-registrar's fixed registration socket.
func (p Paths) LegacyRegSock() string { return filepath.Join(p.RegDir, Driver+"-reg.sock") }

// Node is one scenario's node: a kubelet directory, the real kubelet code in
// this process, an observer sampling it, and the pods started on it.
type Node struct {
	Paths
	T       *testing.T
	Kubelet Kubelet
	TL      *Timeline
	Obs     *Observer
	LogDir  string

	mu    sync.Mutex
	pods  []*Pod
	downs []Interval // kubelet restarts
}

// NewNode builds the binaries, creates the kubelet directory under
// t.TempDir(), starts the kubelet of newKubelet and the observer, and lets
// the plugin watcher settle. Everything is torn down in t.Cleanup; on
// failure the timeline is printed and the logs are kept.
func NewNode(t *testing.T, newKubelet Factory) *Node {
	t.Helper()
	// Build before the clock starts; a failed build fails the first scenario
	// step that needs the binary, so S9 runs without ours.
	_, _ = OntapCSI()
	_, _ = BuildTools()
	dir := t.TempDir()
	n := &Node{Paths: NewPaths(filepath.Join(dir, "kubelet")), T: t, TL: NewTimeline(), LogDir: filepath.Join(dir, "logs")}
	for _, d := range []string{n.RegDir, n.PluginDir, n.LogDir} {
		if err := os.MkdirAll(d, 0o750); err != nil {
			t.Fatal(err)
		}
	}
	klogFile, err := os.Create(filepath.Join(n.LogDir, "kubelet.log"))
	if err != nil {
		t.Fatal(err)
	}
	k, err := newKubelet(t, KubeletConfig{Root: n.Root, Log: klogFile, OnHandlerCall: n.TL.Call})
	if err != nil {
		t.Fatalf("creating kubelet: %v", err)
	}
	n.Kubelet = k
	n.Obs = NewObserver(k, n.TL, n.Root)
	t.Cleanup(func() { n.teardown(klogFile) })

	n.TL.Add(KindKubelet, "kubelet %s: plugin manager starting on %s", k.Version(), n.RegDir)
	if err := k.Start(); err != nil {
		t.Fatalf("starting plugin manager: %v", err)
	}
	if err := n.Obs.Start(); err != nil {
		t.Fatalf("starting the observer: %v", err)
	}
	time.Sleep(watcherSettle)
	return n
}

func (n *Node) teardown(klogFile *os.File) {
	if n.T.Failed() {
		n.statusSnapshot() // while the pods still run
	}
	n.mu.Lock()
	pods := append([]*Pod(nil), n.pods...)
	n.mu.Unlock()
	for _, p := range pods {
		p.Kill()
	}
	for _, p := range pods {
		p.Wait(10 * time.Second)
	}
	n.Obs.Stop()
	n.Kubelet.Stop()
	klogFile.Close()
	_ = os.WriteFile(filepath.Join(n.LogDir, "timeline.txt"), []byte(n.TL.String()), 0o644)
	if n.T.Failed() || os.Getenv("KUBELET_HARNESS_TIMELINE") != "" {
		n.T.Logf("timeline (kubelet %s):\n%s", n.Kubelet.Version(), n.TL)
	}
	if n.T.Failed() {
		keep := filepath.Join(os.TempDir(), "kubelet-harness-failures", fmt.Sprintf("%s-%s", strings.ReplaceAll(n.T.Name(), "/", "_"), time.Now().Format("20060102-150405")))
		if err := copyDir(n.LogDir, keep); err == nil {
			n.T.Logf("logs kept in %s", keep)
		}
	}
}

// statusSnapshot records `ontap-csi status` of the node in the logs, for
// the registration side's view of a failure.
func (n *Node) statusSnapshot() {
	bin, err := OntapCSI()
	if err != nil {
		return
	}
	out, err := exec.Command(bin, "status", "--kubelet-dir="+n.Root, "--registration-dir="+n.RegDir).CombinedOutput()
	if err != nil {
		out = append(out, []byte("\n"+err.Error())...)
	}
	_ = os.WriteFile(filepath.Join(n.LogDir, "status.txt"), out, 0o644)
	n.T.Logf("ontap-csi status at the end:\n%s", out)
}

// Step marks a scenario step on the timeline.
func (n *Node) Step(format string, args ...any) {
	n.TL.Add(KindStep, format, args...)
	n.T.Logf("%+8.3fs "+format, append([]any{time.Since(n.TL.Start()).Seconds()}, args...)...)
}

// OntapOptions are the per-pod flags of the binary under test.
type OntapOptions struct {
	// HandoverGrace is --handover-grace; zero keeps the binary's default.
	HandoverGrace time.Duration
	// DeregisterAlways sets --deregister-on-shutdown=always.
	DeregisterAlways bool
}

// OntapContainer is the node container of our DaemonSet: ontap-csi in the
// node role, with host paths equal to container paths.
func (n *Node) OntapContainer(o OntapOptions) ContainerSpec {
	args := []string{
		"--csi_role=node",
		"--csi_node_name=" + NodeName,
		"--csi_endpoint=unix://" + n.CSISock(),
		"--kubelet-dir=" + n.Root,
		"--registration-dir=" + n.RegDir,
		// Trident's tracking files go under the node's root, never to the
		// host's /var/lib/trident.
		"--tracking-dir=" + filepath.Join(n.Root, "trident-tracking"),
		"--metrics-address=127.0.0.1:0",
		"--log_level=debug",
	}
	if o.HandoverGrace > 0 {
		args = append(args, "--handover-grace="+o.HandoverGrace.String())
	}
	if o.DeregisterAlways {
		args = append(args, "--deregister-on-shutdown=always")
	}
	return ContainerSpec{Name: "ontap-csi", Path: n.OntapCSI(), Args: args}
}

// OntapCSI is the path of the binary under test; the test fails if it does
// not build.
func (n *Node) OntapCSI() string {
	n.T.Helper()
	bin, err := OntapCSI()
	if err != nil {
		n.T.Fatalf("building ontap-csi: %v", err)
	}
	return bin
}

func (n *Node) tools() Tools {
	n.T.Helper()
	tools, err := BuildTools()
	if err != nil {
		n.T.Fatalf("building the legacy emulations: %v", err)
	}
	return tools
}

// RegistrarContainer is a node-driver-registrar v2 sidecar (emulated).
func (n *Node) RegistrarContainer() ContainerSpec {
	return ContainerSpec{Name: "registrar", Path: n.tools().LegacyRegistrar, Args: []string{
		"--registration-dir=" + n.RegDir,
		"--driver=" + Driver,
		"--kubelet-registration-path=" + n.CSISock(),
	}}
}

// TridentMainContainer is Trident's node container (emulated): a CSI node
// server on csi.sock, without built-in registration.
func (n *Node) TridentMainContainer() ContainerSpec {
	return ContainerSpec{Name: "trident-main", Path: n.tools().TridentMain, Args: []string{
		"--csi_endpoint=unix://" + n.CSISock(),
		"--csi_node_name=" + NodeName,
	}}
}

// StartPod starts a pod on the node; it is killed at cleanup.
func (n *Node) StartPod(name string, specs ...ContainerSpec) *Pod {
	n.T.Helper()
	p, err := StartPod(n.TL, n.LogDir, name, specs...)
	if err != nil {
		n.T.Fatal(err)
	}
	n.mu.Lock()
	n.pods = append(n.pods, p)
	n.mu.Unlock()
	return p
}

// StartOntap starts a pod of our DaemonSet.
func (n *Node) StartOntap(name string, o OntapOptions) *Pod {
	return n.StartPod(name, n.OntapContainer(o))
}

// StartLegacy starts a pod of the Trident 20.10 DaemonSet: trident-main
// and the registrar sidecar.
func (n *Node) StartLegacy(name string) *Pod {
	return n.StartPod(name, n.TridentMainContainer(), n.RegistrarContainer())
}

// RestartKubelet emulates a kubelet restart: the plugin manager stops, the
// CSI plugin forgets the driver, and a new plugin manager starts and walks
// plugins_registry. between runs while kubelet is down.
func (n *Node) RestartKubelet(between func()) {
	n.T.Helper()
	down := Interval{From: time.Now()}
	n.TL.Add(KindKubelet, "kubelet stopping")
	n.Kubelet.Stop()
	if between != nil {
		between()
	}
	n.Kubelet.Forget()
	n.TL.Add(KindKubelet, "kubelet starting (restart): plugin manager walks %s", n.RegDir)
	if err := n.Kubelet.Start(); err != nil {
		n.T.Fatalf("restarting plugin manager: %v", err)
	}
	down.To = time.Now()
	n.mu.Lock()
	n.downs = append(n.downs, down)
	n.mu.Unlock()
}

// WaitFor polls cond every 5 ms until it holds or timeout passes.
func (n *Node) WaitFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// MustWait is WaitFor that fails the test with what it waited for.
func (n *Node) MustWait(timeout time.Duration, what string, cond func() bool) time.Time {
	n.T.Helper()
	if !n.WaitFor(timeout, cond) {
		n.T.Fatalf("timed out after %v waiting for %s", timeout, what)
	}
	return time.Now()
}

// Registrations returns the successful RegisterPlugin calls since t.
func (n *Node) Registrations(since time.Time) []TimedCall {
	var out []TimedCall
	for _, c := range n.TL.Calls(OpRegister, since) {
		if c.Err == "" {
			out = append(out, c)
		}
	}
	return out
}

// Deregistrations returns the DeRegisterPlugin calls since t.
func (n *Node) Deregistrations(since time.Time) []TimedCall {
	return n.TL.Calls(OpDeregister, since)
}

// Generation extracts G from a version "1.0.G"; 0 for anything else.
func Generation(versions []string) uint64 {
	var g uint64
	for _, v := range versions {
		m := genVersion.FindStringSubmatch(v)
		if m == nil {
			continue
		}
		if x, err := strconv.ParseUint(m[1], 10, 64); err == nil && x > g {
			g = x
		}
	}
	return g
}

var genVersion = regexp.MustCompile(`^v?1\.0\.(\d+)$`)

// RegisteredGeneration is the generation of the last successful
// registration, if the driver is registered now.
func (n *Node) RegisteredGeneration() (uint64, bool) {
	if !n.Kubelet.Registered("1.0.0") {
		return 0, false
	}
	regs := n.Registrations(time.Time{})
	if len(regs) == 0 {
		return 0, false
	}
	return Generation(regs[len(regs)-1].Versions), true
}

// WaitNewRegistration waits until kubelet registers, at or after since, a
// generation above above, and returns that registration. Pass above = 0 to
// skip the legacy registrar's 1.0.0.
func (n *Node) WaitNewRegistration(since time.Time, above uint64, timeout time.Duration) TimedCall {
	n.T.Helper()
	var c TimedCall
	n.MustWait(timeout, fmt.Sprintf("kubelet to register a generation above %d", above), func() bool {
		for _, r := range n.Registrations(since) {
			if Generation(r.Versions) > above {
				c = r
				return true
			}
		}
		return false
	})
	return c
}

// Holder reports whether the lease names pod as its holder, by pod name or
// by the pid of its ontap-csi container.
func (n *Node) Holder(pod *Pod) bool {
	l := n.Obs.Lease()
	return l.Pod == pod.Name || (l.PID != 0 && l.PID == pod.PID("ontap-csi"))
}

// WaitRegistered waits for any successful registration since t.
func (n *Node) WaitRegistered(since time.Time, timeout time.Duration) TimedCall {
	n.T.Helper()
	var c TimedCall
	n.MustWait(timeout, "a kubelet registration", func() bool {
		regs := n.Registrations(since)
		if len(regs) > 0 {
			c = regs[0]
			return true
		}
		return false
	})
	return c
}

// DeregGaps are the intervals within [from, to] in which kubelet did not
// have the driver: absent from the CSI plugin or from CSINode.
func (n *Node) DeregGaps(from, to time.Time) []Interval {
	reg := n.TL.Series(SigRegistered).Gaps(from, to)
	node := n.TL.Series(SigCSINode).Gaps(from, to)
	return n.outsideRestarts(Union(reg, node))
}

// ServedGaps are the intervals within [from, to] in which kubelet's CSI
// calls were not served.
func (n *Node) ServedGaps(from, to time.Time) []Interval {
	return n.outsideRestarts(n.TL.Series(SigServed).Gaps(from, to))
}

// outsideRestarts drops what falls into a kubelet restart.
func (n *Node) outsideRestarts(ivs []Interval) []Interval {
	n.mu.Lock()
	downs := append([]Interval(nil), n.downs...)
	n.mu.Unlock()
	var out []Interval
	for _, iv := range ivs {
		for _, d := range downs {
			if !iv.From.Before(d.From) && !iv.To.After(d.To) {
				iv = Interval{}
				break
			}
		}
		if !iv.From.IsZero() {
			out = append(out, iv)
		}
	}
	return out
}

// Settle sleeps while the observer keeps sampling.
func (n *Node) Settle(d time.Duration) {
	n.Step("observing for %v", d)
	time.Sleep(d)
}

func copyDir(src, dst string) error {
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return err
	}
	ents, err := os.ReadDir(src)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if !e.Type().IsRegular() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dst, e.Name()), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}

// ServedNow reports whether the latest kubelet call was served.
func (n *Node) ServedNow() bool {
	ok, _ := n.TL.Series(SigServed).At(time.Now())
	return ok
}

// RegisteredNow reports whether the latest samples had the driver in the
// CSI plugin and in CSINode.
func (n *Node) RegisteredNow() bool {
	reg, _ := n.TL.Series(SigRegistered).At(time.Now())
	node, _ := n.TL.Series(SigCSINode).At(time.Now())
	return reg && node
}
