package sanity

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// TestNASEconomyScale creates ONTAP_CSI_SCALE volumes (2,000 when set to
// 1) of ontap-nas-economy with 100 parallel workers, as csi-provisioner
// does with many PVCs at once, against the simulator's realistic latency,
// then deletes them all. Opt in, it takes minutes:
//
//	ONTAP_CSI_SCALE=1 go test ./test/sanity -run TestNASEconomyScale -v
//
// With qtreesPerFlexvol 200 the pools must be exactly ceil(n/200) (no pool
// per PVC, none overfilled), no call may fail, and once every volume is
// deleted no pool may be left (emptyFlexvolDeferredDeletePeriod 0). It
// logs a Markdown table: pools, ONTAP requests per volume, wall time and
// the latency the simulator injected.
func TestNASEconomyScale(t *testing.T) {
	n := scaleVolumes(t)
	const workers, perPool = 100, 200
	level := logrus.GetLevel()
	logrus.SetLevel(logrus.WarnLevel)
	t.Cleanup(func() { logrus.SetLevel(level) })
	p := Start(t, Options{
		Driver: config.DriverONTAPNASEconomy,
		// One aggregate: pools are per aggregate, as in Trident.
		Backend: map[string]any{"aggregate": "aggr1", "qtreesPerFlexvol": strconv.Itoa(perPool)},
		Sim:     ontapsim.Config{Latency: ontapsim.RealisticLatency(), Seed: 42},
	})
	if _, err := p.Controller.GetCapacity(Ctx(t), &csi.GetCapacityRequest{}); err != nil {
		t.Fatal(err)
	}
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("pvc-%08x-5ca1-4e00-8000-00000000%04x", i, i)
	}
	create := scalePhase(t, p, "CreateVolume", names, workers, func(ctx context.Context, name string) error {
		_, err := p.Controller.CreateVolume(ctx, &csi.CreateVolumeRequest{
			Name: name, CapacityRange: &csi.CapacityRange{RequiredBytes: 1 << 30},
			VolumeCapabilities: []*csi.VolumeCapability{mountCapability(csi.VolumeCapability_AccessMode_MULTI_NODE_MULTI_WRITER)},
		})
		return err
	})
	pools, most := economyPools(p.Sim)
	if want := (n + perPool - 1) / perPool; pools != want || most > perPool || create.errors > 0 {
		t.Errorf("after %d creates: %d pools (want %d), fullest holds %d qtrees, %d errors", n, pools, want, most, create.errors)
	}
	created := pools
	del := scalePhase(t, p, "DeleteVolume", names, workers, func(ctx context.Context, name string) error {
		_, err := p.Controller.DeleteVolume(ctx, &csi.DeleteVolumeRequest{VolumeId: name})
		return err
	})
	if left, _ := economyPools(p.Sim); left > 0 || del.errors > 0 || len(p.Sim.Qtrees()) > 0 {
		t.Errorf("after deleting all: %d pools, %d qtrees left, %d errors", left, len(p.Sim.Qtrees()), del.errors)
	}
	t.Logf("| Phase | Volumes | Workers | Pools | Errors | Wall time | Mean call | Injected ONTAP latency (sum) | Sum of calls / injected | ONTAP requests per volume |")
	t.Logf("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	create.log(t, n, workers, fmt.Sprintf("%d created", created))
	del.log(t, n, workers, "0 left")
	p.AssertClean(t)
}

func scaleVolumes(t *testing.T) int {
	v := os.Getenv("ONTAP_CSI_SCALE")
	if v == "" {
		t.Skip("opt-in scale test: set ONTAP_CSI_SCALE=1 (2,000 volumes) or to a number of volumes")
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("ONTAP_CSI_SCALE=%q: want a number", v)
	}
	if n == 1 {
		n = 2000
	}
	return n
}

// scaleResult is one phase of the scale test.
type scaleResult struct {
	call            string
	errors          int64
	wall, callTime  time.Duration
	injected        time.Duration
	requests, count int64
}

// scalePhase runs call for every name with workers goroutines.
func scalePhase(t *testing.T, p *Plugin, what string, names []string, workers int, call func(context.Context, string) error) *scaleResult {
	r := &scaleResult{call: what, count: int64(len(names))}
	before := p.Sim.Stats()
	start := time.Now()
	work := make(chan string)
	var wg sync.WaitGroup
	var errs, callNanos atomic.Int64
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for name := range work {
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
				t0 := time.Now()
				err := call(ctx, name)
				callNanos.Add(int64(time.Since(t0)))
				cancel()
				if err != nil {
					if errs.Add(1) <= 5 {
						t.Errorf("%s %s: %v", what, name, err)
					}
				}
			}
		}()
	}
	for _, name := range names {
		work <- name
	}
	close(work)
	wg.Wait()
	r.wall = time.Since(start)
	after := p.Sim.Stats()
	r.errors, r.callTime = errs.Load(), time.Duration(callNanos.Load())
	r.injected, r.requests = after.Injected-before.Injected, after.Requests-before.Requests
	return r
}

func (r *scaleResult) log(t *testing.T, n, workers int, pools string) {
	t.Logf("| %s | %d | %d | %s | %d | %s | %s | %s | %.2f | %.1f |", r.call, n, workers, pools, r.errors,
		r.wall.Round(100*time.Millisecond), (r.callTime / time.Duration(r.count)).Round(time.Millisecond),
		r.injected.Round(time.Second), r.callTime.Seconds()/r.injected.Seconds(), float64(r.requests)/float64(r.count))
}

// economyPools counts the qtree pool FlexVols on s and the qtrees of the
// fullest.
func economyPools(s *ontapsim.Simulator) (pools, most int) {
	per := map[string]int{}
	for _, v := range s.Volumes() {
		if strings.HasPrefix(v.Name, "trident_qtree_pool_") {
			per[v.Name] += 0
		}
	}
	for _, q := range s.Qtrees() {
		per[q.Volume]++
	}
	for _, c := range per {
		most = max(most, c)
	}
	return len(per), most
}
