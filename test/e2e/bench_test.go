package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	mountutils "k8s.io/mount-utils"

	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestNodeBenchmark measures the node service of ontap-csi --csi_role=node
// (the DaemonSet's process) against the same work done by hand with the
// same tools (bench_raw_test.go), in the same run on the same machine, and
// the process's memory. It prints a Markdown section for
// docs/benchmarks.md. It runs only when asked (make bench):
//
//	ONTAP_CSI_BENCH=1 go test -count=1 -timeout 60m -run TestNodeBenchmark -v ./test/e2e/
//
// ONTAP_CSI_BENCH_OUT=<file> also writes the Markdown there;
// ONTAP_CSI_BENCH_ROUNDS=<n> sets the rounds (default 5; fewer while
// iterating); ONTAP_CSI_BENCH_ONLY=<protocol>:<concurrency>[,...] (say
// iscsi:20; none for no case) runs only those cases of the per-volume
// table, and no pod starts: one case in the VM takes minutes, the whole
// run most of an hour.
// ONTAP_CSI_BENCH_PODS=<protocol>:<volumes>[,...] picks the pod starts
// (benchPods). ONTAP_CSI_BENCH_LOG_LEVEL=info runs the plugin at a
// production node's level instead of debug (its host tools then go
// untimed in the report).
//
// Latency is per volume: NodeStage+NodePublish ("up") and
// NodeUnpublish+NodeUnstage ("down"), driven as kubelet drives them
// (bench_kubelet_test.go), with `concurrency` volumes in flight, on a node
// with 500 unrelated mounts. The arms take turns (even rounds plugin
// first, odd ones by hand first), so that a slow spell of the shared
// machine falls on both; the ratio is the median of the rounds' p50
// ratios, with the lowest and highest. Pod start is the time until all N
// volumes of one pod are staged and published, all N at once as kubelet's
// volume manager starts them.
func TestNodeBenchmark(t *testing.T) {
	if os.Getenv("ONTAP_CSI_BENCH") == "" {
		t.Skip("benchmark: set ONTAP_CSI_BENCH=1 (make bench)")
	}
	rounds := 5
	if v := os.Getenv("ONTAP_CSI_BENCH_ROUNDS"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("ONTAP_CSI_BENCH_ROUNDS=%q: want a positive number", v)
		}
		rounds = n
	}
	began := time.Now()
	r := newRig(t, rigOptions{iscsi: true})
	// The node role: the process every node runs (the DaemonSet's).
	// At debug level: its log times every host tool it runs, for the
	// report's "where the time goes" (a line per tool, some µs each).
	var args []string
	if lvl := os.Getenv("ONTAP_CSI_BENCH_LOG_LEVEL"); lvl != "" {
		args = []string{"--log_level=" + lvl}
	}
	p := r.startPlugin(pluginOptions{role: "node", args: args})
	time.Sleep(2 * time.Second)
	rep := benchReport{idleKiB: rssKiB(t, p.Pid()), real: plugintest.RealKernel()}
	benchBusyMounts(t, r, benchBusyMountCount)
	kl, raw := kubelet{endpoint: p.Endpoint, plugin: p}, r.newRawNode(t)
	rep.capsP50, rep.mountinfoP50, rep.mounts = benchOverheads(t, kl)

	cases := []benchCase{{conc: 1, n: 10, rounds: rounds}, {conc: 50, n: 50, rounds: rounds}}
	if rep.real {
		cases = kernelBenchCases
		if os.Getenv("ONTAP_CSI_BENCH_ROUNDS") != "" {
			for i := range cases {
				cases[i].rounds = rounds
			}
		}
	}
	only := benchOnly(t, os.Getenv("ONTAP_CSI_BENCH_ONLY"))
	for _, proto := range []string{"nfs", "iscsi"} {
		for _, c := range cases {
			if only == nil || only[fmt.Sprintf("%s:%d", proto, c.conc)] {
				rep.rows = append(rep.rows, r.benchAlternating(t, kl, raw, proto, c))
			}
		}
	}
	for _, pod := range benchPods(t, rep.real, only != nil) {
		rep.pods = append(rep.pods, r.benchPodStart(t, kl, raw, pod.proto, pod.n, rounds))
	}
	if mps := plugintest.MountPointsBelow(t, r.KubeletDir); len(mps) > 0 {
		t.Errorf("mounts left: %v", mps)
	}
	plugintest.AssertNoISCSI(t, r.iscsi.host)
	if !rep.real {
		rep.busyKiB = r.benchRSS(t, p, kl)
	}
	rep.took = time.Since(began)
	writeBenchMarkdown(t, rep.markdown())
}

// benchOnly parses ONTAP_CSI_BENCH_ONLY: nil when unset, else the set of
// "protocol:concurrency" to run; "none" runs none (only the pod starts of
// ONTAP_CSI_BENCH_PODS).
func benchOnly(t *testing.T, v string) map[string]bool {
	if v == "" {
		return nil
	}
	only := map[string]bool{}
	if v == "none" {
		return only
	}
	for _, c := range protocolCounts(t, "ONTAP_CSI_BENCH_ONLY", v, "concurrency", "iscsi:20") {
		only[fmt.Sprintf("%s:%d", c.proto, c.n)] = true
	}
	return only
}

// podSize is one pod start to measure: a pod of n volumes of proto.
type podSize struct {
	proto string
	n     int
}

// protocolCounts parses the value v of the variable name, a list
// <protocol>:<what>[,...] with what a positive number, e.g. example.
func protocolCounts(t *testing.T, name, v, what, example string) []podSize {
	var out []podSize
	for _, c := range strings.Split(v, ",") {
		proto, count, ok := strings.Cut(strings.TrimSpace(c), ":")
		n, err := strconv.Atoi(count)
		if !ok || err != nil || n < 1 || (proto != "nfs" && proto != "iscsi") {
			t.Fatalf("%s=%q: want protocol:%s[,...], e.g. %s", name, v, what, example)
		}
		out = append(out, podSize{proto, n})
	}
	return out
}

// benchPods is the pod starts to measure: ONTAP_CSI_BENCH_PODS
// (<protocol>:<volumes>[,...], say nfs:50,iscsi:10) when set; else none
// when ONTAP_CSI_BENCH_ONLY picked cases; else 1, 10 and 50 volumes of
// each protocol, except a pod of 50 LUNs on a real kernel, which takes
// the VM's TCG minutes per arm (docs/benchmarks.md) and runs only when
// named.
func benchPods(t *testing.T, real, picked bool) []podSize {
	if v := os.Getenv("ONTAP_CSI_BENCH_PODS"); v != "" {
		return protocolCounts(t, "ONTAP_CSI_BENCH_PODS", v, "volumes", "nfs:50,iscsi:10")
	}
	if picked {
		return nil
	}
	var pods []podSize
	for _, proto := range []string{"nfs", "iscsi"} {
		for _, n := range []int{1, 10, 50} {
			if !(real && proto == "iscsi" && n == 50) {
				pods = append(pods, podSize{proto, n})
			}
		}
	}
	return pods
}

// benchOverheads times, one at a time, a NodeGetCapabilities as kubelet
// makes it and a read and parse of mountinfo on this node.
func benchOverheads(t *testing.T, kl kubelet) (caps, mountinfo time.Duration, mounts int) {
	var c, m []time.Duration
	for range 30 {
		start := time.Now()
		kl.capabilities(t)
		c = append(c, time.Since(start))
		start = time.Now()
		infos, err := mountutils.ParseMountInfo("/proc/self/mountinfo")
		if err != nil {
			t.Fatal(err)
		}
		m, mounts = append(m, time.Since(start)), len(infos)
	}
	return percentile(c, .5), percentile(m, .5), mounts
}

// benchRSS is the plugin's memory with 100 NFS volumes published (100
// iSCSI LUNs would be 300 loop devices through the shims).
func (r *rig) benchRSS(t *testing.T, p *plugintest.Plugin, kl kubelet) int64 {
	vols := make([]nfsVolume, 100)
	for i := range vols {
		vols[i] = r.makeNFSVolume(fmt.Sprintf("pvc-rss-%03d", i), nfsClientIP)
	}
	runConcurrently(t, len(vols), 10, func(i int) { kl.up(t, r, "pod-rss", vols[i].id, vols[i].context, "") })
	runtime.GC()
	time.Sleep(2 * time.Second)
	busy := rssKiB(t, p.Pid())
	runConcurrently(t, len(vols), 10, func(i int) { kl.down(t, r, "pod-rss", vols[i].id) })
	return busy
}

// writeBenchMarkdown logs the report and writes it to
// $ONTAP_CSI_BENCH_OUT, else, in the VM of test/vm, to bench.md in the
// step's output directory ($ONTAP_CSI_VM_OUT), which the host reads.
func writeBenchMarkdown(t *testing.T, md string) {
	t.Log("\n" + md)
	out := os.Getenv("ONTAP_CSI_BENCH_OUT")
	if dir := os.Getenv("ONTAP_CSI_VM_OUT"); out == "" && dir != "" {
		out = filepath.Join(dir, "bench.md")
	}
	if out != "" {
		if err := os.WriteFile(out, []byte(md), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// benchCase is one concurrency: n volumes per arm and round.
type benchCase struct{ conc, n, rounds int }

// benchRow is one arm's samples.
type benchRow struct {
	proto, who string
	conc, n    int
	up, down   []time.Duration
}

// benchCaseRow holds both arms' samples of every round, and the ratio of
// their p50s in each round (the spread).
type benchCaseRow struct {
	benchCase
	proto              string
	plugin, raw        benchRow
	upRatio, downRatio []float64 // plugin p50 / raw p50, per round
	// pluginSteps, rawSteps: where each arm's time went, all rounds.
	pluginSteps, rawSteps *stepTimes
}

// benchAlternating runs c.rounds rounds of both arms.
func (r *rig) benchAlternating(t *testing.T, kl kubelet, raw *rawNode, proto string, c benchCase) benchCaseRow {
	t.Helper()
	row := benchCaseRow{benchCase: c, proto: proto, pluginSteps: newStepTimes(), rawSteps: newStepTimes()}
	for round := range c.rounds {
		tag := "r" + strconv.Itoa(round)
		var pl, byHand benchRow
		arms := []func(){
			func() {
				from := len(kl.plugin.Log())
				pl = r.benchPlugin(t, kl, proto, c.conc, c.n, tag)
				row.pluginSteps.merge(pluginSteps(kl.plugin.Log()[from:]))
			},
			func() {
				raw.times = row.rawSteps
				byHand = r.benchRaw(t, raw, proto, c.conc, c.n, tag)
				raw.times = nil
			},
		}
		if round%2 == 1 {
			slices.Reverse(arms)
		}
		for _, arm := range arms {
			arm()
			r.dropLUNs(t)
		}
		t.Logf("%s concurrency %d round %d: up p50 %s / %s, down p50 %s / %s", proto, c.conc, round,
			ms(percentile(pl.up, .5)), ms(percentile(byHand.up, .5)), ms(percentile(pl.down, .5)), ms(percentile(byHand.down, .5)))
		row.plugin.up = append(row.plugin.up, pl.up...)
		row.plugin.down = append(row.plugin.down, pl.down...)
		row.raw.up = append(row.raw.up, byHand.up...)
		row.raw.down = append(row.raw.down, byHand.down...)
		row.upRatio = append(row.upRatio, ratio(percentile(pl.up, .5), percentile(byHand.up, .5)))
		row.downRatio = append(row.downRatio, ratio(percentile(pl.down, .5), percentile(byHand.down, .5)))
	}
	return row
}

// benchVolume makes volume id on ONTAP and returns its publish context.
func (r *rig) benchVolume(proto, id string) map[string]string {
	if proto == "nfs" {
		return r.makeNFSVolume(id, nfsClientIP).context
	}
	return r.makeISCSIVolume(id, 64<<20, "ext4").context
}

// benchPlugin times n volumes through the plugin, conc at a time; tag
// keeps the volumes of repeated runs apart.
func (r *rig) benchPlugin(t *testing.T, kl kubelet, proto string, conc, n int, tag string) benchRow {
	t.Helper()
	ids := make([]string, n)
	ctxs := make([]map[string]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("pvc-bench-%s-%d%s-%03d", proto, conc, tag, i)
		ctxs[i] = r.benchVolume(proto, ids[i])
	}
	row := benchRow{proto: proto, who: "ontap-csi", conc: conc, n: n, up: make([]time.Duration, n), down: make([]time.Duration, n)}
	runConcurrently(t, n, conc, func(i int) {
		start := time.Now()
		kl.up(t, r, "pod-"+ids[i], ids[i], ctxs[i], "ext4")
		row.up[i] = time.Since(start)
	})
	runConcurrently(t, n, conc, func(i int) {
		start := time.Now()
		kl.down(t, r, "pod-"+ids[i], ids[i])
		row.down[i] = time.Since(start)
	})
	return row
}

// benchRaw times n volumes done by hand, conc at a time.
func (r *rig) benchRaw(t *testing.T, raw *rawNode, proto string, conc, n int, tag string) benchRow {
	t.Helper()
	row := benchRow{proto: proto, who: "by hand", conc: conc, n: n, up: make([]time.Duration, n), down: make([]time.Duration, n)}
	vols := make([]*rawVolume, n)
	for i := range vols {
		vols[i] = r.newRawVolume(t, proto, fmt.Sprintf("raw-%s-%d%s-%03d", proto, conc, tag, i))
	}
	runConcurrently(t, n, conc, func(i int) {
		start := time.Now()
		raw.up(t, proto, vols[i])
		row.up[i] = time.Since(start)
	})
	runConcurrently(t, n, conc, func(i int) {
		start := time.Now()
		raw.down(t, proto, vols[i])
		row.down[i] = time.Since(start)
	})
	return row
}

// podRow is pod start (and stop) of a pod with n volumes: per round, the
// time until all its volumes are up (down), per arm.
type podRow struct {
	proto                 string
	n                     int
	start, stop           [2][]time.Duration // [0] plugin, [1] by hand
	startRatio, stopRatio []float64
}

// benchPodStart times rounds pod starts of n volumes each way, the arms
// taking turns.
func (r *rig) benchPodStart(t *testing.T, kl kubelet, raw *rawNode, proto string, n, rounds int) podRow {
	t.Helper()
	row := podRow{proto: proto, n: n}
	for round := range rounds {
		tag := fmt.Sprintf("pod%d-r%d", n, round)
		var took [2][2]time.Duration // arm, start/stop
		arms := []func(){
			func() {
				pod := "pod-" + proto + tag
				ids := make([]string, n)
				ctxs := make([]map[string]string, n)
				for i := range ids {
					ids[i] = fmt.Sprintf("pvc-%s-%s-%03d", proto, tag, i)
					ctxs[i] = r.benchVolume(proto, ids[i])
				}
				start := time.Now()
				runConcurrently(t, n, n, func(i int) { kl.up(t, r, pod, ids[i], ctxs[i], "ext4") })
				took[0][0], start = time.Since(start), time.Now()
				runConcurrently(t, n, n, func(i int) { kl.down(t, r, pod, ids[i]) })
				took[0][1] = time.Since(start)
			},
			func() {
				vols := make([]*rawVolume, n)
				for i := range vols {
					vols[i] = r.newRawVolume(t, proto, fmt.Sprintf("raw-%s-%s-%03d", proto, tag, i))
				}
				start := time.Now()
				runConcurrently(t, n, n, func(i int) { raw.up(t, proto, vols[i]) })
				took[1][0], start = time.Since(start), time.Now()
				runConcurrently(t, n, n, func(i int) { raw.down(t, proto, vols[i]) })
				took[1][1] = time.Since(start)
			},
		}
		if round%2 == 1 {
			slices.Reverse(arms)
		}
		for _, arm := range arms {
			arm()
			r.dropLUNs(t)
		}
		t.Logf("%s pod of %d round %d: start %s / %s, stop %s / %s", proto, n, round,
			ms(took[0][0]), ms(took[1][0]), ms(took[0][1]), ms(took[1][1]))
		for arm := range 2 {
			row.start[arm] = append(row.start[arm], took[arm][0])
			row.stop[arm] = append(row.stop[arm], took[arm][1])
		}
		row.startRatio = append(row.startRatio, ratio(took[0][0], took[1][0]))
		row.stopRatio = append(row.stopRatio, ratio(took[0][1], took[1][1]))
	}
	return row
}

// dropLUNs unmaps and deletes every LUN on ONTAP once an arm is done with
// them, so that the simulator (and LIO) carry only the next arm's.
func (r *rig) dropLUNs(t *testing.T) {
	t.Helper()
	igroups := map[string]string{}
	for _, g := range r.sim.IGroups() {
		igroups[g.Name] = g.UUID
	}
	luns := map[string]string{}
	for _, l := range r.sim.LUNs() {
		luns[l.Path] = l.UUID
	}
	for _, m := range r.sim.LUNMaps() {
		if code, out, err := r.sim.Do("DELETE", "/api/protocols/san/lun-maps/"+luns[m.LUNPath]+"/"+igroups[m.IGroup], nil); err != nil || code != 200 {
			t.Fatalf("unmap %s: %d %v %v", m.LUNPath, code, out, err)
		}
	}
	for path, uuid := range luns {
		if code, out, err := r.sim.Do("DELETE", "/api/storage/luns/"+uuid, nil); err != nil || code != 200 {
			t.Fatalf("delete %s: %d %v %v", path, code, out, err)
		}
	}
}

// runConcurrently runs f(0..n-1) with at most conc in flight.
func runConcurrently(t *testing.T, n, conc int, f func(i int)) {
	t.Helper()
	var wg sync.WaitGroup
	sem := make(chan struct{}, conc)
	for i := 0; i < n; i++ {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func rssKiB(t *testing.T, pid int) int64 {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			if err != nil {
				t.Fatal(err)
			}
			return kib
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s)-1) * p)
	return s[i]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.1f ms", float64(d.Microseconds())/1000) }

// mean is the mean of up[i]+down[i].
func mean(up, down []time.Duration) time.Duration {
	var sum time.Duration
	for i := range up {
		sum += up[i] + down[i]
	}
	return sum / time.Duration(len(up))
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

// spread is "1.05× (0.98–1.12×)": the median of the rounds' ratios, then
// the lowest and the highest.
func spread(rounds []float64) string {
	s := slices.Clone(rounds)
	slices.Sort(s)
	med := s[len(s)/2]
	if len(s)%2 == 0 {
		med = (s[len(s)/2-1] + s[len(s)/2]) / 2
	}
	return fmt.Sprintf("%.2f× (%.2f–%.2f×)", med, s[0], s[len(s)-1])
}

// benchReport is what TestNodeBenchmark measured.
type benchReport struct {
	real             bool
	rows             []benchCaseRow
	pods             []podRow
	idleKiB, busyKiB int64
	took             time.Duration
	// What kubelet's way and a busy node add to every volume: one
	// NodeGetCapabilities on a connection of its own, and one read and
	// parse of this process's mountinfo (mounts lines).
	capsP50, mountinfoP50 time.Duration
	mounts                int
}

func (rep benchReport) markdown() string {
	var b strings.Builder
	where := fmt.Sprintf("through the shims (NFS: export check + bind mount; iSCSI: loop devices, emulated sysfs, udev and multipath), %d CPUs, %s/%s", runtime.NumCPU(), runtime.GOOS, runtime.GOARCH)
	if rep.real {
		where = kernelBenchSetting
	}
	fmt.Fprintf(&b, "## Node service: the plugin against the same work by hand\n\n")
	fmt.Fprintf(&b, "Command: `ONTAP_CSI_BENCH=1 go test -count=1 -timeout 60m -run TestNodeBenchmark -v ./test/e2e/` (as root), %s, %s, %s in all. ", where, time.Now().UTC().Format("2006-01-02 15:04 MST"), rep.took.Round(time.Second))
	fmt.Fprintf(&b, "\"up\" = NodeStage+NodePublish of `ontap-csi --csi_role=node` per volume, \"down\" = NodeUnpublish+NodeUnstage, driven as kubelet drives them (a new gRPC connection per call, NodeGetCapabilities before stage, publish and unstage), with %d unrelated tmpfs mounts on the node. ", benchBusyMountCount)
	fmt.Fprintf(&b, "\"by hand\" = the same work with the same tools: iSCSI up = iscsiadm node record (manual scan) and login to both portals (first LUN), a scan of the LUN on each session through sysfs, the wait (%s polls) for its paths, their udev nodes and the multipath map over both, blkid, mkfs.ext4, mount, bind mount; down = both umounts, `multipath -f`, the paths deleted through sysfs and the wait for them to go, logout after the last LUN; NFS up = `mount -t nfs -o nfsvers=4.1` on the target, down = umount. ", rawPoll)
	fmt.Fprintf(&b, "The arms take turns (rounds alternate which goes first); p50 and p90 are over all rounds' volumes; *ratio* is the median of the rounds' plugin p50 / by-hand p50, with the lowest and highest round in brackets.\n\n")
	fmt.Fprintf(&b, "| protocol | concurrency | volumes × rounds | up p50 / p90 | by hand p50 / p90 | ratio p50 (spread) | down p50 / p90 | by hand p50 / p90 | ratio p50 (spread) |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rep.rows {
		fmt.Fprintf(&b, "| %s | %d | %d × %d | %s / %s | %s / %s | %s | %s / %s | %s / %s | %s |\n",
			r.proto, r.conc, r.n, r.rounds,
			ms(percentile(r.plugin.up, .5)), ms(percentile(r.plugin.up, .9)), ms(percentile(r.raw.up, .5)), ms(percentile(r.raw.up, .9)),
			spread(r.upRatio),
			ms(percentile(r.plugin.down, .5)), ms(percentile(r.plugin.down, .9)), ms(percentile(r.raw.down, .5)), ms(percentile(r.raw.down, .9)),
			spread(r.downRatio))
	}
	fmt.Fprintf(&b, "\nWhere the time goes, all rounds: mean up+down per volume, and its steps as runs per volume × mean ms per run, costliest first (the plugin's host tools from its debug log, the rest of its time is waits, locks, sysfs and its own work; by hand every step is timed).\n\n")
	fmt.Fprintf(&b, "| protocol | concurrency | plugin up+down | its host tools | by hand up+down | its steps |\n|---|---|---|---|---|---|\n")
	for _, r := range rep.rows {
		vols := len(r.plugin.up)
		fmt.Fprintf(&b, "| %s | %d | %s (tools %s) | %s | %s | %s |\n", r.proto, r.conc,
			ms(mean(r.plugin.up, r.plugin.down)), ms(r.pluginSteps.sum()/time.Duration(vols)), r.pluginSteps.describe(vols),
			ms(mean(r.raw.up, r.raw.down)), r.rawSteps.describe(len(r.raw.up)))
	}
	fmt.Fprintf(&b, "\nOne NodeGetCapabilities on a connection of its own, as kubelet calls it: p50 %s (kubelet makes 3 per volume, and a connection for each of the 4 other calls). One read and parse of /proc/self/mountinfo with the node's %d mounts (mount-utils, as the plugin parses it): p50 %s.\n", ms(rep.capsP50), rep.mounts, ms(rep.mountinfoP50))
	byHand := "by hand they all run at once"
	if rep.real {
		byHand = "by hand the attaches and detaches queue for as many (on the real kernel all LUNs at once put udev, and with it multipathd, minutes behind: issue 16)"
	}
	fmt.Fprintf(&b, "\nAt concurrency above %d the plugin's iSCSI operations queue for the %d slots of `--max-iscsi-operations` (Trident's default); %s.\n", node.DefaultMaxISCSIOperations, node.DefaultMaxISCSIOperations, byHand)
	if len(rep.pods) > 0 {
		fmt.Fprintf(&b, "\nPod start: the time until all N volumes of one pod are staged and published, all N started at once (as kubelet's volume manager does); pod stop: until all are unpublished and unstaged. Median over the rounds; *ratio* the median of the rounds' plugin / by hand, lowest and highest in brackets.\n\n")
		fmt.Fprintf(&b, "| protocol | volumes | rounds | start | by hand | ratio (spread) | stop | by hand | ratio (spread) |\n")
		fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|\n")
		for _, p := range rep.pods {
			fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %s | %s |\n", p.proto, p.n, len(p.startRatio),
				ms(percentile(p.start[0], .5)), ms(percentile(p.start[1], .5)), spread(p.startRatio),
				ms(percentile(p.stop[0], .5)), ms(percentile(p.stop[1], .5)), spread(p.stopRatio))
		}
	}
	fmt.Fprintf(&b, "\nNode plugin RSS (VmRSS of `ontap-csi --csi_role=node`): idle %.1f MiB", float64(rep.idleKiB)/1024)
	if rep.busyKiB > 0 {
		fmt.Fprintf(&b, "; with 100 NFS volumes staged and published %.1f MiB (goal: under 40 MiB)", float64(rep.busyKiB)/1024)
	}
	fmt.Fprintf(&b, ".\n")
	return b.String()
}
