package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// The node benchmark on a real kernel (TestNodeBenchmark with
// plugintest.RealKernel; make bench runs it in the VM of test/vm): the
// node plugin against the same work done by hand on the same kernel, the
// two arms taking turns (plugin first in even rounds, by hand first in odd
// ones), so that a slow spell of the shared machine falls on both.
//
// By hand, iSCSI up is what NodeStage and NodePublish do: the sessions to
// the target's portals (iscsiadm: a node record with manual scan, login;
// made by the first LUN), a scan of the LUN on each session, waiting for
// the path devices and the multipath map over them, blkid, mkfs.ext4,
// mount, bind mount. Down: both umounts, the map flushed (multipath -f),
// the path devices deleted, logout (and the records deleted) after the
// last LUN. NFS up is mount -t nfs with the volume's options, down umount.

// kernelBenchCase is one concurrency: n volumes per arm and round.
type kernelBenchCase struct{ conc, n, rounds int }

var kernelBenchCases = []kernelBenchCase{{conc: 1, n: 3, rounds: 4}, {conc: 20, n: 20, rounds: 2}}

// kernelBenchRow holds both arms' samples of every round, and the ratio
// of their p50s in each round (the spread).
type kernelBenchRow struct {
	kernelBenchCase
	proto              string
	plugin, raw        benchRow
	upRatio, downRatio []float64 // plugin p50 / raw p50, per round
}

func nodeBenchmarkRealKernel(t *testing.T) string {
	r := newRig(t, rigOptions{iscsi: true})
	p := r.startPlugin(pluginOptions{role: "node", args: []string{"--log_level=info"}})
	start := time.Now()
	var rows []kernelBenchRow
	for _, proto := range []string{"nfs", "iscsi"} {
		for _, c := range kernelBenchCases {
			rows = append(rows, r.benchAlternating(t, p, proto, c))
		}
	}
	if mps := plugintest.MountPointsBelow(t, r.KubeletDir); len(mps) > 0 {
		t.Errorf("mounts left: %v", mps)
	}
	plugintest.AssertNoISCSI(t, r.iscsi.host)
	return kernelBenchMarkdown(rows, time.Since(start))
}

// benchAlternating runs c.rounds rounds of both arms.
func (r *rig) benchAlternating(t *testing.T, p *plugintest.Plugin, proto string, c kernelBenchCase) kernelBenchRow {
	t.Helper()
	row := kernelBenchRow{kernelBenchCase: c, proto: proto}
	k := &rawISCSI{target: r.iscsi.target, portals: r.iscsi.portals}
	for round := range c.rounds {
		tag := "r" + strconv.Itoa(round)
		var pl, raw benchRow
		arms := []func(){
			func() { pl = r.benchPlugin(t, p, proto, c.conc, c.n, tag) },
			func() { raw = r.benchRawKernel(t, k, proto, c.conc, c.n, tag) },
		}
		if round%2 == 1 {
			slices.Reverse(arms)
		}
		for _, arm := range arms {
			arm()
			r.dropLUNs(t)
		}
		t.Logf("%s concurrency %d round %d: up p50 %s / %s, down p50 %s / %s", proto, c.conc, round,
			ms(percentile(pl.up, .5)), ms(percentile(raw.up, .5)), ms(percentile(pl.down, .5)), ms(percentile(raw.down, .5)))
		row.plugin.up = append(row.plugin.up, pl.up...)
		row.plugin.down = append(row.plugin.down, pl.down...)
		row.raw.up = append(row.raw.up, raw.up...)
		row.raw.down = append(row.raw.down, raw.down...)
		row.upRatio = append(row.upRatio, ratio(percentile(pl.up, .5), percentile(raw.up, .5)))
		row.downRatio = append(row.downRatio, ratio(percentile(pl.down, .5), percentile(raw.down, .5)))
	}
	return row
}

// dropLUNs unmaps and deletes every LUN on ONTAP once an arm is done with
// them, so that LIO and the simulator carry only the next arm's.
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

// rawVolume is one volume of the arm by hand.
type rawVolume struct {
	src       string // NFS: server:/junction
	options   string // NFS: the volume's mount options
	lun       int    // iSCSI: the LUN ID
	mnt, bind string
	mapDev    string   // iSCSI: dm-N, once attached
	paths     []string // iSCSI: its path devices (sdX)
}

// benchRawKernel times n volumes done by hand, conc at a time.
func (r *rig) benchRawKernel(t *testing.T, k *rawISCSI, proto string, conc, n int, tag string) benchRow {
	t.Helper()
	row := benchRow{proto: proto, who: "by hand", conc: conc, n: n, up: make([]time.Duration, n), down: make([]time.Duration, n)}
	vols := make([]*rawVolume, n)
	for i := range vols {
		id := fmt.Sprintf("raw-%s-%d%s-%03d", proto, conc, tag, i)
		dir := filepath.Join(r.KubeletDir, "raw", id)
		v := &rawVolume{mnt: filepath.Join(dir, "mnt"), bind: filepath.Join(dir, "bind")}
		for _, d := range []string{v.mnt, v.bind} {
			if err := os.MkdirAll(d, 0o750); err != nil {
				t.Fatal(err)
			}
		}
		if proto == "nfs" {
			nv := r.makeNFSVolume(id, nfsClientIP)
			v.src, v.options = nv.context["nfsServerIp"]+":"+nv.junction, strings.TrimPrefix(nv.context["mountOptions"], "-o ")
		} else {
			v.lun = r.makeISCSIVolume(id, 64<<20, "ext4").lunID
		}
		vols[i] = v
	}
	runConcurrently(t, n, conc, func(i int) {
		start := time.Now()
		if proto == "nfs" {
			runTool(t, "mount", "-t", "nfs", "-o", vols[i].options, vols[i].src, vols[i].mnt)
		} else {
			k.up(t, vols[i])
		}
		row.up[i] = time.Since(start)
	})
	runConcurrently(t, n, conc, func(i int) {
		start := time.Now()
		if proto == "nfs" {
			runTool(t, "umount", vols[i].mnt)
		} else {
			k.down(t, vols[i])
		}
		row.down[i] = time.Since(start)
	})
	return row
}

// runTool runs a host tool, failing the test (not stopping it: it may run
// in a goroutine) when it fails or takes more than 3 minutes (as kubelet
// bounds the plugin's calls).
func runTool(t *testing.T, args ...string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if out, err := exec.CommandContext(ctx, args[0], args[1:]...).CombinedOutput(); err != nil {
		t.Errorf("%v: %v\n%s", args, err, out)
		return false
	}
	return true
}

// rawISCSI is the node's iSCSI work done by hand: the sessions to the
// target's portals exist while one of its LUNs is attached.
type rawISCSI struct {
	target   string
	portals  []string
	mu       sync.Mutex
	attached int
}

func (k *rawISCSI) up(t *testing.T, v *rawVolume) {
	if !k.attach(t, v) {
		return
	}
	dev := "/dev/" + v.mapDev
	// blkid: exit 2 is "nothing found", a blank LUN.
	if out, err := exec.Command("blkid", "-p", "-s", "TYPE", "-o", "export", dev).CombinedOutput(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("blkid %s: %v %s", dev, err, out)
			return
		}
	}
	_ = runTool(t, "mkfs.ext4", "-F", dev) && runTool(t, "mount", "-t", "ext4", dev, v.mnt) &&
		runTool(t, "mount", "--bind", v.mnt, v.bind)
}

// attach logs in (the first LUN), scans the LUN on each session and waits
// for its path devices and the multipath map over them.
func (k *rawISCSI) attach(t *testing.T, v *rawVolume) bool {
	k.mu.Lock()
	if k.attached == 0 {
		for _, p := range k.portals {
			rec := []string{"iscsiadm", "-m", "node", "-T", k.target, "-p", p}
			if !runTool(t, append(rec, "-o", "new")...) ||
				!runTool(t, append(rec, "-o", "update", "-n", "node.session.scan", "-v", "manual")...) ||
				!runTool(t, append(rec, "--login")...) {
				k.mu.Unlock()
				return false
			}
		}
	}
	k.attached++
	k.mu.Unlock()
	hosts := k.sessionHosts(t)
	for _, h := range hosts {
		scan := fmt.Sprintf("/sys/class/scsi_host/host%d/scan", h)
		if err := os.WriteFile(scan, []byte(fmt.Sprintf("0 0 %d", v.lun)), 0); err != nil {
			t.Errorf("scan LUN %d: %v", v.lun, err)
			return false
		}
	}
	for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		v.paths = v.paths[:0]
		for _, h := range hosts {
			devs, _ := filepath.Glob(fmt.Sprintf("/sys/class/scsi_host/host%d/device/session*/target*/%d:*:*:%d/block/*", h, h, v.lun))
			v.paths = append(v.paths, devs...)
		}
		for i := range v.paths {
			v.paths[i] = filepath.Base(v.paths[i])
		}
		if len(v.paths) != len(hosts) {
			continue
		}
		holders, _ := filepath.Glob("/sys/block/" + v.paths[0] + "/holders/dm-*")
		if len(holders) == 1 {
			if _, err := os.Stat("/dev/" + filepath.Base(holders[0])); err == nil {
				v.mapDev = filepath.Base(holders[0])
				return true
			}
		}
	}
	t.Errorf("LUN %d: no multipath map over %d paths within 2m (paths %v)", v.lun, len(hosts), v.paths)
	return false
}

// sessionHost finds the SCSI host in a session's sysfs path.
var sessionHost = regexp.MustCompile(`/host(\d+)/session\d+/`)

// sessionHosts are the SCSI hosts of the target's sessions.
func (k *rawISCSI) sessionHosts(t *testing.T) []int {
	sessions, _ := filepath.Glob("/sys/class/iscsi_session/session*")
	var hosts []int
	for _, s := range sessions {
		name, _ := os.ReadFile(filepath.Join(s, "targetname"))
		real, err := filepath.EvalSymlinks(s)
		m := sessionHost.FindStringSubmatch(real + "/")
		if strings.TrimSpace(string(name)) != k.target || err != nil || m == nil {
			continue
		}
		h, _ := strconv.Atoi(m[1])
		hosts = append(hosts, h)
	}
	if len(hosts) != len(k.portals) {
		t.Errorf("%d sessions to %s, want %d", len(hosts), k.target, len(k.portals))
	}
	return hosts
}

// down unmounts, flushes the map, deletes the paths and logs out after
// the last LUN.
func (k *rawISCSI) down(t *testing.T, v *rawVolume) {
	if !runTool(t, "umount", v.bind) || !runTool(t, "umount", v.mnt) {
		return
	}
	name, err := os.ReadFile("/sys/block/" + v.mapDev + "/dm/name")
	if err != nil || !runTool(t, "multipath", "-f", strings.TrimSpace(string(name))) {
		t.Errorf("map %s: %v", v.mapDev, err)
		return
	}
	for _, p := range v.paths {
		if err := os.WriteFile("/sys/block/"+p+"/device/delete", []byte("1"), 0); err != nil {
			t.Errorf("delete %s: %v", p, err)
		}
	}
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.attached--; k.attached > 0 {
		return
	}
	for _, p := range k.portals {
		rec := []string{"iscsiadm", "-m", "node", "-T", k.target, "-p", p}
		_ = runTool(t, append(rec, "--logout")...) && runTool(t, append(rec, "-o", "delete")...)
	}
}

func kernelBenchMarkdown(rows []kernelBenchRow, took time.Duration) string {
	var b strings.Builder
	fmt.Fprintf(&b, "## Node service on a real kernel: the plugin against the same work by hand\n\n")
	fmt.Fprintf(&b, "In the VM of test/vm (Debian 12's kernel under QEMU TCG, 2 vCPUs), the simulator's kernel data plane (LIO, nfsd) on loopback, %s, %s in all. ", time.Now().UTC().Format("2006-01-02"), took.Round(time.Second))
	fmt.Fprintf(&b, "\"up\" = NodeStage+NodePublish of `ontap-csi --csi_role=node` per volume, \"down\" = NodeUnpublish+NodeUnstage; \"by hand\" = the same work with the host tools: iSCSI up = iscsiadm node record (manual scan) and login to both portals (first LUN), a scan of the LUN on each session, the wait for its paths and multipath map, blkid, mkfs.ext4, mount, bind mount; down = both umounts, `multipath -f`, the paths deleted, logout after the last LUN; NFS up = `mount -t nfs -o nfsvers=4.1`, down = umount. ")
	fmt.Fprintf(&b, "The arms take turns (rounds alternate which goes first); *ratio* is plugin p50 / by-hand p50 over all rounds, *spread* the lowest and highest ratio of a single round.\n\n")
	fmt.Fprintf(&b, "| protocol | concurrency | volumes × rounds | up p50 | up p90 | by hand p50 | by hand p90 | ratio p50 (spread) | down p50 | down p90 | by hand p50 | by hand p90 | ratio p50 (spread) |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %d | %d × %d | %s | %s | %s | %s | %s | %s | %s | %s | %s | %s |\n",
			r.proto, r.conc, r.n, r.rounds,
			ms(percentile(r.plugin.up, .5)), ms(percentile(r.plugin.up, .9)), ms(percentile(r.raw.up, .5)), ms(percentile(r.raw.up, .9)),
			ratioSpread(r.plugin.up, r.raw.up, r.upRatio),
			ms(percentile(r.plugin.down, .5)), ms(percentile(r.plugin.down, .9)), ms(percentile(r.raw.down, .5)), ms(percentile(r.raw.down, .9)),
			ratioSpread(r.plugin.down, r.raw.down, r.downRatio))
	}
	fmt.Fprintf(&b, "\nAt concurrency 20 the plugin's iSCSI operations queue for the %d slots of `--max-iscsi-operations` (Trident's default); by hand they all run at once.\n", node.DefaultMaxISCSIOperations)
	return b.String()
}

// ratioSpread is "1.2× (1.1–1.3×)": the ratio of the p50s over all rounds,
// then the lowest and highest of one round.
func ratioSpread(pl, raw []time.Duration, rounds []float64) string {
	return fmt.Sprintf("%.2f× (%.2f–%.2f×)", ratio(percentile(pl, .5), percentile(raw, .5)), slices.Min(rounds), slices.Max(rounds))
}
