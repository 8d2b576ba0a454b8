package demo

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// kubeletTools are the programs of the test/kubelet module the demo runs:
// kubeletsim (the real kubelet registration code of k8s.io/kubernetes
// v1.37.2) and the emulations of Trident 20.10's node pod.
type kubeletTools struct {
	KubeletSim, LegacyRegistrar, TridentMain string
}

// buildKubeletTools builds them with the go command, in their own module:
// k8s.io/kubernetes never enters the main module. The first build compiles
// much of Kubernetes (minutes), so it says so and shows that it is alive.
func buildKubeletTools(t *testing.T) kubeletTools {
	t.Helper()
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	say("building the kubelet registration code of k8s.io/kubernetes v1.37.2 (test/kubelet; the first build takes several minutes)")
	cmd := exec.Command("go", "build", "-o", dir+"/", "./cmd/kubeletsim", "./cmd/legacyregistrar", "./cmd/tridentmain")
	cmd.Dir = filepath.Join(root, "test", "kubelet")
	done := make(chan struct{})
	go func() {
		start := time.Now()
		for {
			select {
			case <-done:
				return
			case <-time.After(15 * time.Second):
				say("  … still building (%s)", time.Since(start).Round(time.Second))
			}
		}
	}()
	out, err := cmd.CombinedOutput()
	close(done)
	if err != nil {
		t.Fatalf("go build in test/kubelet: %v\n%s", err, out)
	}
	return kubeletTools{
		KubeletSim:      filepath.Join(dir, "kubeletsim"),
		LegacyRegistrar: filepath.Join(dir, "legacyregistrar"),
		TridentMain:     filepath.Join(dir, "tridentmain"),
	}
}

// kubeletCall is one call of kubelet's plugin manager into the CSI handler.
type kubeletCall struct {
	At       time.Time
	Op       string
	Endpoint string
	Versions []string
	Err      string
}

// generation is the G of a 1.0.G version, 0 for a legacy registrar's 1.0.0.
func (c kubeletCall) generation() uint64 {
	if len(c.Versions) == 0 {
		return 0
	}
	v := c.Versions[len(c.Versions)-1]
	g, _ := strconv.ParseUint(v[strings.LastIndex(v, ".")+1:], 10, 64)
	return g
}

// simSummary is kubeletsim's last line: what kubelet saw over the run.
type simSummary struct {
	Kubelet         string  `json:"kubelet"`
	FirstRegistered float64 `json:"firstRegistered"`
	DeregGaps       []struct {
		From, To float64
		Open     bool
	} `json:"deregGaps"`
	DeregMillis       float64 `json:"deregMillis"`
	Calls             int     `json:"calls"`
	FailedCalls       int     `json:"failedCalls"`
	FirstFailure      string  `json:"firstFailure"`
	LastFailure       string  `json:"lastFailure"`
	Registrations     int     `json:"registrations"`
	Deregistrations   int     `json:"deregistrations"`
	RegisteredSamples int     `json:"registeredSamples"`
	LateSamples       int     `json:"lateSamples"`
	EndsRegistered    bool    `json:"endsRegistered"`
}

// kubeletSim is a running kubeletsim: kubelet's plugin manager and CSI
// plugin on a kubelet root directory, sampled every 5–10 ms.
type kubeletSim struct {
	cmd     *exec.Cmd
	start   time.Time // its time zero
	mu      sync.Mutex
	calls   []kubeletCall
	summary *simSummary
	started chan struct{}
	done    chan struct{}
	stderr  strings.Builder
}

func startKubeletSim(t *testing.T, bin, root string) *kubeletSim {
	t.Helper()
	k := &kubeletSim{started: make(chan struct{}), done: make(chan struct{})}
	k.cmd = exec.Command(bin, "--root", root, "--json", "--kubelet-log", filepath.Join(filepath.Dir(root), "kubelet.log"))
	k.cmd.Stderr = &k.stderr
	k.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := k.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go k.read(bufio.NewScanner(out))
	t.Cleanup(func() {
		_ = k.cmd.Process.Kill()
		<-k.done
	})
	select {
	case <-k.started:
	case <-k.done:
		t.Fatalf("kubeletsim exited at start: %s", k.stderr.String())
	case <-time.After(time.Minute):
		t.Fatal("kubeletsim did not start")
	}
	return k
}

func (k *kubeletSim) read(sc *bufio.Scanner) {
	defer func() {
		_ = k.cmd.Wait()
		close(k.done)
	}()
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var line struct {
			T    float64 `json:"t"`
			At   string  `json:"at"`
			Kind string  `json:"kind"`
			kubeletCall
		}
		if json.Unmarshal(sc.Bytes(), &line) != nil {
			continue
		}
		at, _ := time.Parse(time.RFC3339Nano, line.At)
		k.mu.Lock()
		switch {
		case line.Kind == "summary":
			var s simSummary
			if json.Unmarshal(sc.Bytes(), &s) == nil {
				k.summary = &s
			}
		case k.start.IsZero() && !at.IsZero():
			// The first line is "kubelet started", once its watcher runs.
			k.start = at.Add(-time.Duration(line.T * float64(time.Second)))
			close(k.started)
		}
		if line.Kind == "call" {
			c := line.kubeletCall
			c.At = at
			k.calls = append(k.calls, c)
		}
		k.mu.Unlock()
	}
}

// Calls returns the handler calls so far.
func (k *kubeletSim) Calls() []kubeletCall {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]kubeletCall(nil), k.calls...)
}

// waitRegistered waits for a successful RegisterPlugin after since that
// match accepts.
func (k *kubeletSim) waitRegistered(t *testing.T, since time.Time, timeout time.Duration, accept func(kubeletCall) bool) kubeletCall {
	t.Helper()
	for deadline := time.Now().Add(timeout); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		for _, c := range k.Calls() {
			if c.Op == "RegisterPlugin" && c.Err == "" && !c.At.Before(since) && accept(c) {
				return c
			}
		}
	}
	t.Fatalf("kubelet registered nothing new within %v; its calls: %+v", timeout, k.Calls())
	return kubeletCall{}
}

// stop ends kubeletsim and returns its summary.
func (k *kubeletSim) stop(t *testing.T) simSummary {
	t.Helper()
	_ = k.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-k.done:
	case <-time.After(30 * time.Second):
		t.Fatal("kubeletsim did not stop")
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.summary == nil {
		t.Fatalf("kubeletsim wrote no summary: %s", k.stderr.String())
	}
	return *k.summary
}

// rel is t in seconds since kubeletsim started, as the timeline shows it.
func (k *kubeletSim) rel(at time.Time) string {
	return fmt.Sprintf("%+8.3fs", at.Sub(k.start).Seconds())
}

// legacyPod is a pod of Trident 20.10's node DaemonSet: trident-main and
// the node-driver-registrar sidecar (both emulated, test/kubelet/cmd).
type legacyPod struct {
	name  string
	procs []*exec.Cmd
	done  []chan struct{}
}

func startLegacyPod(t *testing.T, tools kubeletTools, kubeletDir, name string) *legacyPod {
	t.Helper()
	pluginDir := filepath.Join(kubeletDir, "plugins", driver)
	if err := os.MkdirAll(pluginDir, 0o750); err != nil {
		t.Fatal(err)
	}
	csiSock := filepath.Join(pluginDir, "csi.sock")
	p := &legacyPod{name: name}
	for _, argv := range [][]string{
		{tools.TridentMain, "--csi_endpoint=unix://" + csiSock, "--csi_node_name=" + nodeID},
		{tools.LegacyRegistrar, "--registration-dir=" + filepath.Join(kubeletDir, "plugins_registry"),
			"--driver=" + driver, "--kubelet-registration-path=" + csiSock},
	} {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		p.procs, p.done = append(p.procs, cmd), append(p.done, done)
	}
	t.Cleanup(func() {
		for i, c := range p.procs {
			_ = c.Process.Kill()
			<-p.done[i]
		}
	})
	return p
}

// terminate sends SIGTERM to both containers and waits until they exited.
func (p *legacyPod) terminate(t *testing.T) {
	t.Helper()
	for _, c := range p.procs {
		_ = c.Process.Signal(syscall.SIGTERM)
	}
	for _, d := range p.done {
		select {
		case <-d:
		case <-time.After(plugintest.StartupTimeout):
			t.Fatalf("%s did not exit", p.name)
		}
	}
}
