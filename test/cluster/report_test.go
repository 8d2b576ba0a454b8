package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"time"
)

// scenarioResult is what one scenario showed.
type scenarioResult struct {
	scenario
	From, To time.Time
	Window   window
	Cycles   []churnCycle
	Keepers  []keeperReport // none before the workload runs
	Notes    []string       // what the scenario established
	// OntapBefore and OntapAfter are the SVM's objects at the start and
	// the end of the scenario.
	OntapBefore, OntapAfter ontapObjects
	// OntapVolumes are the ONTAP volumes of the claims the scenario bound
	// in its namespace, and OntapSeen every object naming one of them in
	// the listings made while it ran.
	OntapVolumes []string
	OntapSeen    []string
	Problems     []string
}

// report collects the results and writes them as Markdown (docs/e2e.md
// holds a copy of one run).
type report struct {
	command string
	started time.Time
	mu      sync.Mutex
	results []scenarioResult
}

func newReport(command string) *report { return &report{command: command, started: time.Now()} }

func (r *report) add(res scenarioResult) {
	r.mu.Lock()
	r.results = append(r.results, res)
	r.mu.Unlock()
}

// path is $E2E_REPORT, else a file in the temporary directory.
func (r *report) path() string {
	if p := os.Getenv("E2E_REPORT"); p != "" {
		return p
	}
	return filepath.Join(os.TempDir(), "ontap-csi-e2e-report.md")
}

func (r *report) write() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	sort.SliceStable(r.results, func(i, j int) bool { return r.results[i].From.Before(r.results[j].From) })
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s, %s; command: `%s`\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"),
		time.Since(r.started).Round(time.Second), r.command)
	b.WriteString("| scenario | result | duration | CSINode samples (longest interval) | CSINode gaps by node: sampled / watched (longest) | failed volume ops: unregistered / not served / other | churn cycles (failed) | keepers: journal seq (longest stall) |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|\n")
	for _, res := range r.results {
		writeSummaryRow(&b, res)
	}
	for _, res := range r.results {
		writeScenario(&b, res)
	}
	return os.WriteFile(r.path(), []byte(b.String()), 0o644)
}

func writeSummaryRow(b *strings.Builder, res scenarioResult) {
	verdict := "pass"
	if len(res.Problems) > 0 {
		verdict = "**FAIL**"
	}
	failedCycles := 0
	for _, c := range res.Cycles {
		if c.Err != "" {
			failedCycles++
		}
	}
	var keepers []string
	for _, k := range res.Keepers {
		keepers = append(keepers, fmt.Sprintf("%d (%s)", k.LastSeq, k.MaxStall.Round(time.Millisecond)))
	}
	if len(keepers) == 0 {
		keepers = []string{"—"}
	}
	fmt.Fprintf(b, "| %s | %s | %s | %d (%s) | %s | %d / %d / %d | %d (%d) | %s |\n",
		res.name, verdict, res.To.Sub(res.From).Round(100*time.Millisecond), res.Window.Samples,
		res.Window.MaxSampleInterval.Round(time.Millisecond), gapSummary(res.Window.Gaps),
		res.Window.Failures[classUnregistered], res.Window.Failures[classNotServed],
		res.Window.Failures[classOther], len(res.Cycles), failedCycles, strings.Join(keepers, ", "))
}

// gapSummary is "none", or per node "node: sampled / watched (longest)".
func gapSummary(gaps []gap) string {
	byNode := map[string][]gap{}
	for _, g := range gaps {
		byNode[g.Node] = append(byNode[g.Node], g)
	}
	if len(byNode) == 0 {
		return "none"
	}
	var parts []string
	for node, gs := range byNode {
		bySample, byWatch, longest := gapCounts(gs)
		parts = append(parts, fmt.Sprintf("%s: %d / %d (%s)", node, bySample, byWatch, longest.Round(time.Millisecond)))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

func writeScenario(b *strings.Builder, res scenarioResult) {
	fmt.Fprintf(b, "\n#### %s: %s\n\n", res.name, res.title)
	fmt.Fprintf(b, "%s, %d CSINode samples, %d sample errors.\n", res.To.Sub(res.From).Round(time.Millisecond), res.Window.Samples, res.Window.SampleErrors)
	if len(res.Notes) > 0 {
		b.WriteString("\nEstablished:\n")
		for _, n := range res.Notes {
			fmt.Fprintf(b, "- %s\n", n)
		}
	}
	if len(res.Window.Gaps) > 0 {
		b.WriteString("\nCSINode gaps (driver absent):\n")
		for _, g := range res.Window.Gaps {
			fmt.Fprintf(b, "- %s: %+.3fs to %+.3fs, %s, seen by %s\n", g.Node, g.From.Sub(res.From).Seconds(),
				g.To.Sub(res.From).Seconds(), g.To.Sub(g.From).Round(time.Millisecond), g.By)
		}
	}
	fmt.Fprintf(b, "\nFailed kubelet volume operations: %s.\n", failedOps(res.Window.Records))
	if len(res.Problems) > 0 {
		b.WriteString("\nProblems:\n")
		for _, p := range res.Problems {
			fmt.Fprintf(b, "- %s\n", p)
		}
	}
	writeOntap(b, res)
	b.WriteString("\n```text\n")
	for _, rec := range res.Window.Records {
		if skipInTimeline(rec) {
			continue
		}
		mark := ""
		if rec.Class != "" {
			mark = " [" + string(rec.Class) + "]"
		}
		text := rec.Text
		if r := []rune(text); len(r) > timelineWidth {
			text = string(r[:timelineWidth]) + "…"
		}
		fmt.Fprintf(b, "%+8.3fs %-8s %s%s\n", rec.At.Sub(res.From).Seconds(), rec.Source, text, mark)
	}
	b.WriteString("```\n")
}

// writeOntap lists the SVM's objects before and after the scenario and
// what changed. For a scenario with claims of its own it lists their
// objects: none before, those seen while it ran, none left after. The
// whole SVM's diff is shown only for scenarios that run alone: the
// group's other scenarios and the churn change it at the same time.
func writeOntap(b *strings.Builder, res scenarioResult) {
	before, after := res.OntapBefore, res.OntapAfter
	fmt.Fprintf(b, "\nONTAP objects, whole SVM: %d before, %d after.\n", len(before), len(after))
	if len(res.OntapVolumes) > 0 {
		mineBefore, mineAfter := before.about(res.OntapVolumes), after.about(res.OntapVolumes)
		fmt.Fprintf(b, "Of this scenario's %d volumes: %d objects before, %d after.\n", len(res.OntapVolumes), len(mineBefore), len(mineAfter))
		writeLines(b, "Left after", mineAfter)
		writeLines(b, "Seen while it ran", res.OntapSeen)
		if res.group != "" {
			return
		}
	}
	added, removed := before.diff(after)
	if len(added)+len(removed) == 0 {
		b.WriteString("SVM unchanged.\n")
		return
	}
	var lines []string
	for _, l := range added {
		lines = append(lines, "\\+ "+l)
	}
	for _, l := range removed {
		lines = append(lines, "\\- "+l)
	}
	writeLines(b, "SVM changed", lines)
}

// writeLines writes a heading and a list, nothing if the list is empty.
func writeLines(b *strings.Builder, heading string, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintf(b, "\n%s:\n", heading)
	for _, l := range lines {
		fmt.Fprintf(b, "- %s\n", l)
	}
}

// failedOps counts the failed volume operations of a window by class, per
// node as kubelet logged them and as Warning events: "none", or e.g.
// "e2e-node-1 kubelet: 2 endpoint not served; events: 2 endpoint not
// served".
func failedOps(records []record) string {
	counts := map[string]map[failureClass]int{}
	for _, r := range records {
		if r.Class == "" {
			continue
		}
		who := "events"
		if r.Source == "kubelet" {
			who, _, _ = strings.Cut(r.Text, ":")
			who += " kubelet"
		}
		if counts[who] == nil {
			counts[who] = map[failureClass]int{}
		}
		counts[who][r.Class]++
	}
	if len(counts) == 0 {
		return "none"
	}
	var parts []string
	for who, byClass := range counts {
		var cs []string
		for class, n := range byClass {
			cs = append(cs, fmt.Sprintf("%d %s", n, class))
		}
		sort.Strings(cs)
		parts = append(parts, who+": "+strings.Join(cs, ", "))
	}
	sort.Strings(parts)
	return strings.Join(parts, "; ")
}

// timelineWidth keeps the report readable; the kubelet's log has the rest.
const timelineWidth = 240

// skipInTimeline drops records that add length without meaning: the churn
// pods' state lines (the churn summary says the same).
func skipInTimeline(rec record) bool {
	return rec.Source == "pod" && strings.HasPrefix(rec.Text, workloadNS+"/churn-")
}

// gapCounts splits gaps by who saw them (the samplers or the watch) and
// returns the longest.
func gapCounts(gaps []gap) (bySample, byWatch int, longest time.Duration) {
	for _, g := range gaps {
		if strings.HasPrefix(g.By, "watch") {
			byWatch++
		} else {
			bySample++
		}
		if d := g.To.Sub(g.From); d > longest {
			longest = d
		}
	}
	return bySample, byWatch, longest
}
