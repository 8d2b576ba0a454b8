package cluster_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// scenarioResult is what one scenario showed.
type scenarioResult struct {
	scenario
	From, To time.Time
	Window   window
	Cycles   []churnCycle
	Keeper   *keeperReport // nil before the workload runs
	Problems []string
}

// report collects the results and writes them as Markdown (docs/e2e.md
// holds a copy of one run).
type report struct {
	command string
	started time.Time
	results []scenarioResult
}

func newReport(command string) *report { return &report{command: command, started: time.Now()} }

func (r *report) add(res scenarioResult) { r.results = append(r.results, res) }

// path is $E2E_REPORT, else a file in the temporary directory.
func (r *report) path() string {
	if p := os.Getenv("E2E_REPORT"); p != "" {
		return p
	}
	return filepath.Join(os.TempDir(), "ontap-csi-e2e-report.md")
}

func (r *report) write() error {
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s, %s; command: `%s`\n\n", r.started.UTC().Format("2006-01-02 15:04 MST"),
		time.Since(r.started).Round(time.Second), r.command)
	b.WriteString("| scenario | result | CSINode samples (longest interval) | CSINode gaps: sampled / watched (longest) | failed volume ops: unregistered / not served / other | churn cycles (failed) | keeper journal (longest stall) |\n")
	b.WriteString("|---|---|---|---|---|---|---|\n")
	for _, res := range r.results {
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
		keeper := "—"
		if res.Keeper != nil {
			keeper = fmt.Sprintf("seq %d (%s)", res.Keeper.LastSeq, res.Keeper.MaxStall.Round(time.Millisecond))
		}
		bySample, byWatch, longest := gapCounts(res.Window.Gaps)
		gaps := fmt.Sprintf("%d / %d", bySample, byWatch)
		if longest > 0 {
			gaps += fmt.Sprintf(" (%s)", longest.Round(time.Millisecond))
		}
		fmt.Fprintf(&b, "| %s | %s | %d (%s) | %s | %d / %d / %d | %d (%d) | %s |\n",
			res.name, verdict, res.Window.Samples, res.Window.MaxSampleInterval.Round(time.Millisecond),
			gaps, res.Window.Failures[classUnregistered], res.Window.Failures[classNotServed],
			res.Window.Failures[classOther], len(res.Cycles), failedCycles, keeper)
	}
	for _, res := range r.results {
		fmt.Fprintf(&b, "\n#### %s: %s\n\n", res.name, res.title)
		fmt.Fprintf(&b, "%s, %d CSINode samples, %d sample errors.\n", res.To.Sub(res.From).Round(time.Millisecond), res.Window.Samples, res.Window.SampleErrors)
		if len(res.Window.Gaps) > 0 {
			b.WriteString("\nCSINode gaps (driver absent):\n")
			for _, g := range res.Window.Gaps {
				fmt.Fprintf(&b, "- %+.3fs to %+.3fs, %s, seen by %s\n", g.From.Sub(res.From).Seconds(),
					g.To.Sub(res.From).Seconds(), g.To.Sub(g.From).Round(time.Millisecond), g.By)
			}
		}
		if len(res.Problems) > 0 {
			b.WriteString("\nProblems:\n")
			for _, p := range res.Problems {
				fmt.Fprintf(&b, "- %s\n", p)
			}
		}
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
			fmt.Fprintf(&b, "%+8.3fs %-8s %s%s\n", rec.At.Sub(res.From).Seconds(), rec.Source, text, mark)
		}
		b.WriteString("```\n")
	}
	if err := os.WriteFile(r.path(), []byte(b.String()), 0o644); err != nil {
		return err
	}
	return nil
}

// timelineWidth keeps the report readable; the kubelet's log has the rest.
const timelineWidth = 240

// skipInTimeline drops records that add length without meaning: the
// workload namespace's pod state lines (the churn summary says the same).
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
