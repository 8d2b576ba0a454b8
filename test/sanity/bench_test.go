package sanity

import (
	"flag"
	"fmt"
	"os"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// The benchmarks time CSI calls against the simulator's realistic latency
// model (docs/design/ontap-rest.md §4.7) and compare them with the latency the
// simulator injected while serving them: a ratio near 1 means the plugin
// adds nothing but ONTAP's own time (no needless job polling, no sleeps).
// ONTAP requests per call come from the simulator's counters.
//
//	go test ./test/sanity -run '^$' -bench . -benchtime 10x
//
// prints, after the usual benchmark lines, a Markdown table for
// docs/benchmarks.md.

type benchResult struct {
	driver, call             string
	n                        int
	wall, injected           time.Duration
	requests                 int64
	minRequests, maxRequests int64
}

var (
	benchMu      sync.Mutex
	benchResults = map[string]*benchResult{}
)

func TestMain(m *testing.M) {
	flag.Parse()
	if f := flag.Lookup("test.bench"); f != nil && f.Value.String() != "" {
		// One info line per CSI call would interleave with the results.
		logrus.SetLevel(logrus.WarnLevel)
	}
	code := m.Run()
	printBenchTable()
	os.Exit(code)
}

// measure runs one CSI call and accounts its wall time, the latency the
// simulator injected meanwhile, and the ONTAP requests it made.
func measure(b *testing.B, p *Plugin, r *benchResult, call func() error) {
	b.Helper()
	before := p.Sim.Stats()
	start := time.Now()
	err := call()
	wall := time.Since(start)
	after := p.Sim.Stats()
	if err != nil {
		b.Fatalf("%s: %v", r.call, err)
	}
	reqs := after.Requests - before.Requests
	r.n++
	r.wall += wall
	r.injected += after.Injected - before.Injected
	r.requests += reqs
	if r.n == 1 || reqs < r.minRequests {
		r.minRequests = reqs
	}
	r.maxRequests = max(r.maxRequests, reqs)
}

func report(b *testing.B, r *benchResult) {
	if r.n == 0 {
		return
	}
	n := float64(r.n)
	b.ReportMetric(float64(r.wall.Milliseconds())/n, "ms/call")
	b.ReportMetric(float64(r.injected.Milliseconds())/n, "injected-ms/call")
	b.ReportMetric(r.wall.Seconds()/r.injected.Seconds(), "ratio")
	b.ReportMetric(float64(r.requests)/n, "ontap-req/call")
	benchMu.Lock()
	defer benchMu.Unlock()
	key := r.driver + " " + r.call
	// The benchmark function runs more than once while Go sizes b.N;
	// the run with the most calls is the one reported.
	if prev, ok := benchResults[key]; !ok || prev.n <= r.n {
		benchResults[key] = r
	}
}

func benchPlugin(b *testing.B, driver string) *Plugin {
	p := Start(b, Options{Driver: driver, Sim: ontapsim.Config{Latency: ontapsim.RealisticLatency(), Seed: 42}})
	// The first call connects the backend (SVM, LIFs, iSCSI service); a
	// long-running controller has done that long ago.
	if _, err := p.Controller.GetCapacity(Ctx(b), &csi.GetCapacityRequest{}); err != nil {
		b.Fatal(err)
	}
	return p
}

func benchCreateRequest(name string) *csi.CreateVolumeRequest {
	return &csi.CreateVolumeRequest{
		Name:               name,
		CapacityRange:      &csi.CapacityRange{RequiredBytes: 10 << 30},
		VolumeCapabilities: []*csi.VolumeCapability{mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER)},
	}
}

func BenchmarkCreateVolume(b *testing.B) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		b.Run(driver, func(b *testing.B) {
			p := benchPlugin(b, driver)
			r := &benchResult{driver: driver, call: "CreateVolume"}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				measure(b, p, r, func() error {
					_, err := p.Controller.CreateVolume(Ctx(b), benchCreateRequest(fmt.Sprintf("pvc-bench-%d", i)))
					return err
				})
			}
			b.StopTimer()
			report(b, r)
		})
	}
}

func BenchmarkControllerPublishVolume(b *testing.B) {
	for _, driver := range []string{config.DriverONTAPNAS, config.DriverONTAPSAN} {
		b.Run(driver, func(b *testing.B) {
			p := benchPlugin(b, driver)
			for i := 0; i < b.N; i++ {
				if _, err := p.Controller.CreateVolume(Ctx(b), benchCreateRequest(fmt.Sprintf("pvc-bench-%d", i))); err != nil {
					b.Fatal(err)
				}
			}
			r := &benchResult{driver: driver, call: "ControllerPublishVolume"}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				measure(b, p, r, func() error {
					_, err := p.Controller.ControllerPublishVolume(Ctx(b), &csi.ControllerPublishVolumeRequest{
						VolumeId: fmt.Sprintf("pvc-bench-%d", i), NodeId: NodeID,
						VolumeCapability: mountCapability(csi.VolumeCapability_AccessMode_SINGLE_NODE_WRITER),
					})
					return err
				})
			}
			b.StopTimer()
			report(b, r)
		})
	}
}

func printBenchTable() {
	benchMu.Lock()
	defer benchMu.Unlock()
	if len(benchResults) == 0 {
		return
	}
	keys := make([]string, 0, len(benchResults))
	for k := range benchResults {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var sb strings.Builder
	sb.WriteString("\nController latency on the ONTAP simulator (realistic latency model, docs/design/ontap-rest.md §4.7):\n\n")
	sb.WriteString("| Driver | CSI call | Calls | Mean latency | Injected ONTAP latency | Ratio | ONTAP requests per call |\n")
	sb.WriteString("|---|---|---:|---:|---:|---:|---:|\n")
	for _, k := range keys {
		r := benchResults[k]
		n := time.Duration(r.n)
		reqs := fmt.Sprintf("%.1f", float64(r.requests)/float64(r.n))
		if r.minRequests != r.maxRequests {
			reqs += fmt.Sprintf(" (%d–%d)", r.minRequests, r.maxRequests)
		}
		fmt.Fprintf(&sb, "| %s | %s | %d | %s | %s | %.2f | %s |\n", r.driver, r.call, r.n,
			(r.wall / n).Round(time.Millisecond), (r.injected / n).Round(time.Millisecond),
			r.wall.Seconds()/r.injected.Seconds(), reqs)
	}
	fmt.Print(sb.String())
}
