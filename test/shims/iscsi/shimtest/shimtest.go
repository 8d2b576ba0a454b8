// Package shimtest installs the iSCSI test shims for one test: it builds
// the iscsi-shim binary, lays out temporary roots (fake sysfs, fake /dev,
// shim state), starts the kernel daemon and, at the end of the test, stops
// it and tears down every session, multipath map and loop device, whether
// the test passed or not.
//
//	shimtest.Available(t)                       // skip unless root + losetup
//	env := shimtest.Start(t, shimtest.Options{SimURL: url, Multipath: true})
//	env.Setenv(t)                               // PATH and ISCSI_SHIM_* for this process
//	... run code that calls iscsiadm; read env.SysRoot, env.DevDir ...
package shimtest

import (
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/shims/iscsi/shim"
)

const shimPackage = "github.com/ontap-csi/ontap-csi/test/shims/iscsi/cmd/iscsi-shim"

// Available skips the test unless the shims can work here: they attach
// real loop devices, which needs root and losetup.
func Available(t testing.TB) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("the iSCSI shims need root (loop devices)")
	}
	if _, err := exec.LookPath("losetup"); err != nil {
		t.Skip("the iSCSI shims need losetup")
	}
	if _, err := os.Stat("/dev/loop-control"); err != nil {
		t.Skip("the iSCSI shims need /dev/loop-control")
	}
}

var (
	shared   bool // Main manages a process-wide build
	buildMu  sync.Mutex
	buildDir string
	binary   string
)

// Main makes all tests of a package share one build of the shim, made on
// the first Start and removed when the tests end; without it each Start
// builds into its test's temp dir (the Go build cache keeps that to a link
// step).
//
//	func TestMain(m *testing.M) { shimtest.Main(m) }
func Main(m *testing.M) { os.Exit(Run(m)) }

// Run is Main for a TestMain with teardown of its own: it returns the
// exit code instead of exiting.
func Run(m *testing.M) int {
	shared = true
	code := m.Run()
	buildMu.Lock()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	buildMu.Unlock()
	return code
}

// shimBinary returns the built shim, building it if needed.
func shimBinary(t testing.TB) string {
	t.Helper()
	buildMu.Lock()
	defer buildMu.Unlock()
	if !shared {
		bin, err := build(t.TempDir())
		if err != nil {
			t.Fatal(err)
		}
		return bin
	}
	if binary == "" {
		dir, err := os.MkdirTemp("", "iscsi-shim-bin-")
		if err != nil {
			t.Fatal(err)
		}
		buildDir = dir
		if binary, err = build(dir); err != nil {
			t.Fatal(err)
		}
	}
	return binary
}

func build(dir string) (string, error) {
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	bin := filepath.Join(dir, "iscsi-shim")
	cmd := exec.Command(goTool, "build", "-o", bin, shimPackage)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build %s: %v\n%s", shimPackage, err, out)
	}
	return bin, nil
}

// Options configure one shim instance.
type Options struct {
	// SimURL is the simulator's base URL (required); SimCA a PEM file
	// for an https URL.
	SimURL string
	SimCA  string
	// Multipath makes multipathd "run": every path gets a map, and the
	// multipath and multipathd commands are installed. Without it they
	// are absent, as on a host without multipath-tools.
	Multipath bool
	// InitiatorIQN is the host's IQN; a random one by default.
	InitiatorIQN string
	// MapDelay is how long after udev a path joins its map
	// (ISCSI_SHIM_MAP_DELAY, a duration or "never"); default the shim's.
	MapDelay string
}

// Env is one installed shim.
type Env struct {
	Root          string // parent of everything below
	BinDir        string // put first in PATH
	StateDir      string
	SysRoot       string // the node's --sys-root
	DevDir        string // the node's --dev-dir
	InitiatorFile string // initiatorname.iscsi
	InitiatorIQN  string
	vars          map[string]string
	kernel        *exec.Cmd
	kernelDone    chan struct{}
}

// Start installs the shims under a new temp root and starts the kernel
// daemon. Everything is undone by t.Cleanup.
func Start(t testing.TB, o Options) *Env {
	t.Helper()
	Available(t)
	if o.SimURL == "" {
		t.Fatal("shimtest: Options.SimURL is required")
	}
	root := t.TempDir()
	e := &Env{
		Root:          root,
		BinDir:        filepath.Join(root, "bin"),
		StateDir:      filepath.Join(root, "state"),
		SysRoot:       filepath.Join(root, "sys"),
		DevDir:        filepath.Join(root, "dev"),
		InitiatorFile: filepath.Join(root, "etc", "iscsi", "initiatorname.iscsi"),
		InitiatorIQN:  o.InitiatorIQN,
	}
	if e.InitiatorIQN == "" {
		e.InitiatorIQN = "iqn.2005-03.org.open-iscsi:" + randomHex(6)
	}
	for _, d := range []string{e.BinDir, e.StateDir, e.SysRoot, e.DevDir, filepath.Dir(e.InitiatorFile)} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(e.InitiatorFile, []byte("## generated by shimtest\nInitiatorName="+e.InitiatorIQN+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := shimBinary(t)
	names := []string{"iscsi-shim", "iscsiadm"}
	if o.Multipath {
		names = append(names, "multipath", "multipathd")
	}
	for _, n := range names {
		if err := os.Symlink(bin, filepath.Join(e.BinDir, n)); err != nil {
			t.Fatal(err)
		}
	}
	e.vars = map[string]string{
		shim.EnvSimURL:        o.SimURL,
		shim.EnvSimCA:         o.SimCA,
		shim.EnvState:         e.StateDir,
		shim.EnvSysRoot:       e.SysRoot,
		shim.EnvDevDir:        e.DevDir,
		shim.EnvInitiatorName: e.InitiatorFile,
		shim.EnvMultipathd:    "0",
	}
	if o.Multipath {
		e.vars[shim.EnvMultipathd] = "1"
	}
	if o.MapDelay != "" {
		e.vars[shim.EnvMapDelay] = o.MapDelay
	}
	e.startKernel(t)
	t.Cleanup(func() { e.stop(t) })
	return e
}

// Environ is the environment for a process that runs the node code: the
// current one with BinDir first in PATH and the shim's variables set.
func (e *Env) Environ() []string {
	env := []string{"PATH=" + e.BinDir + string(os.PathListSeparator) + os.Getenv("PATH")}
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if _, ours := e.vars[k]; k != "PATH" && !ours {
			env = append(env, kv)
		}
	}
	for k, v := range e.vars {
		env = append(env, k+"="+v)
	}
	return env
}

// Setenv sets PATH and the shim's variables in this process for the rest of
// the test, so tools run by name (hostexec.Host) are the shims. Like
// t.Setenv, it cannot be used in parallel tests.
func (e *Env) Setenv(t testing.TB) {
	t.Setenv("PATH", e.BinDir+string(os.PathListSeparator)+os.Getenv("PATH"))
	for k, v := range e.vars {
		t.Setenv(k, v)
	}
}

// State returns what the shim knows: sessions, devices, maps.
func (e *Env) State(t testing.TB) *shim.State {
	t.Helper()
	st, err := shim.LoadState(e.StateDir)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// KernelLog is what the kernel daemon logged so far.
func (e *Env) KernelLog() string {
	b, _ := os.ReadFile(filepath.Join(e.StateDir, "kernel.log"))
	return string(b)
}

func (e *Env) startKernel(t testing.TB) {
	t.Helper()
	logf, err := os.Create(filepath.Join(e.StateDir, "kernel.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(e.BinDir, "iscsi-shim"), "kernel")
	cmd.Env = e.Environ()
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group: a test that kills the node's group must not
	// kill the kernel. Pdeathsig: if the test binary dies, so does it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGTERM}
	runtime.LockOSThread() // Pdeathsig fires when the forking thread exits
	err = cmd.Start()
	runtime.UnlockOSThread()
	if err != nil {
		t.Fatal(err)
	}
	e.kernel, e.kernelDone = cmd, make(chan struct{})
	go func() { cmd.Wait(); close(e.kernelDone) }()
	pidFile := filepath.Join(e.StateDir, "kernel.pid")
	for deadline := time.Now().Add(30 * time.Second); ; {
		if _, err := os.Stat(pidFile); err == nil {
			return
		}
		select {
		case <-e.kernelDone:
			t.Fatalf("iSCSI shim kernel daemon exited: %s", e.KernelLog())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("iSCSI shim kernel daemon did not start: %s", e.KernelLog())
		}
	}
}

// stop ends the daemon, then removes every session, map and loop device.
func (e *Env) stop(t testing.TB) {
	if e.kernel != nil {
		e.kernel.Process.Signal(syscall.SIGTERM)
		select {
		case <-e.kernelDone:
		case <-time.After(10 * time.Second):
			e.kernel.Process.Kill()
			<-e.kernelDone
		}
	}
	if t.Failed() {
		t.Logf("iSCSI shim kernel log:\n%s", e.KernelLog())
	}
	cmd := exec.Command(filepath.Join(e.BinDir, "iscsi-shim"), "teardown")
	cmd.Env = e.Environ()
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		t.Errorf("iSCSI shim teardown: %v: %s", err, out.String())
	}
	if leaked := e.LeakedLoops(); len(leaked) > 0 {
		t.Errorf("iSCSI shim left loop devices behind: %v", leaked)
	}
}

// LeakedLoops lists loop devices the shim attached that are still bound.
// A path under a flushed map is released by the kernel at the map's last
// close, which may lag the detach a little.
func (e *Env) LeakedLoops() []string {
	for deadline := time.Now().Add(5 * time.Second); ; {
		st, err := shim.LoadState(e.StateDir)
		if err != nil {
			return []string{err.Error()}
		}
		leaked := append(st.Loops(), st.StillBound()...)
		if len(leaked) == 0 || time.Now().After(deadline) {
			return leaked
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func randomHex(n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b)
}
