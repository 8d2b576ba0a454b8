package rest

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// BenchmarkClient measures the client against the simulator with ONTAP's
// realistic latency (docs/design/ontap-rest.md §4.7): the requests each operation costs
// (counted by the simulator) and the client's wall time divided by the
// latency the simulator injected (1.00 = no overhead from polling or
// retries). make bench runs it with
//
//	go test -run '^$' -bench BenchmarkClient -benchtime 10x ./backends/ontap/rest/
//
// and each sub-benchmark logs a Markdown table row for docs/benchmarks.md.
func BenchmarkClient(b *testing.B) {
	ctx := context.Background()
	// The simulator's start-up line would land inside the benchmark's
	// result line, which make bench parses.
	level := logrus.GetLevel()
	logrus.SetLevel(logrus.WarnLevel)
	b.Cleanup(func() { logrus.SetLevel(level) })
	type op struct {
		name  string
		setup func(b *testing.B, s *ontapsim.Simulator, c *Client, n int) // unmeasured, through fixtures
		run   func(c *Client, i int) error
	}
	var aggr string
	lunPath := func(i int) string { return fmt.Sprintf("/vol/b_san_%d/lun0", i) }
	var policyID int64
	ops := []op{
		{
			name: "VolumeCreate",
			run: func(c *Client, i int) error {
				name := fmt.Sprintf("b_vol_%d", i)
				return c.CreateVolume(ctx, VolumeCreate{Name: name, Aggregate: aggr, Size: 1 << 30, SpaceReserve: "none",
					SnapshotPolicy: "none", SnapshotReservePercent: new(0), JunctionPath: "/" + name})
			},
		},
		{
			name: "LUNCreate",
			setup: func(b *testing.B, s *ontapsim.Simulator, c *Client, n int) {
				for i := 0; i < n; i++ {
					if _, err := s.CreateVolume(ontapsim.VolumeSpec{Name: fmt.Sprintf("b_san_%d", i), Size: 2 << 30, Thin: true}); err != nil {
						b.Fatal(err)
					}
				}
			},
			run: func(c *Client, i int) error {
				_, err := c.CreateLUN(ctx, LUNCreate{Path: lunPath(i), Size: 1 << 30})
				return err
			},
		},
		{
			name: "LUNMap",
			setup: func(b *testing.B, s *ontapsim.Simulator, c *Client, n int) {
				for i := 0; i < n; i++ {
					if _, err := s.CreateVolume(ontapsim.VolumeSpec{Name: fmt.Sprintf("b_san_%d", i), Size: 2 << 30, Thin: true}); err != nil {
						b.Fatal(err)
					}
					if _, err := s.CreateLUN(ontapsim.LUNSpec{Path: lunPath(i), Size: 1 << 30}); err != nil {
						b.Fatal(err)
					}
				}
				if _, err := s.CreateIGroup("b_ig", "iscsi", "linux", "iqn.2026-01.io.example:node1"); err != nil {
					b.Fatal(err)
				}
			},
			run: func(c *Client, i int) error {
				_, err := c.CreateLUNMap(ctx, LUNMapCreate{LUNPath: lunPath(i), IgroupName: "b_ig"})
				return err
			},
		},
		{
			name: "ExportRuleAdd",
			setup: func(b *testing.B, s *ontapsim.Simulator, c *Client, n int) {
				p, err := s.CreateExportPolicy("b_policy")
				if err != nil {
					b.Fatal(err)
				}
				policyID = p.ID
			},
			run: func(c *Client, i int) error {
				_, err := c.AddExportRule(ctx, policyID, ExportRule{Clients: []string{fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)}})
				return err
			},
		},
	}
	for _, o := range ops {
		b.Run(o.name, func(b *testing.B) {
			s, c := startSim(b, ontapsim.Config{Latency: ontapsim.RealisticLatency()}, func(cc *ClientConfig) {
				cc.RetryBaseDelay, cc.RetryMaxDelay = 0, 0 // production defaults
				cc.JobPollInitial, cc.JobPollMax = 0, 0
			})
			aggr = s.Info().Aggregates[0]
			if _, err := c.SVM(ctx); err != nil { // the one-time SVM lookup is not part of any operation
				b.Fatal(err)
			}
			if o.setup != nil {
				o.setup(b, s, c, b.N)
			}
			s.ResetStats()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if err := o.run(c, i); err != nil {
					b.Fatal(err)
				}
			}
			wall := time.Since(start)
			b.StopTimer()
			st := s.Stats()
			reqs := float64(st.Requests) / float64(b.N)
			ratio := wall.Seconds() / st.Injected.Seconds()
			b.ReportMetric(reqs, "requests/op")
			b.ReportMetric(ratio, "wall/injected")
			b.ReportMetric(st.Injected.Seconds()/float64(b.N), "injected-s/op")
			if b.N == 1 {
				return // the framework's probe run; -benchtime 10x measures the next one
			}
			// Row of: | operation | requests/op | injected ms/op | wall/injected | ops |
			b.Logf("| %s | %.2f | %.0f | %.3f | %d |", o.name, reqs, 1000*st.Injected.Seconds()/float64(b.N), ratio, b.N)
		})
	}
}
