// Package scenario holds the handover scenarios S1–S12 of docs/design/registration.md §6,
// the legacy-registrar baselines, and the benchmark, written once against
// harness.Kubelet and run by each Kubernetes version's module.
//
// The CSI plugin keeps its registrations in package variables, so every
// scenario needs a kubelet of its own: Run re-executes the test binary for
// one test at a time.
package scenario

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/kubelet/harness"
)

// Environment of a child process.
const (
	childEnv  = "KUBELET_HARNESS_CHILD"  // the test the child runs
	resultEnv = "KUBELET_HARNESS_RESULT" // file the child writes its Result to
	caseEnv   = "KUBELET_HARNESS_CASE"   // benchmark case the child runs
)

var (
	strict = flag.Bool("strict", os.Getenv("KUBELET_HARNESS_STRICT") != "",
		"fail scenarios whose measured times exceed the design's bounds (S5, S7, S8, M1); by default only -fail-bound fails them")
	// failBound is generous enough for a loaded 2-core machine, so that it
	// fails a regression from "within a second or two" to "eventually" and
	// not a slow moment of the machine.
	failBound = flag.Duration("fail-bound", 5*time.Second,
		"fail scenarios whose bounded times (S5, S7, S8, M1) exceed this, whatever -strict says")
	s4Wait = flag.Duration("s4-wait", time.Minute,
		"S4: how long the node stays without a node plugin before the next pod starts")
	s11Updates = flag.Int("s11-updates", 100, "S11: number of rolling updates")
)

// Run runs scenario s in a child process of its own and reports its result
// as this test's. In the child it runs the scenario against the kubelet of
// newKubelet. Scenarios run in parallel (go test -parallel, default
// GOMAXPROCS); their nodes share nothing.
func Run(t *testing.T, s Scenario, newKubelet harness.Factory) {
	if os.Getenv(childEnv) != t.Name() {
		t.Parallel()
		if _, err := RunChild(t, t.Name(), nil); err != nil {
			t.Fatal(err)
		}
		return
	}
	t.Logf("%s: %s", s.ID, s.Title)
	n := harness.NewNode(t, newKubelet)
	res := s.Run(n)
	res.Kubelet = n.Kubelet.Version()
	writeResult(t, res)
}

// RunChild runs test name of this test binary in a child process with env
// added, streams its output into t's log, and returns the Result the child
// wrote. It fails t if the child fails.
func RunChild(t *testing.T, name string, env []string) (Result, error) {
	resFile := filepath.Join(t.TempDir(), "result.json")
	args := []string{"-test.run=^" + name + "$", "-test.count=1", "-test.v=true"}
	if d, ok := t.Deadline(); ok {
		args = append(args, "-test.timeout="+time.Until(d).Truncate(time.Second).String())
	}
	// Pass our own flags (-strict, -s4-wait, ...) through.
	for _, a := range os.Args[1:] {
		if !strings.HasPrefix(a, "-test.") {
			args = append(args, a)
		}
	}
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), childEnv+"="+name, resultEnv+"="+resFile)
	cmd.Env = append(cmd.Env, env...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		return Result{}, err
	}
	cmd.Stderr = cmd.Stdout
	if err := cmd.Start(); err != nil {
		return Result{}, err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		relay(t, out)
	}()
	wg.Wait()
	if err := cmd.Wait(); err != nil {
		return Result{}, fmt.Errorf("%s failed in its process: %v", name, err)
	}
	var res Result
	b, err := os.ReadFile(resFile)
	if err != nil {
		return res, fmt.Errorf("%s wrote no result: %v", name, err)
	}
	return res, json.Unmarshal(b, &res)
}

// relay copies the child's output into t's log line by line, indented so
// that the child's own "--- PASS" lines cannot be taken for ours.
func relay(t *testing.T, r io.Reader) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		t.Log("| " + sc.Text())
	}
}

func writeResult(t *testing.T, res Result) {
	path := os.Getenv(resultEnv)
	if path == "" {
		return
	}
	b, err := json.Marshal(res)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}
