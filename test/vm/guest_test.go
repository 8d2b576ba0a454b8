package vm

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// The binaries the guest suites run, by their name in the VM's /host/in:
// make vm builds them (static) into $ONTAP_CSI_VM_BIN; without it they are
// built here, once per test process.
var guestPrograms = []struct{ name, kind, pkg, tags string }{
	{"ontap-csi", "build", "../../cmd/ontap-csi", ""},
	{"ontap-csi-crashpoints", "build", "../../cmd/ontap-csi", "crashpoints"},
	{"guest.test", "test", "./guest", ""},
	{"e2e.test", "test", "../e2e", ""},
	{"sanity-nas.test", "test", "../sanity/nas", ""},
	{"sanity-san.test", "test", "../sanity/san", ""},
}

var guestBins struct {
	sync.Mutex
	dir   string
	built bool // by this process: TestMain removes it
}

func TestMain(m *testing.M) {
	code := m.Run()
	if guestBins.built {
		os.RemoveAll(guestBins.dir)
	}
	os.Exit(code)
}

func guestBinaries(t *testing.T) map[string]string {
	t.Helper()
	guestBins.Lock()
	defer guestBins.Unlock()
	if guestBins.dir == "" {
		guestBins.dir = os.Getenv("ONTAP_CSI_VM_BIN")
	}
	if guestBins.dir == "" {
		dir, err := os.MkdirTemp("", "ontap-csi-vm-bin-")
		if err != nil {
			t.Fatal(err)
		}
		guestBins.dir, guestBins.built = dir, true
		for _, p := range guestPrograms {
			args := []string{p.kind, "-o", filepath.Join(dir, p.name)}
			if p.kind == "test" {
				args = []string{"test", "-c", "-o", filepath.Join(dir, p.name)}
			}
			if p.tags != "" {
				args = append(args, "-tags", p.tags)
			}
			cmd := exec.Command("go", append(args, p.pkg)...)
			cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
			}
		}
	}
	files := map[string]string{"lio-multipath.sh": "testdata/lio-multipath.sh"}
	for _, p := range guestPrograms {
		files[p.name] = filepath.Join(guestBins.dir, p.name)
	}
	return files
}

// The e2e tests (test/e2e) that run on the real kernel: the data path
// with no shims; the crash tests; the faults only a real kernel shows.
const (
	e2eTests   = "^(TestNFSEndToEnd|TestNFSExportPolicyDenies|TestMaliciousRequests|TestISCSIEndToEnd|TestISCSIRawBlock|TestISCSICHAP|TestTridentNFSStateIsAdopted|TestTridentISCSIStateIsAdopted|TestNASEconomyEndToEnd|TestNASEconomyNFSVersions|TestSANEconomyEndToEnd)$"
	crashTests = "^TestCrashDuringISCSIStageAndUnstage$"
	// The cross-volume cells of issue 17 (docs/errors.md): a call for one
	// volume on another's paths gets its code and changes nothing.
	safetyTests = "^(TestCrossVolumeCallsChangeNothing|TestMountsReplacedUnderARecordAreLeftAlone)$"
	benchTests  = "^TestNodeBenchmark$"
	faultTests  = "^(TestPathLostAndRestoredDuringIO|TestLUNUnmappedWhileStaged|TestGhostMapIsRemoved|TestNFSServerStoppedWhileMounted|TestMultipathMapLateOrNever|TestISCSIPathGrace|TestFencedNodeWritesNothing)$"
)

// guestStep is one suite of TestGuest and how to judge its output.
type guestStep struct {
	Step
	check func(t *testing.T, r StepResult)
}

// sanityNodeSpecs runs csi-sanity's Node Service specs only: they are its
// specs that mount, attach and format, which is what the real kernel is
// here for. The rest (Identity, Controller, snapshots, expansion,
// modification) reach only the controller and the simulator's REST API,
// the same code on any kernel; the unit tests run every spec through the
// shims (test/sanity/nas, test/sanity/san). On this emulated CPU they were
// half of the nas step (ontap-san's step is its attaches, node specs).
const sanityNodeSpecs = "-ginkgo.focus=Node Service"

func guestSteps() []guestStep {
	goTest := func(bin, run string, timeout time.Duration) []string {
		cmd := []string{"/host/in/" + bin, "-test.v", "-test.count=1", "-test.timeout=" + timeout.String()}
		if run != "" {
			cmd = append(cmd, "-test.run="+run)
		}
		return cmd
	}
	// The plugintest suites (test/e2e, test/sanity) on the real kernel.
	realKernel := []string{"ONTAP_CSI_REAL_KERNEL=1", "ONTAP_CSI_E2E_BIN=/host/in"}
	steps := []guestStep{
		{Step{Name: "kernel", Command: []string{"uname", "-r"}}, checkKernel},
		{Step{Name: "lio-multipath", Command: []string{"/bin/bash", "/host/in/lio-multipath.sh"}}, checkScript},
		{Step{Name: "guest", Command: goTest("guest.test", "", 20*time.Minute)}, checkGoTest},
		{Step{Name: "sanity-nas", Command: append(goTest("sanity-nas.test", "", 20*time.Minute), sanityNodeSpecs), Env: realKernel}, checkSanity},
		{Step{Name: "sanity-san", Command: append(goTest("sanity-san.test", "", 30*time.Minute), sanityNodeSpecs), Env: realKernel}, checkSanity},
		{Step{Name: "e2e", Command: goTest("e2e.test", e2eTests, 30*time.Minute), Env: realKernel}, checkGoTest},
		{Step{Name: "safety", Command: goTest("e2e.test", safetyTests, 30*time.Minute), Env: realKernel}, checkGoTest},
		{Step{Name: "crash", Command: goTest("e2e.test", crashTests, 30*time.Minute), Env: realKernel}, checkCrash},
		{Step{Name: "faults", Command: goTest("e2e.test", faultTests, 30*time.Minute), Env: realKernel}, checkGoTest},
	}
	// The node benchmark on the real kernel, only when asked (make bench:
	// ONTAP_CSI_BENCH=1 ONTAP_CSI_VM_STEPS=^bench$), with the host's
	// choice of rounds and cases (test/e2e/bench_test.go).
	if os.Getenv("ONTAP_CSI_BENCH") != "" {
		env := append(realKernel, "ONTAP_CSI_BENCH=1")
		for _, name := range []string{"ONTAP_CSI_BENCH_ROUNDS", "ONTAP_CSI_BENCH_ONLY", "ONTAP_CSI_BENCH_PODS", "ONTAP_CSI_BENCH_LOG_LEVEL"} {
			if v := os.Getenv(name); v != "" {
				env = append(env, name+"="+v)
			}
		}
		steps = append(steps, guestStep{Step{Name: "bench", Command: goTest("e2e.test", benchTests, 60*time.Minute),
			Env: env}, checkBench})
	}
	return steps
}

// checkBench passes the benchmark's report (bench.md in the step's
// output) on to $ONTAP_CSI_BENCH_OUT on the host.
func checkBench(t *testing.T, r StepResult) {
	checkGoTest(t, r)
	md, err := os.ReadFile(filepath.Join(r.OutDir, "bench.md"))
	if err != nil {
		t.Fatalf("no report from the benchmark: %v", err)
	}
	t.Log("\n" + string(md))
	if out := os.Getenv("ONTAP_CSI_BENCH_OUT"); out != "" {
		if err := os.WriteFile(out, md, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// TestGuest boots the VM once and runs every guest suite in it, one step
// each, reported as a subtest: the kernel and the daemons (uname, a LUN
// made by hand in LIO), the guest tests (test/vm/guest: the simulator's
// kernel data plane), csi-sanity for ontap-nas and ontap-san, the
// data-path e2e suite, its crash tests and the faults only a real kernel
// shows (test/e2e on the real kernel). ONTAP_CSI_VM_STEPS, a regular
// expression, picks steps.
func TestGuest(t *testing.T) {
	Available(t)
	steps := guestSteps()
	if re := os.Getenv("ONTAP_CSI_VM_STEPS"); re != "" {
		pick := regexp.MustCompile(re)
		steps = slices.DeleteFunc(steps, func(s guestStep) bool { return !pick.MatchString(s.Name) })
	}
	var o Options
	for _, s := range steps {
		o.Steps = append(o.Steps, s.Step)
	}
	o.Files = guestBinaries(t)
	o.Env = []string{"ONTAP_CSI_VM_GUEST=/host/in"}
	if os.Getenv("ONTAP_CSI_VM_TRACE") == "1" {
		// init.sh keeps the daemons' logs per step (trace-*.log), the
		// tests print the plugin's whole log, and Run keeps them all.
		o.Env = append(o.Env, "ONTAP_CSI_VM_TRACE=1", "ONTAP_CSI_E2E_VERBOSE=1")
	}
	o.Timeout = 75 * time.Minute
	res := Run(t, o)
	var summary strings.Builder
	fmt.Fprintf(&summary, "boot %s, whole run %s\n", res.Boot.Round(time.Second), res.Elapsed.Round(time.Second))
	for i, s := range steps {
		r := res.Steps[i]
		fmt.Fprintf(&summary, "  %-14s %-6s exit %d  %s\n", s.Name, r.Elapsed.Round(time.Second), r.ExitCode, r.CPU)
		t.Run(s.Name, func(t *testing.T) {
			if !r.Ran {
				t.Fatalf("the step did not run to its end\n%s", tail(r.Output, 20000))
			}
			s.check(t, r)
			warnings(t, r)
		})
	}
	t.Log(summary.String())
}

func checkKernel(t *testing.T, r StepResult) {
	if r.ExitCode != 0 || !strings.HasSuffix(strings.TrimSpace(r.Output), "-amd64") {
		t.Fatalf("uname -r: exit %d, %q", r.ExitCode, r.Output)
	}
	t.Logf("kernel %s", strings.TrimSpace(r.Output))
}

func checkScript(t *testing.T, r StepResult) {
	if r.ExitCode != 0 || !strings.Contains(r.Output, "\nPASS\n") {
		t.Fatalf("exit %d\n%s", r.ExitCode, tail(r.Output, 20000))
	}
}

// checkGoTest fails unless a test binary passed, and lists what ran and
// what the tests logged themselves (their t.Log lines, not the plugin's
// log): the figures docs/vm.md quotes.
func checkGoTest(t *testing.T, r StepResult) {
	if r.ExitCode != 0 || !strings.Contains(r.Output, "\nPASS\n") {
		t.Fatalf("exit %d\n%s%s", r.ExitCode, tail(r.Output, 60000), stepLogs(r))
	}
	for _, line := range strings.Split(r.Output, "\n") {
		if strings.HasPrefix(line, "--- PASS") || strings.HasPrefix(line, "--- SKIP") || testLogLine.MatchString(line) || slowSubtest(line) {
			t.Log(strings.TrimSpace(line))
		}
	}
}

// slowSubtest reports whether line is a first-level subtest's result
// ("    --- PASS: TestX/y (12.34s)") that took 5 s or more: where a step's
// time went, for the steps whose time varies from run to run.
func slowSubtest(line string) bool {
	m := subtestResult.FindStringSubmatch(line)
	if m == nil {
		return false
	}
	secs, err := strconv.ParseFloat(m[1], 64)
	return err == nil && secs >= 5
}

var subtestResult = regexp.MustCompile(`^    --- (?:PASS|FAIL): \S+ \(([0-9.]+)s\)$`)

// testLogLine is a test's own t.Log line in `go test -v` output.
var testLogLine = regexp.MustCompile(`^\s+[a-z0-9_]+_test\.go:\d+: `)

// sanityCounts is Ginkgo's summary: "Ran 62 of 80 Specs", then
// "62 Passed | 0 Failed | 0 Pending | 18 Skipped".
var sanityCounts = regexp.MustCompile(`Ran (\d+) of (\d+) Specs[^\n]*\n[^\n]*?(\d+) Passed \| (\d+) Failed \| (\d+) Pending \| (\d+) Skipped`)

// ansi are the colour escapes Ginkgo writes.
var ansi = regexp.MustCompile(`\x1b\[[0-9;]*m`)

func checkSanity(t *testing.T, r StepResult) {
	m := sanityCounts.FindStringSubmatch(ansi.ReplaceAllString(r.Output, ""))
	if m != nil {
		t.Logf("csi-sanity: Ran %s of %s Specs: %s Passed, %s Failed, %s Pending, %s Skipped", m[1], m[2], m[3], m[4], m[5], m[6])
	}
	checkGoTest(t, r)
	if m == nil {
		t.Fatal("no Ginkgo summary in the output")
	}
	if m[1] == "0" {
		t.Fatalf("csi-sanity ran no spec (focus %q)", sanityNodeSpecs)
	}
}

// crashSteps is what the crash test logs: the crash points it found.
var crashSteps = regexp.MustCompile(`stage steps \[([^\]]*)\], unstage steps \[([^\]]*)\]`)

func checkCrash(t *testing.T, r StepResult) {
	checkGoTest(t, r)
	m := crashSteps.FindStringSubmatch(r.Output)
	if m == nil {
		t.Fatal("the crash test did not log its crash points")
	}
	t.Logf("crash points fired: %s %s", m[1], m[2])
}

// stepLogs are the tails of the logs the step left in its directory: its
// dmesg, and the plugin's warnings (plugintest, ontap-csi-warnings.log).
func stepLogs(r StepResult) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(r.OutDir, "*.log"))
	for _, f := range logs {
		if filepath.Base(f) == "output.log" {
			continue
		}
		if data, err := os.ReadFile(f); err == nil {
			b.WriteString("\n--- " + filepath.Base(f) + " (tail) ---\n" + tail(string(data), 20000))
		}
	}
	return b.String()
}

// warnings logs what the plugin complained about in a step that passed:
// where the real kernel disagrees with it without failing a call.
func warnings(t *testing.T, r StepResult) {
	b, _ := os.ReadFile(filepath.Join(r.OutDir, "ontap-csi-warnings.log"))
	if len(b) > 0 {
		t.Logf("ontap-csi warnings and errors:\n%s", tail(string(b), 30000))
	}
}
