// Command roundtrips summarizes test/bench/roundtrips.sh: the rows that
// TestControllerRoundTrips (test/sanity) logged in each run of a base and
// a new arm, each line prefixed with "<arm> <run> ". It prints a Markdown
// table per driver and call: requests per call in each arm (the simulator
// counts them; they do not vary between runs) and their ratio; the phase's
// wall time in each arm (median) and the median over runs of the ratio
// new/base with its range; and the calls' summed time over the injected
// latency (median) in each arm.
package main

import (
	"bufio"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// sample is one phase of one run of one arm.
type sample struct {
	requests, wall, overInjected float64
}

func main() {
	type key struct{ driver, call string }
	var keys []key
	runs := map[key]map[string]map[string]sample{} // key → arm → run → sample
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		arm, run, cells, ok := parse(sc.Text())
		if !ok {
			continue
		}
		k := key{cells[0], cells[1]}
		if runs[k] == nil {
			keys = append(keys, k)
			runs[k] = map[string]map[string]sample{"base": {}, "new": {}}
		}
		runs[k][arm][run] = sample{num(cells[4]), num(strings.TrimSuffix(cells[6], "s")), num(cells[7])}
	}
	fmt.Println("| driver | call | requests/call base | new | new/base | wall base (median) | wall new (median) | wall new/base, median (min–max) | runs | sum of calls / injected, base | new |")
	fmt.Println("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, k := range keys {
		base, cur := runs[k]["base"], runs[k]["new"]
		var ratios, bw, nw, bi, ni, br, nr []float64
		for run, b := range base {
			n, ok := cur[run]
			if !ok {
				continue
			}
			ratios = append(ratios, n.wall/b.wall)
			bw, nw, bi, ni = append(bw, b.wall), append(nw, n.wall), append(bi, b.overInjected), append(ni, n.overInjected)
			br, nr = append(br, b.requests), append(nr, n.requests)
		}
		if len(ratios) == 0 {
			continue
		}
		fmt.Printf("| %s | %s | %.2f | %.2f | %.2f | %.2f s | %.2f s | %.2f (%.2f–%.2f) | %d | %.3f | %.3f |\n",
			k.driver, k.call, median(br), median(nr), median(nr)/median(br), median(bw), median(nw),
			median(ratios), slices.Min(ratios), slices.Max(ratios), len(ratios), median(bi), median(ni))
	}
}

// parse splits "<arm> <run> | c1 | c2 | … |".
func parse(line string) (arm, run string, cells []string, ok bool) {
	f := strings.SplitN(line, " ", 3)
	if len(f) < 3 || (f[0] != "base" && f[0] != "new") || !strings.HasPrefix(f[2], "| ontap") {
		return "", "", nil, false
	}
	for _, c := range strings.Split(strings.Trim(f[2], "| "), "|") {
		cells = append(cells, strings.TrimSpace(c))
	}
	return f[0], f[1], cells, len(cells) >= 8
}

func num(s string) float64 {
	v, err := strconv.ParseFloat(s, 64)
	if err != nil {
		fmt.Fprintf(os.Stderr, "roundtrips: not a number: %q\n", s)
		os.Exit(1)
	}
	return v
}

func median(v []float64) float64 {
	s := slices.Sorted(slices.Values(v))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}
