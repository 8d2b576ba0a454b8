package scenario

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/kubelet/harness"
)

var (
	benchRuns = flag.Int("bench-runs", 0, "benchmark: runs of each of S1, S2, S3 and their legacy baselines (0 skips the benchmark)")
	benchOut  = flag.String("bench-out", "", "benchmark: also write the Markdown report to this file")
)

// benchPairs are the benchmarked scenarios, each with its legacy baseline.
var benchPairs = [][2]Scenario{{S1, L1}, {S2, L2}, {S3, L3}}

// Bench runs S1, S2 and S3 and their legacy-registrar baselines -bench-runs
// times each, interleaved, every run in a fresh process with a fresh
// kubelet, and reports the deregistration gap and the time from process
// start to registered as a Markdown table.
func Bench(t *testing.T, newKubelet harness.Factory) {
	if os.Getenv(childEnv) == t.Name() {
		id := os.Getenv(caseEnv)
		for _, p := range benchPairs {
			for _, s := range p {
				if s.ID == id {
					n := harness.NewNode(t, newKubelet)
					res := s.Run(n)
					res.Kubelet = n.Kubelet.Version()
					writeResult(t, res)
					return
				}
			}
		}
		t.Fatalf("unknown benchmark case %q", id)
	}
	if *benchRuns <= 0 {
		t.Skip("benchmark: run with -args -bench-runs=20")
	}
	results := map[string][]Result{}
	failures := map[string]int{}
	for i := 1; i <= *benchRuns; i++ {
		for _, p := range benchPairs {
			for _, s := range p {
				res, err := RunChild(t, t.Name(), []string{caseEnv + "=" + s.ID})
				if err != nil {
					t.Errorf("run %d of %s: %v", i, s.ID, err)
					failures[s.ID]++
					continue
				}
				results[s.ID] = append(results[s.ID], res)
			}
		}
		t.Logf("benchmark: %d of %d rounds done", i, *benchRuns)
	}
	report := benchReport(t, results, failures)
	fmt.Println(report)
	if *benchOut != "" {
		if err := os.WriteFile(*benchOut, []byte(report), 0o644); err != nil {
			t.Error(err)
		}
	}
	for _, p := range benchPairs {
		for _, r := range results[p[0].ID] {
			if r.Gap != 0 {
				t.Errorf("%s had a deregistration gap of %v; it must be 0", p[0].ID, r.Gap)
			}
		}
	}
}

func benchReport(t *testing.T, results map[string][]Result, failures map[string]int) string {
	var b strings.Builder
	version := "?"
	for _, rs := range results {
		for _, r := range rs {
			version = r.Kubelet
		}
	}
	fmt.Fprintf(&b, "Kubelet registration handover, real kubelet code %s, %d runs per scenario, %s, %d CPUs, %s.\n\n",
		version, *benchRuns, runtime.Version(), runtime.NumCPU(), time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "Command: `%s`\n\n", benchCommand(t))
	b.WriteString("| scenario | node plugin | runs | deregistration gap p50 / max | runs left unregistered | start → registered, new pod p50 / p99 | start → registered, first pod p50 / p99 | unserved calls p50 / max |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, p := range benchPairs {
		for i, s := range p {
			rs := results[s.ID]
			who := "ontap-csi (built-in registration)"
			if i == 1 {
				who = "legacy registrar emulation"
			}
			var gap, served, next, first []time.Duration
			open := 0
			for _, r := range rs {
				gap = append(gap, r.Gap)
				served = append(served, r.ServedGap)
				if r.NextRegistered > 0 {
					next = append(next, r.NextRegistered)
				}
				first = append(first, r.FirstRegistered)
				if r.GapOpen {
					open++
				}
			}
			runs := fmt.Sprint(len(rs))
			if f := failures[s.ID]; f > 0 {
				runs += fmt.Sprintf(" (+%d failed)", f)
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s / %s | %d | %s / %s | %s / %s | %s / %s |\n",
				p[0].ID, who, runs,
				ms(pct(gap, 50)), ms(pct(gap, 100)), open,
				ms(pct(next, 50)), ms(pct(next, 99)),
				ms(pct(first, 50)), ms(pct(first, 99)),
				ms(pct(served, 50)), ms(pct(served, 100)))
		}
	}
	b.WriteString("\nThe legacy runs take the same steps with Trident 20.10's DaemonSet (trident-main + node-driver-registrar v2 emulation). " +
		"Whether the old registrar's unlink on SIGTERM hits the new pod's socket (the seed bug, permanent loss) depends on whether the new registrar re-created the socket by then; S9 forces that order.\n")
	b.WriteString("\nGap: time in which kubelet's CSI plugin (ValidatePlugin probe, every 5 ms) or CSINode lacked the driver, from the first pod's registration to the end of the run. " +
		"A legacy run that ends unregistered has its gap counted up to the end of its 10 s observation: that loss is permanent. " +
		"Start → registered: from the pod's process start to kubelet's RegisterPlugin returning success for it (kubelet's reconciler runs every 1 s). " +
		"Unserved calls: time in which kubelet's own CSI client (driver lookup, fresh dial, every 10 ms) got no answer.\n")
	return b.String()
}

func benchCommand(t *testing.T) string {
	wd, _ := os.Getwd()
	root, err := harness.RepoRoot()
	rel := wd
	if err == nil {
		rel = strings.TrimPrefix(strings.TrimPrefix(wd, root), "/")
	}
	return fmt.Sprintf("cd %s && go test -run '^%s$' -timeout 0 -v -args -bench-runs=%d", rel, t.Name(), *benchRuns)
}

// pct is the nearest-rank percentile of ds; -1 when ds is empty.
func pct(ds []time.Duration, p int) time.Duration {
	if len(ds) == 0 {
		return -1
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	rank := (p*len(s) + 99) / 100
	return s[max(rank, 1)-1]
}

func ms(d time.Duration) string {
	if d < 0 {
		return "–"
	}
	return fmt.Sprintf("%d ms", d.Round(time.Millisecond).Milliseconds())
}
