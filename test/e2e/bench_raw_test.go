package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/test/e2e/plugintest"
)

// The node benchmark's arm "by hand" (TestNodeBenchmark, through the shims
// and on a real kernel alike): what NodeStage and NodePublish, then
// NodeUnpublish and NodeUnstage do for one volume, done with the same host
// tools the plugin runs, found the way it finds them (through the shims:
// the NFS and iSCSI shims first in PATH, the fake /sys and /dev).
//
// iSCSI up: the sessions to the target's portals (iscsiadm: a node record
// with manual scan, login; made by the first LUN), a scan of the LUN on
// each session (sysfs), the wait for its path devices, their device nodes
// (udev) and the multipath map over all of them, blkid, mkfs.ext4, mount,
// bind mount. Down: both umounts, the map flushed (multipath -f), the path
// devices deleted (sysfs) and the wait until they are gone, logout (and
// the records deleted) after the last LUN. NFS up is mount -t nfs with the
// volume's options on the target (as NodePublishVolume does; NFS stages
// nothing), down umount.

// rawPoll is how often the arm by hand looks at sysfs while it waits: the
// floor a node could reach with ~1 ms or event-driven waits (issue 18),
// without 50 waiting goroutines eating the shared CPUs.
const rawPoll = 5 * time.Millisecond

// rawMapWait bounds the arm by hand's wait for a LUN's paths and map: the
// time kubelet gives the plugin's whole NodeStageVolume (ctxT). In the VM
// at concurrency 20, all LUNs scanned at once, udev processed the paths
// up to 2.5 min after the kernel made them and multipathd, which acts on
// udev's events, built some maps after 2 min (issue 16).
const rawMapWait = 3 * time.Minute

// rawVolume is one volume of the arm by hand.
type rawVolume struct {
	src       string // NFS: server:/junction
	options   string // NFS: the volume's mount options
	lun       int    // iSCSI: the LUN ID
	mnt, bind string
	mapDev    string   // iSCSI: the map's block device (dm-N; a loop device through the shims)
	paths     []string // iSCSI: its path devices (sdX; loop devices through the shims)
}

// rawNode does the node's work by hand: the host's tools and roots, or the
// shims' (the plugin's PATH, --sys-root and --dev-dir). The sessions to
// the target's portals exist while one of its LUNs is attached.
type rawNode struct {
	env             []string // the tools' environment; nil: this process's
	sysRoot, devDir string
	target          string
	portals         []string

	mu       sync.Mutex
	attached int
	scans    map[int]*sync.Mutex // per SCSI host, through the shims

	times *stepTimes // of the arm under way; nil: not timed

	// slots, on the real kernel, lets as many LUNs attach or detach at
	// once as the plugin's --max-iscsi-operations: there every path and
	// map goes through udev's queue, and 20 LUNs scanned at once put it so
	// far behind that maps came after 3 minutes (issue 16), where the
	// plugin's 5 at a time got all 20. nil: no cap (the shims, whose udev
	// has no queue).
	slots chan struct{}
}

// slot takes one of k's slots, if it has any, until release.
func (k *rawNode) slot() (release func()) {
	if k.slots == nil {
		return func() {}
	}
	k.slots <- struct{}{}
	return func() { <-k.slots }
}

// newRawNode is the arm by hand on the rig's node, with the tools and
// roots the plugin gets (plugintest's toolArgs).
func (r *rig) newRawNode(t testing.TB) *rawNode {
	k := &rawNode{sysRoot: "/sys", devDir: "/dev"}
	if r.iscsi != nil {
		k.sysRoot, k.devDir, k.target, k.portals = r.iscsi.host.SysRoot, r.iscsi.host.DevDir, r.iscsi.target, r.iscsi.portals
	}
	if plugintest.RealKernel() {
		k.slots = make(chan struct{}, node.DefaultMaxISCSIOperations)
		return k
	}
	path := plugintest.NFSShimDir(t)
	env := []string{"NFS_SHIM_CLIENT_IP=" + nfsClientIP, "ONTAP_SIM_URL=" + r.sim.URL, "ONTAP_SIM_CA=" + r.sim.CAFile}
	if r.iscsi != nil && r.iscsi.host.Shim != nil {
		path += string(os.PathListSeparator) + r.iscsi.host.Shim.BinDir
		for _, kv := range r.iscsi.host.Shim.Environ() {
			if strings.HasPrefix(kv, "ISCSI_SHIM_") {
				env = append(env, kv)
			}
		}
	}
	env = append(env, "PATH="+path+string(os.PathListSeparator)+os.Getenv("PATH"))
	k.env = plugintest.MergeEnv(os.Environ(), env)
	return k
}

// run runs a host tool, failing the test (not stopping it: it may run in
// a goroutine) when it fails or takes more than 3 minutes (as kubelet
// bounds the plugin's calls).
func (k *rawNode) run(t testing.TB, args ...string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	defer k.timed(toolStep(args[0], args[1:]), time.Now())
	if out, err := k.command(ctx, args...).CombinedOutput(); err != nil {
		t.Errorf("%v: %v\n%s", args, err, out)
		return false
	}
	return true
}

// timed records the time of a step that began at start.
func (k *rawNode) timed(step string, start time.Time) { k.times.add(step, time.Since(start)) }

// command is the tool by name as k's PATH finds it (exec.Command looks in
// this process's PATH, not in the command's environment).
func (k *rawNode) command(ctx context.Context, args ...string) *exec.Cmd {
	name := args[0]
	if k.env != nil && !strings.Contains(name, "/") {
		for _, kv := range k.env {
			if p, ok := strings.CutPrefix(kv, "PATH="); ok {
				for _, dir := range filepath.SplitList(p) {
					if fi, err := os.Stat(filepath.Join(dir, name)); err == nil && fi.Mode().IsRegular() && fi.Mode()&0o111 != 0 {
						name = filepath.Join(dir, name)
						break
					}
				}
			}
		}
	}
	cmd := exec.CommandContext(ctx, name, args[1:]...)
	cmd.Env = k.env
	return cmd
}

// newVolume makes the arm's volume id on ONTAP and its mount points.
func (r *rig) newRawVolume(t testing.TB, proto, id string) *rawVolume {
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
	return v
}

// up is NodeStage+NodePublish by hand.
func (k *rawNode) up(t testing.TB, proto string, v *rawVolume) {
	if proto == "nfs" {
		k.run(t, "mount", "-t", "nfs", "-o", v.options, v.src, v.mnt)
		return
	}
	release := k.slot()
	attached := k.attach(t, v)
	release()
	if !attached {
		return
	}
	dev := filepath.Join(k.devDir, v.mapDev)
	// blkid as the plugin runs it: exit 2 is "nothing found", a blank LUN.
	blkid := []string{"blkid", "-p", "-s", "TYPE", "-s", "PTTYPE", "-o", "export", dev}
	start := time.Now()
	out, err := k.command(context.Background(), blkid...).CombinedOutput()
	k.timed(toolStep(blkid[0], blkid[1:]), start)
	if err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 2 {
			t.Errorf("blkid %s: %v %s", dev, err, out)
			return
		}
	}
	_ = k.run(t, "mkfs.ext4", "-F", dev) && k.run(t, "mount", "-t", "ext4", dev, v.mnt) &&
		k.run(t, "mount", "--bind", v.mnt, v.bind)
}

// down is NodeUnpublish+NodeUnstage by hand.
func (k *rawNode) down(t testing.TB, proto string, v *rawVolume) {
	if proto == "nfs" {
		k.run(t, "umount", v.mnt)
		return
	}
	if !k.run(t, "umount", v.bind) || !k.run(t, "umount", v.mnt) {
		return
	}
	release := k.slot()
	defer release()
	k.detach(t, v)
}

// attach logs in (the first LUN), scans the LUN on each session and waits
// for its path devices, their device nodes and the multipath map over all
// of them.
func (k *rawNode) attach(t testing.TB, v *rawVolume) bool {
	k.mu.Lock()
	if k.attached == 0 {
		for _, p := range k.portals {
			rec := []string{"iscsiadm", "-m", "node", "-T", k.target, "-p", p}
			if !k.run(t, append(rec, "-o", "new")...) ||
				!k.run(t, append(rec, "-o", "update", "-n", "node.session.scan", "-v", "manual")...) ||
				!k.run(t, append(rec, "--login")...) {
				k.mu.Unlock()
				return false
			}
		}
	}
	k.attached++
	k.mu.Unlock()
	start := time.Now()
	sessions := k.sessions(t)
	for _, s := range sessions {
		if !k.scan(t, s.host, v.lun) {
			return false
		}
	}
	k.timed("scan (sysfs)", start)
	defer k.timed("wait for paths, udev nodes, map", time.Now())
	for deadline := time.Now().Add(rawMapWait); time.Now().Before(deadline); time.Sleep(rawPoll) {
		if k.attached1(sessions, v) {
			return true
		}
	}
	t.Errorf("LUN %d: no multipath map over %d paths within %s (paths %v)", v.lun, len(sessions), rawMapWait, v.paths)
	return false
}

// scan scans the LUN on a SCSI host. The kernel's scan is synchronous
// and serialised per host (the host's scan_mutex): the write returns when
// the scan is done. The shims' kernel acts after the write, on a regular
// file that holds only the last write: so that concurrent scans are not
// lost, one scan per host is written at a time there, and the next waits
// until the shims' kernel has read it.
func (k *rawNode) scan(t testing.TB, host, lun int) bool {
	file := filepath.Join(k.sysRoot, "class", "scsi_host", "host"+strconv.Itoa(host), "scan")
	shims := !plugintest.RealKernel()
	if shims {
		k.mu.Lock()
		if k.scans == nil {
			k.scans = map[int]*sync.Mutex{}
		}
		if k.scans[host] == nil {
			k.scans[host] = &sync.Mutex{}
		}
		m := k.scans[host]
		k.mu.Unlock()
		m.Lock()
		defer m.Unlock()
	}
	f, err := os.OpenFile(file, os.O_WRONLY|os.O_TRUNC, 0)
	if err == nil {
		_, err = fmt.Fprintf(f, "0 0 %d", lun)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		t.Errorf("scan LUN %d: %v", lun, err)
		return false
	}
	for deadline := time.Now().Add(time.Minute); shims; time.Sleep(time.Millisecond) {
		if fi, err := os.Stat(file); err != nil || fi.Size() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Errorf("scan of LUN %d on host%d not read by the shims' kernel within 1m", lun, host)
			return false
		}
	}
	return true
}

// attached1 looks once for the LUN's paths on every session, with their
// device nodes, and for the one multipath map holding all of them.
func (k *rawNode) attached1(sessions []rawSession, v *rawVolume) bool {
	v.paths = v.paths[:0]
	for _, s := range sessions {
		devs, _ := filepath.Glob(filepath.Join(s.dir, "target*", fmt.Sprintf("%d:*:*:%d", s.host, v.lun), "block", "*"))
		for _, d := range devs {
			v.paths = append(v.paths, filepath.Base(d))
		}
	}
	if len(v.paths) != len(sessions) {
		return false
	}
	v.mapDev = ""
	for _, p := range v.paths {
		if _, err := os.Stat(filepath.Join(k.devDir, p)); err != nil {
			return false // udev has not made its node yet
		}
		holders, _ := filepath.Glob(filepath.Join(k.sysRoot, "block", p, "holders", "*"))
		var maps []string
		for _, h := range holders {
			if uuid, err := os.ReadFile(filepath.Join(k.sysRoot, "block", filepath.Base(h), "dm", "uuid")); err == nil && strings.HasPrefix(string(uuid), "mpath-") {
				maps = append(maps, filepath.Base(h))
			}
		}
		if len(maps) != 1 || (v.mapDev != "" && maps[0] != v.mapDev) {
			return false
		}
		v.mapDev = maps[0]
	}
	_, err := os.Stat(filepath.Join(k.devDir, v.mapDev))
	return err == nil
}

// rawSession is an iSCSI session's SCSI host and sysfs directory.
type rawSession struct {
	host int
	dir  string // …/hostH/sessionS
}

// sessionHost finds the SCSI host in a session's sysfs path.
var sessionHost = regexp.MustCompile(`/host(\d+)/session\d+/`)

// sessions are the target's sessions, from sysfs.
func (k *rawNode) sessions(t testing.TB) []rawSession {
	links, _ := filepath.Glob(filepath.Join(k.sysRoot, "class", "iscsi_session", "session*"))
	var out []rawSession
	for _, l := range links {
		name, _ := os.ReadFile(filepath.Join(l, "targetname"))
		real, err := filepath.EvalSymlinks(l) // …/hostH/sessionS/iscsi_session/sessionS
		m := sessionHost.FindStringSubmatch(real + "/")
		if strings.TrimSpace(string(name)) != k.target || err != nil || m == nil {
			continue
		}
		h, _ := strconv.Atoi(m[1])
		out = append(out, rawSession{host: h, dir: filepath.Dir(filepath.Dir(real))})
	}
	if len(out) != len(k.portals) {
		t.Errorf("%d sessions to %s, want %d", len(out), k.target, len(k.portals))
	}
	return out
}

// detach flushes the map, deletes the paths, waits until they are gone
// and logs out after the last LUN.
func (k *rawNode) detach(t testing.TB, v *rawVolume) {
	name, err := os.ReadFile(filepath.Join(k.sysRoot, "block", v.mapDev, "dm", "name"))
	if err == nil {
		flush := []string{"multipath", "-f", strings.TrimSpace(string(name))}
		err = withBackoff(t, strings.Join(flush, " "), func() error {
			defer k.timed(toolStep(flush[0], flush[1:]), time.Now())
			if out, err := k.command(context.Background(), flush...).CombinedOutput(); err != nil {
				return fmt.Errorf("%v: %w: %s", flush, err, out)
			}
			return nil
		})
	}
	if err != nil {
		t.Errorf("map %s: %v", v.mapDev, err)
		return
	}
	start := time.Now()
	for _, p := range v.paths {
		if err := os.WriteFile(filepath.Join(k.sysRoot, "block", p, "device", "delete"), []byte("1"), 0); err != nil {
			t.Errorf("delete %s: %v", p, err)
		}
	}
	for _, p := range v.paths {
		for deadline := time.Now().Add(2 * time.Minute); ; time.Sleep(rawPoll) {
			if _, err := os.Lstat(filepath.Join(k.sysRoot, "block", p)); errors.Is(err, os.ErrNotExist) {
				break
			}
			if time.Now().After(deadline) {
				t.Errorf("path %s of LUN %d still there 2m after its delete", p, v.lun)
				return
			}
		}
	}
	k.timed("delete paths (sysfs), wait until gone", start)
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.attached--; k.attached > 0 {
		return
	}
	for _, p := range k.portals {
		rec := []string{"iscsiadm", "-m", "node", "-T", k.target, "-p", p}
		_ = k.run(t, append(rec, "--logout")...) && k.run(t, append(rec, "-o", "delete")...)
	}
}
