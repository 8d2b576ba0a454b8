package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/container-storage-interface/spec/lib/go/csi"

	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// TestNodeBenchmark measures the node service of ontap-csi --csi_role=node
// (the DaemonSet's process) against the raw commands it wraps, timed in the
// same run on the same machine, and the process's memory.
// It prints a Markdown section for docs/benchmarks.md. It runs only when
// asked (make bench):
//
//	ONTAP_CSI_BENCH=1 go test -count=1 -timeout 60m -run TestNodeBenchmark -v ./test/e2e/
//
// ONTAP_CSI_BENCH_OUT=<file> also writes the Markdown there.
//
// Latency is per volume: NodeStage+NodePublish ("up") and
// NodeUnpublish+NodeUnstage ("down"), with `concurrency` volumes in flight.
// The raw baseline does what those calls boil down to, by hand, at the same
// concurrency: iSCSI up = mkfs.ext4 + mount + bind mount of a loop device
// that is already attached, down = two umounts; NFS up = mount -t nfs (the
// same shim the plugin runs), down = umount. The plugin's iSCSI numbers also
// contain the attach and detach (login, scan, multipath, serial checks, here
// through the iSCSI shim), which the baseline does not, and its cap of 5
// concurrent iSCSI operations.
func TestNodeBenchmark(t *testing.T) {
	if os.Getenv("ONTAP_CSI_BENCH") == "" {
		t.Skip("benchmark: set ONTAP_CSI_BENCH=1 (make bench)")
	}
	if plugintest.RealKernel() {
		writeBenchMarkdown(t, nodeBenchmarkRealKernel(t))
		return
	}
	r := newRig(t, rigOptions{iscsi: true})
	// The node role: the process every node runs (the DaemonSet's).
	p := r.startPlugin(pluginOptions{role: "node", args: []string{"--log_level=info"}})
	time.Sleep(2 * time.Second)
	idleRSS := rssKiB(t, p.Pid())

	var rows []benchRow
	for _, proto := range []string{"nfs", "iscsi"} {
		for _, conc := range []int{1, 50} {
			n := 20
			if conc > 1 {
				n = conc
			}
			rows = append(rows, r.benchPlugin(t, p, proto, conc, n, ""))
			rows = append(rows, r.benchRaw(t, proto, conc, n))
		}
	}
	// Memory with 100 volumes published (NFS: 100 iSCSI LUNs would be 300
	// loop devices through the shim).
	vols := make([]nfsVolume, 100)
	for i := range vols {
		vols[i] = r.makeNFSVolume(fmt.Sprintf("pvc-rss-%03d", i), nfsClientIP)
	}
	runConcurrently(t, len(vols), 10, func(i int) {
		r.nodeUp(t, p, "nfs", vols[i].id, vols[i].context, "")
	})
	runtime.GC()
	time.Sleep(2 * time.Second)
	busyRSS := rssKiB(t, p.Pid())
	runConcurrently(t, len(vols), 10, func(i int) { r.nodeDown(t, p, vols[i].id) })

	writeBenchMarkdown(t, benchMarkdown(rows, idleRSS, busyRSS))
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

type benchRow struct {
	proto, who string
	conc, n    int
	up, down   []time.Duration
}

// benchPlugin times n volumes through the plugin, conc at a time; tag
// keeps the volumes of repeated runs apart.
func (r *rig) benchPlugin(t *testing.T, p *plugintest.Plugin, proto string, conc, n int, tag string) benchRow {
	t.Helper()
	ids := make([]string, n)
	ctxs := make([]map[string]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("pvc-bench-%s-%d%s-%03d", proto, conc, tag, i)
		if proto == "nfs" {
			ctxs[i] = r.makeNFSVolume(ids[i], nfsClientIP).context
		} else {
			ctxs[i] = r.makeISCSIVolume(ids[i], 64<<20, "ext4").context
		}
	}
	row := benchRow{proto: proto, who: "ontap-csi", conc: conc, n: n, up: make([]time.Duration, n), down: make([]time.Duration, n)}
	runConcurrently(t, n, conc, func(i int) {
		start := time.Now()
		r.nodeUp(t, p, proto, ids[i], ctxs[i], "ext4")
		row.up[i] = time.Since(start)
	})
	runConcurrently(t, n, conc, func(i int) {
		start := time.Now()
		r.nodeDown(t, p, ids[i])
		row.down[i] = time.Since(start)
	})
	return row
}

// nodeUp stages and publishes a volume as kubelet does.
func (r *rig) nodeUp(t *testing.T, p *plugintest.Plugin, proto, id string, pc map[string]string, fsType string) {
	staging := r.makeStaging(id)
	target := r.makeTargetParent("pod-"+id, id)
	capability := mountCap(fsType, snw)
	if _, err := p.Node.NodeStageVolume(ctxT(t), &csi.NodeStageVolumeRequest{
		VolumeId: id, StagingTargetPath: staging, VolumeCapability: capability, PublishContext: pc,
	}); err != nil {
		t.Errorf("stage %s: %v", id, err)
		return
	}
	if _, err := p.Node.NodePublishVolume(ctxT(t), &csi.NodePublishVolumeRequest{
		VolumeId: id, StagingTargetPath: staging, TargetPath: target, VolumeCapability: capability, PublishContext: pc,
	}); err != nil {
		t.Errorf("publish %s: %v", id, err)
	}
}

func (r *rig) nodeDown(t *testing.T, p *plugintest.Plugin, id string) {
	if _, err := p.Node.NodeUnpublishVolume(ctxT(t), &csi.NodeUnpublishVolumeRequest{VolumeId: id, TargetPath: r.targetPath("pod-"+id, id)}); err != nil {
		t.Errorf("unpublish %s: %v", id, err)
	}
	if _, err := p.Node.NodeUnstageVolume(ctxT(t), &csi.NodeUnstageVolumeRequest{VolumeId: id, StagingTargetPath: r.stagingPath(id)}); err != nil {
		t.Errorf("unstage %s: %v", id, err)
	}
}

// benchRaw times the raw commands for n volumes, conc at a time.
func (r *rig) benchRaw(t *testing.T, proto string, conc, n int) benchRow {
	t.Helper()
	row := benchRow{proto: proto, who: "raw commands", conc: conc, n: n, up: make([]time.Duration, n), down: make([]time.Duration, n)}
	dir := filepath.Join(r.KubeletDir, "raw", fmt.Sprintf("%s-%d", proto, conc))
	type item struct{ dev, src, mnt, bind string }
	items := make([]item, n)
	for i := range items {
		it := item{mnt: filepath.Join(dir, strconv.Itoa(i), "mnt"), bind: filepath.Join(dir, strconv.Itoa(i), "bind")}
		for _, d := range []string{it.mnt, it.bind} {
			if err := os.MkdirAll(d, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		if proto == "nfs" {
			v := r.makeNFSVolume(fmt.Sprintf("raw-%d-%03d", conc, i), nfsClientIP)
			it.src = v.context["nfsServerIp"] + ":" + v.junction
		} else {
			img := filepath.Join(r.Root, fmt.Sprintf("raw-%d-%03d.img", conc, i))
			if err := os.WriteFile(img, nil, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(img, 64<<20); err != nil {
				t.Fatal(err)
			}
			out, err := exec.Command("losetup", "-f", "--show", img).Output()
			if err != nil {
				t.Fatal(err)
			}
			it.dev = strings.TrimSpace(string(out))
			// A mounted loop device cannot be detached: unmount first, even
			// when the benchmark stopped half-way.
			t.Cleanup(func() {
				plugintest.UnmountBelow(t, dir)
				exec.Command("losetup", "-d", it.dev).Run()
			})
		}
		items[i] = it
	}
	shim := filepath.Join(plugintest.NFSShimDir(t), "mount")
	shimEnv := append(os.Environ(), "ONTAP_SIM_URL="+r.sim.URL, "ONTAP_SIM_CA="+r.sim.CAFile, "NFS_SHIM_CLIENT_IP="+nfsClientIP)
	run := func(env []string, args ...string) {
		cmd := exec.Command(args[0], args[1:]...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Errorf("%v: %v\n%s", args, err, out)
		}
	}
	runConcurrently(t, n, conc, func(i int) {
		it := items[i]
		start := time.Now()
		if proto == "nfs" {
			run(shimEnv, shim, "-t", "nfs", "-o", "nfsvers=4.1", it.src, it.mnt)
		} else {
			run(nil, "mkfs.ext4", "-F", it.dev)
			run(nil, "mount", "-t", "ext4", it.dev, it.mnt)
			run(nil, "mount", "-o", "bind", it.mnt, it.bind)
		}
		row.up[i] = time.Since(start)
	})
	runConcurrently(t, n, conc, func(i int) {
		it := items[i]
		start := time.Now()
		if proto == "iscsi" {
			run(nil, "umount", it.bind)
		}
		run(nil, "umount", it.mnt)
		row.down[i] = time.Since(start)
	})
	return row
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

func benchMarkdown(rows []benchRow, idleKiB, busyKiB int64) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Node service: stage/publish latency and memory\n\n")
	fmt.Fprintf(&b, "Command: `ONTAP_CSI_BENCH=1 go test -count=1 -timeout 60m -run TestNodeBenchmark -v ./test/e2e/` (as root; %d CPUs, %s, %s). ", runtime.NumCPU(), runtime.GOOS+"/"+runtime.GOARCH, time.Now().UTC().Format("2006-01-02"))
	fmt.Fprintf(&b, "NFS goes through the NFS shim (export check + bind mount), iSCSI through the iSCSI shim (loop devices, emulated multipath); mkfs, mount, umount are real. ")
	fmt.Fprintf(&b, "\"up\" = NodeStage+NodePublish per volume, \"down\" = NodeUnpublish+NodeUnstage; raw = mkfs.ext4 + mount + bind (iSCSI, loop device already attached) or mount -t nfs (NFS), and umount(s), run by hand at the same concurrency in the same run.\n\n")
	fmt.Fprintf(&b, "| protocol | concurrency | volumes | up p50 | up p99 | raw up p50 | raw up p99 | ratio p50 / p99 | down p50 | down p99 | raw down p50 | raw down p99 | ratio p50 / p99 |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for i := 0; i+1 < len(rows); i += 2 {
		pl, raw := rows[i], rows[i+1]
		up50, up99 := percentile(pl.up, .5), percentile(pl.up, .99)
		rup50, rup99 := percentile(raw.up, .5), percentile(raw.up, .99)
		dn50, dn99 := percentile(pl.down, .5), percentile(pl.down, .99)
		rdn50, rdn99 := percentile(raw.down, .5), percentile(raw.down, .99)
		fmt.Fprintf(&b, "| %s | %d | %d | %s | %s | %s | %s | %.1f× / %.1f× | %s | %s | %s | %s | %.1f× / %.1f× |\n",
			pl.proto, pl.conc, pl.n, ms(up50), ms(up99), ms(rup50), ms(rup99), ratio(up50, rup50), ratio(up99, rup99),
			ms(dn50), ms(dn99), ms(rdn50), ms(rdn99), ratio(dn50, rdn50), ratio(dn99, rdn99))
	}
	fmt.Fprintf(&b, "\nThe iSCSI ratios are large because the raw baseline starts from an attached loop device: the plugin's figures also hold the attach and detach (*iSCSI attach and detach* above times one of each), and at concurrency 50 they queue for the %d slots of `--max-iscsi-operations` (Trident's default), so the last volumes wait for about %d rounds.\n",
		node.DefaultMaxISCSIOperations, (50+node.DefaultMaxISCSIOperations-1)/node.DefaultMaxISCSIOperations)
	fmt.Fprintf(&b, "\nNode plugin RSS (VmRSS of `ontap-csi --csi_role=node`): idle %.1f MiB; with 100 NFS volumes staged and published %.1f MiB (goal: under 40 MiB).\n",
		float64(idleKiB)/1024, float64(busyKiB)/1024)
	return b.String()
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}
