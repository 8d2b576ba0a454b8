package rest

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// TestFaultInjectionCyclesLeaveExactState runs 200 create/delete cycles of
// each object family through the client while 20 % of all requests fail
// transiently: 5 % each of 429, 503, a dropped connection before ONTAP acts,
// and a dropped connection after ONTAP committed the change. Every cycle
// must succeed, and the simulator must end with exactly the objects of the
// cycles that keep theirs: nothing leaked, nothing missing.
func TestFaultInjectionCyclesLeaveExactState(t *testing.T) {
	if testing.Short() {
		t.Skip("long")
	}
	// Each rule fires on 5 % of all requests: later rules only see what the
	// earlier ones let through.
	faults := []ontapsim.FaultRule{
		{Path: "*", Rate: 0.05, Kind: ontapsim.FaultThrottle, RetryAfter: 1},
		{Path: "*", Rate: 0.05 / 0.95, Kind: ontapsim.FaultUnavailable},
		{Path: "*", Rate: 0.05 / 0.90, Kind: ontapsim.FaultDrop},
		{Path: "*", Rate: 0.05 / 0.85, Kind: ontapsim.FaultDropAfterCommit},
	}
	s, c := startSim(t, ontapsim.Config{Seed: 20}, func(cc *ClientConfig) {
		// 12 attempts: at a 20 % failure rate, the chance that any of the
		// ~6000 requests fails 12 times in a row is below 10^-4. Retry-After
		// (1 s) is capped to keep the test short; honouring it is tested in
		// client_test.go.
		cc.MaxAttempts = 12
		cc.MaxRetryAfter = time.Millisecond
	})
	aggr := s.Info().Aggregates[0]
	s.SetFaults(faults)

	const cycles = 200
	keep := func(i int) bool { return i%10 == 0 }
	runCycles(t, c, aggr, cycles, keep)
	s.SetFaults(nil)

	st := s.Stats()
	t.Logf("%d requests, %d injected faults", st.Requests, st.Faults)
	if st.Faults < st.Requests/10 {
		t.Errorf("only %d of %d requests faulted: the test did not exercise retries", st.Faults, st.Requests)
	}

	checkCycleState(t, s, cycles, keep)
}

// runCycles runs the create/delete cycles of every object family on 4
// workers; keep(i) tells whether cycle i leaves its objects.
func runCycles(t *testing.T, c *Client, aggr string, cycles int, keep func(int) bool) {
	ctx := context.Background()
	var wg sync.WaitGroup
	work := make(chan int)
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range work {
				if err := volumeCycle(ctx, c, aggr, i, keep(i)); err != nil {
					t.Errorf("volume cycle %d: %v", i, err)
				}
				if err := sanCycle(ctx, c, aggr, i, keep(i)); err != nil {
					t.Errorf("SAN cycle %d: %v", i, err)
				}
				if err := exportCycle(ctx, c, i, keep(i)); err != nil {
					t.Errorf("export cycle %d: %v", i, err)
				}
			}
		}()
	}
	for i := 0; i < cycles; i++ {
		work <- i
	}
	close(work)
	wg.Wait()
}

// checkCycleState compares the simulator's objects with those of the
// cycles that keep theirs.
func checkCycleState(t *testing.T, s *ontapsim.Simulator, cycles int, keep func(int) bool) {
	var wantVols, wantLUNs, wantIgroups, wantMaps, wantPolicies []string
	for i := 0; i < cycles; i++ {
		if keep(i) {
			wantVols = append(wantVols, fmt.Sprintf("f_vol_%d", i), fmt.Sprintf("f_san_%d", i))
			wantLUNs = append(wantLUNs, fmt.Sprintf("/vol/f_san_%d/lun0", i))
			wantIgroups = append(wantIgroups, fmt.Sprintf("f_ig_%d=%s", i, initiatorOf(i)))
			wantMaps = append(wantMaps, fmt.Sprintf("/vol/f_san_%d/lun0->f_ig_%d", i, i))
			wantPolicies = append(wantPolicies, fmt.Sprintf("f_ep_%d=%s", i, ruleClientOf(i)))
		}
	}
	var gotVols, gotLUNs, gotIgroups, gotMaps, gotPolicies []string
	for _, v := range s.Volumes() {
		if strings.HasPrefix(v.Name, "f_") {
			gotVols = append(gotVols, v.Name)
		}
	}
	for _, l := range s.LUNs() {
		gotLUNs = append(gotLUNs, l.Path)
	}
	for _, ig := range s.IGroups() {
		gotIgroups = append(gotIgroups, ig.Name+"="+strings.Join(ig.Initiators, ","))
	}
	for _, m := range s.LUNMaps() {
		gotMaps = append(gotMaps, m.LUNPath+"->"+m.IGroup)
	}
	for _, p := range s.ExportPolicies() {
		if !strings.HasPrefix(p.Name, "f_") {
			continue
		}
		var clients []string
		for _, r := range p.Rules {
			clients = append(clients, strings.Join(r.Clients, ","))
		}
		gotPolicies = append(gotPolicies, p.Name+"="+strings.Join(clients, ";"))
	}
	for _, c := range []struct {
		what      string
		got, want []string
	}{
		{"volumes", gotVols, wantVols}, {"LUNs", gotLUNs, wantLUNs}, {"igroups", gotIgroups, wantIgroups},
		{"LUN maps", gotMaps, wantMaps}, {"export policies", gotPolicies, wantPolicies},
	} {
		sort.Strings(c.got)
		sort.Strings(c.want)
		if !slices.Equal(c.got, c.want) {
			t.Errorf("%s:\n got %v\nwant %v", c.what, c.got, c.want)
		}
	}
}

func initiatorOf(i int) string { return fmt.Sprintf("iqn.2026-01.io.example:node%d", i) }
func ruleClientOf(i int) string {
	return fmt.Sprintf("10.%d.%d.1", i/250, i%250)
}

func volumeCycle(ctx context.Context, c *Client, aggr string, i int, keep bool) error {
	name := fmt.Sprintf("f_vol_%d", i)
	if err := c.CreateVolume(ctx, VolumeCreate{Name: name, Aggregate: aggr, Size: 100 << 20, SpaceReserve: "none"}); err != nil {
		return err
	}
	v, err := c.GetVolume(ctx, name)
	if err != nil {
		return err
	}
	if err := c.ModifyVolume(ctx, v.UUID, VolumeModify{JunctionPath: new("/" + name)}); err != nil {
		return err
	}
	if keep {
		return nil
	}
	return c.DeleteVolume(ctx, v.UUID, true)
}

func sanCycle(ctx context.Context, c *Client, aggr string, i int, keep bool) error {
	vol, igName := fmt.Sprintf("f_san_%d", i), fmt.Sprintf("f_ig_%d", i)
	if err := c.CreateVolume(ctx, VolumeCreate{Name: vol, Aggregate: aggr, Size: 100 << 20, SpaceReserve: "none"}); err != nil {
		return err
	}
	lun, err := c.CreateLUN(ctx, LUNCreate{Path: "/vol/" + vol + "/lun0", Size: 50 << 20})
	if err != nil {
		return err
	}
	ig, err := c.CreateIgroup(ctx, igName)
	if err != nil {
		return err
	}
	if err := c.AddInitiator(ctx, ig.UUID, initiatorOf(i)); err != nil {
		return err
	}
	m, err := c.CreateLUNMap(ctx, LUNMapCreate{LUNPath: lun.Path, IgroupName: igName})
	if err != nil {
		return err
	}
	if keep {
		return nil
	}
	if err := c.DeleteLUNMap(ctx, m.LUNUUID, m.IgroupUUID); err != nil {
		return err
	}
	if err := c.DeleteIgroup(ctx, ig.UUID); err != nil {
		return err
	}
	if err := c.deleteLUN(ctx, lun.UUID, false); err != nil {
		return err
	}
	v, err := c.GetVolume(ctx, vol)
	if err != nil {
		return err
	}
	return c.DeleteVolume(ctx, v.UUID, true)
}

func exportCycle(ctx context.Context, c *Client, i int, keep bool) error {
	pol, err := c.CreateExportPolicy(ctx, fmt.Sprintf("f_ep_%d", i))
	if err != nil {
		return err
	}
	rule, err := c.AddExportRule(ctx, pol.ID, ExportRule{Clients: []string{ruleClientOf(i)}})
	if err != nil {
		return err
	}
	if keep {
		return nil
	}
	if err := c.DeleteExportRule(ctx, pol.ID, rule.Index); err != nil {
		return err
	}
	return c.DeleteExportPolicy(ctx, pol.ID)
}
