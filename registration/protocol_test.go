package registration

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"google.golang.org/grpc"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"

	"github.com/ontap-csi/ontap-csi/internal/filelock"
)

func (n *testNode) endpoint() string { return filepath.Join(n.pluginDir, EndpointName) }

// assertNoDeregistration checks I1/I2 at the end of a handover test: kubelet
// never deregistered the driver and no registration socket was ever
// unlinked (retirement renames them away).
func assertNoDeregistration(t *testing.T, k *fakeKubelet) {
	t.Helper()
	if d := k.deregistrations(); d != 0 {
		t.Errorf("kubelet deregistered the driver %d times", d)
	}
	if r := k.removedNames(); len(r) != 0 {
		t.Errorf("registration sockets were unlinked (I2): %v", r)
	}
}

// Acquire, steps 1–6, on a fresh node.
func TestAcquireRegisters(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", nil)

	d := k.waitRegistered(t, 0)
	a.waitRole(t, roleRegistered)
	g := a.generation()
	if d.version != g {
		t.Errorf("kubelet registered version 1.0.%d, want 1.0.%d", d.version, g)
	}
	if want := filepath.Join(n.kubeletDir, "plugins", testDriver, EndpointName); d.endpoint != want {
		t.Errorf("endpoint told to kubelet %s, want E = %s", d.endpoint, want)
	}
	name := testDriver + "-g" + strconv.FormatUint(g, 10) + "-reg.sock"
	if got := n.regSockets(); !slices.Equal(got, []string{name}) {
		t.Errorf("REG_DIR sockets %v, want [%s]", got, name)
	}
	l := n.lease(t)
	if l.Generation != g || l.Phase != PhaseRegistered || l.Holder.Pod != "a" || l.Holder.PodUID != "uid-a" ||
		l.RegistrationSocket != filepath.Join(n.kubeletDir, "plugins_registry", name) || l.NodeInfo.NodeID != "node-1" {
		t.Errorf("lease %+v", l)
	}
	for _, p := range []string{n.endpoint(), filepath.Join(n.pluginDir, "csi.sock")} {
		if _, err := nodeGetInfo(p); err != nil {
			t.Errorf("%s not served: %v", p, err)
		}
	}
	if !a.m.Ready() {
		t.Error("registered holder not ready")
	}
	assertNoDeregistration(t, k)
}

// S1: B starts while A is registered, takes over E and registers; A becomes
// standby and, after SIGTERM, exits without touching anything.
func TestSupersededBecomesStandby(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", nil)
	k.waitRegistered(t, 0)
	a.waitRole(t, roleRegistered)
	sampler := sampleServed(t, k)

	b := n.startPlugin(t, "b", nil)
	k.waitRegistered(t, a.generation())
	b.waitRole(t, roleRegistered)
	a.waitRole(t, roleStandby)
	if b.generation() <= a.generation() {
		t.Fatalf("successor generation %d not above %d", b.generation(), a.generation())
	}
	eventually(t, "the standby is ready (live holder)", a.m.Ready)
	eventually(t, "A's registration socket is retired", func() bool { return len(n.regSockets()) == 1 })
	if l := n.lease(t); l.Generation != b.generation() || l.Holder.Pod != "b" {
		t.Errorf("lease %+v, want B's", l)
	}

	// E is B's now: a new call reaches B, not A.
	before := b.node.calls.Load()
	if _, err := nodeGetInfo(n.endpoint()); err != nil {
		t.Fatal(err)
	}
	if b.node.calls.Load() == before {
		t.Error("a new call through E did not reach the successor")
	}

	a.terminate()
	if err := a.wait(t); err != nil {
		t.Fatal(err)
	}
	if d := k.registered(); d == nil || d.version != b.generation() {
		t.Errorf("kubelet has %+v, want B's generation", d)
	}
	if ok, fail, err := sampler.result(); fail != 0 || ok == 0 {
		t.Errorf("kubelet calls through the registered endpoint: %d ok, %d failed (last: %v)", ok, fail, err)
	}
	assertNoDeregistration(t, k)
}

// S5: the holder, a separate process, is SIGKILLed while a standby runs.
// The standby sees the holder's lock free, re-binds E and registers.
func TestStandbyTakesOverWhenHolderDies(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", nil)
	k.waitRegistered(t, 0)

	b := startHelper(t, "plugin", n, "REG_POD=b")
	var gB uint64
	eventually(t, "helper process B registers", func() bool {
		l, _ := readLease(filepath.Join(n.pluginDir, LeaseName))
		if l != nil && l.Holder.Pod == "b" && l.Phase == PhaseRegistered {
			gB = l.Generation
			return true
		}
		return false
	})
	a.waitRole(t, roleStandby)
	eventually(t, "only B's socket is left", func() bool { return len(n.regSockets()) == 1 })

	b.kill(t)

	a.waitRole(t, roleRegistered)
	if a.generation() <= gB {
		t.Fatalf("takeover generation %d not above the dead holder's %d", a.generation(), gB)
	}
	k.waitRegistered(t, gB)
	eventually(t, "E is served again", func() bool { _, err := nodeGetInfo(n.endpoint()); return err == nil })
	eventually(t, "the dead holder's socket is retired", func() bool {
		s := n.regSockets()
		return len(s) == 1 && strings.Contains(s[0], strconv.FormatUint(a.generation(), 10))
	})
	if l := n.lease(t); l.Holder.Pod != "a" || l.Generation != a.generation() {
		t.Errorf("lease %+v, want A's", l)
	}
	assertNoDeregistration(t, k)
}

// S11 in small: rolling updates in a row. Nothing is ever unlinked that
// kubelet may hold, and no files pile up.
func TestRollingUpdatesRetireWithoutUnlinking(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	sampler := sampleServed(t, k)
	prev := n.startPlugin(t, "p0", nil)
	k.waitRegistered(t, 0)
	prev.waitRole(t, roleRegistered)
	for i := 1; i <= 5; i++ {
		next := n.startPlugin(t, "p"+strconv.Itoa(i), nil)
		k.waitRegistered(t, prev.generation())
		next.waitRole(t, roleRegistered)
		prev.terminate()
		if err := prev.wait(t); err != nil {
			t.Fatal(err)
		}
		prev = next
	}
	if ok, fail, err := sampler.result(); fail != 0 || ok == 0 {
		t.Errorf("kubelet calls: %d ok, %d failed (last: %v)", ok, fail, err)
	}
	assertNoDeregistration(t, k)

	want := []string{aliveName(prev.generation()), EndpointName, "csi.sock", HandoverLockName, LeaseName}
	slices.Sort(want)
	// Retired sockets go after the retire delay, dead generations' locks at
	// the holder's next garbage collection.
	eventually(t, "only the holder's files remain", func() bool {
		return slices.Equal(dirNames(n.pluginDir), want) && len(dirNames(n.regDir)) == 1 && len(n.regSockets()) == 1
	})
}

func dirNames(dir string) []string {
	var out []string
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		out = append(out, e.Name())
	}
	return out
}

// S7: someone deletes the holder's registration socket. Kubelet deregisters
// (K4); the watchdog registers a new generation without a restart.
func TestWatchdogReregistersAfterSocketDeleted(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", nil)
	k.waitRegistered(t, 0)
	a.waitRole(t, roleRegistered)
	g1 := a.generation()
	old := n.regSockets()
	// What an operator sees on /metrics (docs/registration.md).
	if g, reg := testutil.ToFloat64(generationGauge), testutil.ToFloat64(phaseGauge.WithLabelValues(string(roleRegistered))); g != float64(g1) || reg != 1 {
		t.Errorf("metrics: generation %v, phase registered %v; want %d and 1", g, reg, g1)
	}
	removedBefore := testutil.ToFloat64(reregistrationsTotal.WithLabelValues(reasonSocketRemoved))

	if err := os.Remove(filepath.Join(n.regDir, old[0])); err != nil {
		t.Fatal(err)
	}
	eventually(t, "kubelet deregisters", func() bool { return k.deregistrations() == 1 })
	d := k.waitRegistered(t, g1)
	if d.version != a.generation() || d.endpoint != n.endpoint() {
		t.Errorf("kubelet has %+v; want the holder's new generation %d at E", d, a.generation())
	}
	a.waitRole(t, roleRegistered)
	if l := n.lease(t); l.Generation != a.generation() || l.Holder.Pod != "a" {
		t.Errorf("lease %+v", l)
	}
	eventually(t, "one registration socket", func() bool { return len(n.regSockets()) == 1 })
	if got := testutil.ToFloat64(reregistrationsTotal.WithLabelValues(reasonSocketRemoved)) - removedBefore; got < 1 {
		t.Errorf("metrics: %v re-registrations for reason %s, want at least 1", got, reasonSocketRemoved)
	}
	if g := testutil.ToFloat64(generationGauge); g != float64(a.generation()) {
		t.Errorf("metrics: generation %v, want %d", g, a.generation())
	}
}

// legacyRegistrar emulates node-driver-registrar: a fixed socket name and
// version 1.0.0, or any given version.
type legacyRegistrar struct {
	registerapi.UnimplementedRegistrationServer
	endpoint string
	version  string
}

func (r *legacyRegistrar) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{Type: registerapi.CSIPlugin, Name: testDriver, Endpoint: r.endpoint, SupportedVersions: []string{r.version}}, nil
}

func (r *legacyRegistrar) NotifyRegistrationStatus(context.Context, *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	return &registerapi.RegistrationStatusResponse{}, nil
}

// startLegacy serves a legacy registration socket at REG_DIR/<driver>-reg.sock
// and a legacy CSI node socket for it to point at.
func startLegacy(t *testing.T, n *testNode, version string) string {
	t.Helper()
	ep := filepath.Join(n.pluginDir, "legacy-"+randomHex(4)+".sock")
	serve := func(path string, register func(*grpc.Server)) {
		l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
		if err != nil {
			t.Fatal(err)
		}
		l.SetUnlinkOnClose(false)
		srv := grpc.NewServer()
		register(srv)
		go srv.Serve(l)
		t.Cleanup(srv.Stop)
	}
	serve(ep, func(s *grpc.Server) { csi.RegisterNodeServer(s, &fakeNode{}) })
	reg := filepath.Join(n.regDir, testDriver+"-reg.sock")
	serve(reg, func(s *grpc.Server) {
		registerapi.RegisterRegistrationServer(s, &legacyRegistrar{endpoint: ep, version: version})
	})
	return reg
}

// The legacy registrar's socket is left alone while our registration is
// pending (it may be kubelet's only one), and retired once we are registered,
// so its SIGTERM unlink hits ENOENT.
func TestLegacySocketRetiredOnlyOnceRegistered(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	legacy := startLegacy(t, n, "1.0.0")
	// Its Notify must be done before the gate goes up, or the gate holds
	// the legacy registration instead of A's.
	eventually(t, "kubelet registers and notifies the legacy registrar", func() bool {
		d := k.registered()
		return d != nil && d.version == 0 && slices.Contains(k.notifiedVersions(), 0)
	})

	release := k.holdNotifications(t)
	a := n.startPlugin(t, "a", nil)
	eventually(t, "kubelet accepted A, Notify pending", func() bool {
		d := k.registered()
		return d != nil && d.version == a.generation() && a.generation() != 0
	})
	// Give A several watchdog periods to (wrongly) retire the legacy socket.
	time.Sleep(5 * testTimings.watchdog)
	if !isSocket(legacy) || a.role() != roleStarting {
		t.Fatalf("before A's registration: legacy socket present=%v, A role %s", isSocket(legacy), a.role())
	}

	release()
	a.waitRole(t, roleRegistered)
	eventually(t, "legacy socket retired", func() bool { return !fileExists(legacy) })
	if err := os.Remove(legacy); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the legacy registrar's unlink on SIGTERM: %v, want ENOENT", err)
	}
	if d := k.registered(); d == nil || d.version != a.generation() {
		t.Errorf("kubelet has %+v", d)
	}
	assertNoDeregistration(t, k)
}

// A registrar sidecar started next to the holder (an operator's DaemonSet)
// creates its socket while the holder's registration is still pending: the
// holder retires it at once, before kubelet can register it, so that its
// path never enters kubelet's state (S8o).
func TestNewLegacySocketRetiredBeforeRegistration(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	release := k.holdNotifications(t)
	a := n.startPlugin(t, "a", nil)
	eventually(t, "kubelet accepted A, Notify pending", func() bool {
		d := k.registered()
		return d != nil && d.version == a.generation() && a.generation() != 0
	})
	legacy := startLegacy(t, n, "1.0.0")
	eventually(t, "the new legacy socket retired", func() bool { return !fileExists(legacy) })
	if a.role() != roleStarting {
		t.Fatalf("A is %s, want still starting: the retirement must not wait for the registration", a.role())
	}
	release()
	a.waitRole(t, roleRegistered)
	if d := k.registered(); d == nil || d.version != a.generation() {
		t.Errorf("kubelet has %+v", d)
	}
	assertNoDeregistration(t, k)
}

// S8's mechanism: a new legacy registrar creates its socket on a path kubelet
// still holds from a retired one. Kubelet unregisters that path, by name;
// the holder retires the new socket and registers a new generation.
func TestLegacySocketRecreatedReregisters(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	legacy := startLegacy(t, n, "1.0.0")
	eventually(t, "kubelet registers the legacy registrar", func() bool { return k.registered() != nil })
	a := n.startPlugin(t, "a", nil)
	a.waitRole(t, roleRegistered)
	eventually(t, "legacy socket retired", func() bool { return !fileExists(legacy) })
	g := a.generation()

	// The next pod's sidecar. Whether kubelet sees its socket at all is a
	// race: if the holder retires it before kubelet's watcher stats it,
	// kubelet ignores the Create and nothing is deregistered.
	startLegacy(t, n, "1.0.0")
	d := k.waitRegistered(t, g)
	eventually(t, "the new legacy socket is retired", func() bool { return !fileExists(legacy) })
	a.waitRole(t, roleRegistered)
	if d = k.registered(); d == nil || d.endpoint != n.endpoint() || d.version != a.generation() {
		t.Errorf("kubelet has %+v, want the holder's generation %d at E", d, a.generation())
	}
	if got := k.deregistrations(); got > 1 {
		t.Errorf("%d deregistrations, want at most the one the legacy socket caused", got)
	}
}

// S8o's race, made deterministic through the holder's own NodeGetInfo check
// (Acquire step 1): the holder decides to re-register because a registrar
// sidecar's socket appeared, and a successor takes the lease before the
// holder reaches handover.lock. The holder must not outrank it, which would
// take E back from the new pod until the old one's grace ran out; it stands
// by, and the lease keeps the successor's generation.
func TestReregistrationYieldsToSuccessor(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", nil)
	a.waitRole(t, roleRegistered)
	k.waitRegistered(t, 0)
	g := a.generation()

	lay := newLayout(testDriver, n.kubeletDir, n.pluginDir, n.regDir, "")
	successor := make(chan *allocation, 1)
	hook := func() {
		err := lay.withHandoverLock(func() error {
			s, err := lay.allocateGeneration(func(g uint64) *Lease {
				return &Lease{Generation: g, Holder: Holder{Pod: "b"}, Phase: PhaseStarting}
			}, 0, 0)
			if err == nil {
				successor <- s
			}
			return err
		})
		if err != nil {
			t.Errorf("successor's allocation: %v", err)
		}
	}
	a.node.onInfo.Store(&hook)
	startLegacy(t, n, "1.0.0")

	var b *allocation
	select {
	case b = <-successor:
		defer b.alive.Release() // the successor stays alive
	case <-time.After(10 * time.Second):
		t.Fatal("the holder never checked NodeGetInfo for a re-registration")
	}
	a.waitRole(t, roleStandby)
	time.Sleep(5 * testTimings.watchdog) // a chance to (wrongly) re-register
	if l := n.lease(t); l.Generation != b.g || l.Holder.Pod != "b" {
		t.Errorf("lease %+v, want the successor's generation %d", l, b.g)
	}
	if got := a.generation(); got != g {
		t.Errorf("the old holder allocated generation %d after the successor's %d", got, b.g)
	}
	if a.role() != roleStandby {
		t.Errorf("old holder is %s, want %s", a.role(), roleStandby)
	}
}

// Step 7: kubelet rejects our generation because it holds a higher version;
// the plugin jumps above the version kubelet named.
func TestValidationFailureJumpsAboveKubeletsVersion(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	huge := uint64(time.Now().UnixMilli()) + 1_000_000_000
	legacy := startLegacy(t, n, "1.0."+strconv.FormatUint(huge, 10))
	eventually(t, "kubelet registers the huge version", func() bool {
		d := k.registered()
		return d != nil && d.version == huge
	})
	a := n.startPlugin(t, "a", nil)
	d := k.waitRegistered(t, huge)
	a.waitRole(t, roleRegistered)
	if d.version != a.generation() {
		t.Errorf("kubelet has 1.0.%d, want 1.0.%d", d.version, a.generation())
	}
	eventually(t, "the outranked socket is retired", func() bool { return !fileExists(legacy) })
	eventually(t, "A's rejected socket is retired", func() bool { return len(n.regSockets()) == 1 })
	assertNoDeregistration(t, k)
}

// S12: `ontap-csi deregister`: the holder removes its socket, kubelet
// deregisters once, nothing re-registers, not even a standby when the
// holder exits; a process started later clears the mark.
func TestUninstall(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", nil)
	a.waitRole(t, roleRegistered)
	b := n.startPlugin(t, "b", nil)
	b.waitRole(t, roleRegistered)
	a.waitRole(t, roleStandby)
	eventually(t, "one registration socket", func() bool { return len(n.regSockets()) == 1 })

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	res, err := Deregister(ctx, n.pluginDir, n.regDir, testDriver)
	if err != nil {
		t.Fatal(err)
	}
	if !res.ByHolder || !res.HolderAlive || res.Generation != b.generation() || res.HolderPod != "b" || len(res.Unlinked) != 0 {
		t.Errorf("deregister result %+v", res)
	}
	eventually(t, "kubelet deregisters", func() bool { return k.registered() == nil })
	if got := k.deregistrations(); got != 1 {
		t.Fatalf("kubelet deregistered %d times, want once", got)
	}
	b.waitRole(t, roleUninstalling)
	if b.m.Ready() {
		t.Error("uninstalling holder is ready")
	}
	if l := n.lease(t); l.Phase != PhaseUninstalling {
		t.Errorf("lease phase %s", l.Phase)
	}

	accepted := len(k.acceptedVersions())
	b.terminate()
	if err := b.wait(t); err != nil {
		t.Fatal(err)
	}
	time.Sleep(5 * testTimings.watchdog) // a chance to (wrongly) take over
	if a.role() != roleStandby || len(k.acceptedVersions()) != accepted || len(n.regSockets()) != 0 || k.deregistrations() != 1 {
		t.Fatalf("after the holder exited: A %s, %d new registrations, sockets %v, %d deregistrations",
			a.role(), len(k.acceptedVersions())-accepted, n.regSockets(), k.deregistrations())
	}

	c := n.startPlugin(t, "c", nil)
	k.waitRegistered(t, 0)
	c.waitRole(t, roleRegistered)
	if l := n.lease(t); l.Phase != PhaseRegistered || l.Holder.Pod != "c" {
		t.Errorf("a new process did not clear the mark: %+v", l)
	}
}

// Deregister with no live holder removes the sockets itself.
func TestDeregisterWithoutHolder(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", func(c *Config) { c.HandoverGrace = time.Millisecond })
	a.waitRole(t, roleRegistered)
	a.terminate()
	a.wait(t)
	if k.registered() == nil {
		t.Fatal("SIGTERM deregistered")
	}
	res, err := Deregister(context.Background(), n.pluginDir, n.regDir, testDriver)
	if err != nil {
		t.Fatal(err)
	}
	if res.HolderAlive || res.ByHolder || len(res.Unlinked) != 1 {
		t.Errorf("result %+v", res)
	}
	if k.registered() != nil {
		eventually(t, "kubelet deregisters", func() bool { return k.registered() == nil })
	}
}

// S4: SIGTERM with no successor: the process exits after the grace, leaving
// E and its registration socket; kubelet stays registered at E. A process
// started later serves E at once and registers with no deregistration.
func TestSIGTERMWithoutSuccessorKeepsRegistration(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", func(c *Config) { c.HandoverGrace = 500 * time.Millisecond })
	a.waitRole(t, roleRegistered)
	gA := a.generation()
	sock := n.regSockets()

	a.terminate()
	if err := a.wait(t); err != nil {
		t.Fatal(err)
	}
	if !isSocket(n.endpoint()) || !slices.Equal(n.regSockets(), sock) {
		t.Fatalf("after exit: E present=%v, sockets %v (want %v)", isSocket(n.endpoint()), n.regSockets(), sock)
	}
	if d := k.registered(); d == nil || d.endpoint != n.endpoint() {
		t.Fatalf("kubelet has %+v; want the driver still registered at E", d)
	}
	if _, err := nodeGetInfo(n.endpoint()); err == nil {
		t.Fatal("E still served after the process exited")
	}

	b := n.startPlugin(t, "b", nil)
	eventually(t, "E is served by the new process", func() bool { _, err := nodeGetInfo(n.endpoint()); return err == nil })
	k.waitRegistered(t, gA)
	b.waitRole(t, roleRegistered)
	eventually(t, "A's socket retired", func() bool { return len(n.regSockets()) == 1 })
	assertNoDeregistration(t, k)
}

// S3: A gets SIGTERM first and keeps serving E until B, started later,
// takes E over; A then exits long before its grace.
func TestSIGTERMServesUntilSuccessorTakesOver(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", func(c *Config) { c.HandoverGrace = time.Hour })
	a.waitRole(t, roleRegistered)
	sampler := sampleServed(t, k)

	a.terminate()
	eventually(t, "kubelet calls keep reaching A", func() bool {
		before := a.node.calls.Load()
		_, err := nodeGetInfo(n.endpoint())
		return err == nil && a.node.calls.Load() > before
	})
	b := n.startPlugin(t, "b", nil)
	if err := a.wait(t); err != nil { // well within the hour's grace
		t.Fatal(err)
	}
	k.waitRegistered(t, a.generation())
	b.waitRole(t, roleRegistered)
	if ok, fail, err := sampler.result(); fail != 0 || ok == 0 {
		t.Errorf("kubelet calls: %d ok, %d failed (last: %v)", ok, fail, err)
	}
	assertNoDeregistration(t, k)
}

// --deregister-on-shutdown=always: the holder unlinks its socket on SIGTERM.
func TestDeregisterOnShutdownAlways(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", func(c *Config) { c.DeregisterOnShutdown = true })
	a.waitRole(t, roleRegistered)
	a.terminate()
	if err := a.wait(t); err != nil {
		t.Fatal(err)
	}
	if d := k.deregistrations(); d != 1 || k.registered() != nil || len(n.regSockets()) != 0 {
		t.Errorf("%d deregistrations, driver %+v, sockets %v; want deregistered once", d, k.registered(), n.regSockets())
	}
}

// S10: three processes start at once: the newest holds, the others stand
// by, and one registration socket is left.
func TestThreeStartAtOnce(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	ps := make([]*plugin, 3)
	var wg sync.WaitGroup
	for i := range ps {
		wg.Go(func() { ps[i] = n.startPlugin(t, "p"+strconv.Itoa(i), nil) })
	}
	wg.Wait()
	var newest *plugin
	eventually(t, "all three have a generation", func() bool {
		newest = nil
		for _, p := range ps {
			if p.generation() == 0 {
				return false
			}
			if newest == nil || p.generation() > newest.generation() {
				newest = p
			}
		}
		return true
	})
	newest.waitRole(t, roleRegistered)
	for _, p := range ps {
		if p != newest {
			p.waitRole(t, roleStandby)
		}
	}
	k.waitRegistered(t, newest.generation()-1)
	eventually(t, "one registration socket", func() bool { return len(n.regSockets()) == 1 })
	if l := n.lease(t); l.Generation != newest.generation() {
		t.Errorf("lease generation %d, want the newest %d", l.Generation, newest.generation())
	}
	assertNoDeregistration(t, k)
}

func TestStatusReportsHolderAndStandby(t *testing.T) {
	n := newTestNode(t)
	startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", nil)
	a.waitRole(t, roleRegistered)
	b := n.startPlugin(t, "b", nil)
	b.waitRole(t, roleRegistered)
	a.waitRole(t, roleStandby)
	eventually(t, "one registration socket", func() bool { return len(n.regSockets()) == 1 })

	st, err := Status(n.pluginDir, n.regDir, testDriver)
	if err != nil {
		t.Fatal(err)
	}
	if st.Lease == nil || st.Lease.Generation != b.generation() || !st.HolderAlive {
		t.Fatalf("status lease %+v alive=%v", st.Lease, st.HolderAlive)
	}
	gens := map[uint64]GenerationStatus{}
	for _, g := range st.Generations {
		gens[g.Generation] = g
	}
	if g := gens[a.generation()]; !g.Alive || g.Holder || g.RegistrationSocket != "" {
		t.Errorf("standby generation %+v", g)
	}
	if g := gens[b.generation()]; !g.Alive || !g.Holder || g.RegistrationSocket == "" {
		t.Errorf("holder generation %+v", g)
	}
	roles := map[string]SocketStatus{}
	for _, s := range st.Sockets {
		roles[s.Role] = s
	}
	for _, r := range []string{SocketEndpoint, SocketCSIEndpoint, SocketRegistration} {
		if s, ok := roles[r]; !ok || !s.Listening {
			t.Errorf("socket %s: %+v", r, s)
		}
	}
	if _, err := json.Marshal(st); err != nil {
		t.Error(err)
	}
}

// With API access: the plugin waits for the API server (Acquire step 4), and the
// watchdog re-registers while CSINode lacks the driver.
func TestCSINodeWatchdogReregisters(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	client := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		map[schema.GroupVersionResource]string{csinodesGVR: "CSINodeList"}, csinode("node-1"))
	var pings atomic.Int64
	ping := func(context.Context) error {
		if pings.Add(1) == 1 {
			return errors.New("connection refused")
		}
		return nil
	}
	a := n.startPlugin(t, "a", func(c *Config) { c.Kube, c.NodeName = &KubeAPI{Client: client, Ping: ping}, "node-1" })
	a.waitRole(t, roleRegistered)
	if pings.Load() < 2 {
		t.Errorf("registered after %d pings; want the first, failed, one retried", pings.Load())
	}
	g1 := a.generation()
	// The fake kubelet does not write CSINode: the watchdog must notice.
	k.waitRegistered(t, g1)
	a.waitRole(t, roleRegistered)

	if _, err := client.Resource(csinodesGVR).Update(context.Background(), csinode("node-1", testDriver), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the watch sees the driver", func() bool { has, known := a.m.watch.csinode.hasDriver(); return has && known })
	// Let a re-registration that began before the update finish.
	time.Sleep(2 * testTimings.watchdog)
	eventually(t, "registered", func() bool {
		l := n.lease(t)
		return l.Phase == PhaseRegistered && l.Generation == a.generation()
	})
	settled := a.generation()
	time.Sleep(5 * testTimings.csinodeGrace) // a chance to (wrongly) re-register
	if a.generation() != settled {
		t.Errorf("re-registered although CSINode lists the driver: %d → %d", settled, a.generation())
	}
}

// csinode is a CSINode object as kubelet writes it.
func csinode(node string, drivers ...string) *unstructured.Unstructured {
	ds := []any{}
	for _, d := range drivers {
		ds = append(ds, map[string]any{"name": d, "nodeID": node})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "storage.k8s.io/v1", "kind": "CSINode",
		"metadata": map[string]any{"name": node},
		"spec":     map[string]any{"drivers": ds},
	}}
}

// holdNotifications makes kubelet hold every Notify(true) until release.
func (k *fakeKubelet) holdNotifications(t *testing.T) (release func()) {
	gate := make(chan struct{})
	k.mu.Lock()
	k.gate = gate
	k.mu.Unlock()
	var once sync.Once
	release = func() { once.Do(func() { close(gate) }) }
	t.Cleanup(release) // before the kubelet stops, even on failure
	return release
}

// BenchmarkRollingUpdate measures rolling updates with surge against the
// fake kubelet, which registers at once (a real kubelet adds up to one 1 s
// reconcile period): from the successor's start until kubelet's calls through
// E reach it, and until kubelet has its generation registered. Any
// deregistration fails the benchmark.
func BenchmarkRollingUpdate(b *testing.B) {
	n := newTestNode(b)
	k := startKubelet(b, n.regDir)
	prev := n.startPlugin(b, "p0", nil)
	k.waitRegistered(b, 0)
	prev.waitRole(b, roleRegistered)
	poll := func(cond func() bool) {
		deadline := time.Now().Add(20 * time.Second)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatal("timed out")
			}
			time.Sleep(100 * time.Microsecond)
		}
	}
	var toE, toRegistered time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		next := n.startPlugin(b, "p"+strconv.Itoa(i+1), nil)
		poll(func() bool {
			before := next.node.calls.Load()
			_, err := nodeGetInfo(n.endpoint())
			return err == nil && next.node.calls.Load() > before
		})
		toE += time.Since(start)
		poll(func() bool { d := k.registered(); return d != nil && d.version > prev.generation() })
		toRegistered += time.Since(start)

		b.StopTimer()
		prev.terminate()
		if err := prev.wait(b); err != nil {
			b.Fatal(err)
		}
		prev = next
		b.StartTimer()
	}
	b.ReportMetric(float64(toE.Microseconds())/1000/float64(b.N), "ms-to-E")
	b.ReportMetric(float64(toRegistered.Microseconds())/1000/float64(b.N), "ms-to-registered")
	if d := k.deregistrations(); d != 0 {
		b.Fatalf("%d deregistrations", d)
	}
}

// The holder rewrites a lease that was damaged or deleted; kubelet notices
// nothing.
func TestHolderRepairsDamagedLease(t *testing.T) {
	n := newTestNode(t)
	k := startKubelet(t, n.regDir)
	a := n.startPlugin(t, "a", nil)
	a.waitRole(t, roleRegistered)
	leasePath := filepath.Join(n.pluginDir, LeaseName)
	for _, damage := range []func() error{
		func() error { return os.WriteFile(leasePath, []byte("{garbage"), 0o644) },
		func() error { return os.Remove(leasePath) },
	} {
		if err := damage(); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the holder rewrites the lease", func() bool {
			l, err := readLease(leasePath)
			return err == nil && l != nil && l.Generation == a.generation() && l.Phase == PhaseRegistered && l.Holder.Pod == "a"
		})
	}
	if a.role() != roleRegistered || !aliveHeld(t, n, a.generation()) {
		t.Errorf("holder role %s", a.role())
	}
	assertNoDeregistration(t, k)
}

func aliveHeld(t *testing.T, n *testNode, g uint64) bool {
	held, err := filelock.Locked(filepath.Join(n.pluginDir, aliveName(g)))
	if err != nil {
		t.Fatal(err)
	}
	return held
}
