package iscsi

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/node/hostexec"
)

// The unit tests drive the decision logic against a recorded, scripted
// executor and a sysfs tree in a temp dir; fakeKernel answers the sysfs
// writes the way the kernel would. The end-to-end tests (e2e_test.go) run
// the real shims instead.

const (
	testIQN    = "iqn.1992-08.com.netapp:sn.0123456789abcdef0123456789abcdef:vs.2"
	testSerial = "80CLbB+Y6sfd"
	otherSer   = "80CLbB+Zzzzz"
)

// fakeExec records every call and answers with fn.
type fakeExec struct {
	mu    sync.Mutex
	calls []string
	fn    func(argv []string) ([]byte, error)
}

func (f *fakeExec) Run(_ context.Context, name string, args ...string) ([]byte, error) {
	argv := append([]string{name}, args...)
	f.mu.Lock()
	f.calls = append(f.calls, strings.Join(argv, " "))
	f.mu.Unlock()
	if f.fn == nil {
		return nil, nil
	}
	return f.fn(argv)
}

func (f *fakeExec) called(prefix string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, c := range f.calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

func (f *fakeExec) log() string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return strings.Join(f.calls, "\n")
}

func exitErr(name string, code int) error {
	return &hostexec.ExitError{Name: name, Code: code, Stderr: "scripted failure"}
}

// fakeSys is a sysfs and /dev tree in the kernel's layout.
type fakeSys struct {
	t        *testing.T
	sys, dev string
}

func newFakeSys(t *testing.T) *fakeSys {
	root := t.TempDir()
	f := &fakeSys{t: t, sys: filepath.Join(root, "sys"), dev: filepath.Join(root, "dev")}
	f.mkdir(f.sys)
	f.mkdir(f.dev)
	return f
}

func (f *fakeSys) mkdir(p string) {
	f.t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSys) write(p, content string) {
	f.t.Helper()
	f.mkdir(filepath.Dir(p))
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSys) link(target, link string) {
	f.t.Helper()
	f.mkdir(filepath.Dir(link))
	rel, err := filepath.Rel(filepath.Dir(link), target)
	if err != nil {
		f.t.Fatal(err)
	}
	if err := os.Symlink(rel, link); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSys) sessionDir(sid int) string {
	return filepath.Join(f.sys, "devices", "platform", "host"+strconv.Itoa(sid), "session"+strconv.Itoa(sid))
}

// session creates session sid on SCSI host sid (as iscsi_tcp does, one
// host per session, here with the same number).
func (f *fakeSys) session(sid int) {
	sdir := f.sessionDir(sid)
	attrs := filepath.Join(sdir, "iscsi_session", "session"+strconv.Itoa(sid))
	f.write(filepath.Join(attrs, "target_id"), "0\n")
	f.link(sdir, filepath.Join(attrs, "device"))
	f.link(attrs, filepath.Join(f.sys, "class", "iscsi_session", "session"+strconv.Itoa(sid)))
	host := filepath.Join(filepath.Dir(sdir), "scsi_host", "host"+strconv.Itoa(sid))
	f.write(filepath.Join(host, "scan"), "")
	f.link(host, filepath.Join(f.sys, "class", "scsi_host", "host"+strconv.Itoa(sid)))
}

func (f *fakeSys) deviceDir(sid, lun int) string {
	return filepath.Join(f.sessionDir(sid), fmt.Sprintf("target%d:0:0", sid), fmt.Sprintf("%d:0:0:%d", sid, lun))
}

// device adds SCSI device sid:0:0:lun as block device name.
func (f *fakeSys) device(sid, lun int, name, serial string, size int64) {
	dir := f.deviceDir(sid, lun)
	tmp := filepath.Join(filepath.Dir(dir), ".new")
	f.write(filepath.Join(tmp, "vpd_pg80"), string(append([]byte{0, 0x80, 0, byte(len(serial))}, serial...)))
	f.write(filepath.Join(tmp, "rescan"), "")
	f.write(filepath.Join(tmp, "delete"), "")
	f.write(filepath.Join(tmp, "block", name, "size"), strconv.FormatInt(size/512, 10)+"\n")
	f.mkdir(filepath.Join(tmp, "block", name, "holders"))
	f.write(filepath.Join(f.dev, name), "")
	f.link(filepath.Join(dir, "block", name), filepath.Join(f.sys, "block", name))
	if err := os.Symlink("../..", filepath.Join(tmp, "block", name, "device")); err != nil {
		f.t.Fatal(err)
	}
	if err := os.Rename(tmp, dir); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fakeSys) removeDevice(sid, lun int) {
	dir := f.deviceDir(sid, lun)
	if name := blockNameOf(dir); name != "" {
		os.Remove(filepath.Join(f.sys, "block", name))
		os.Remove(filepath.Join(f.dev, name))
	}
	os.RemoveAll(dir)
}

func (f *fakeSys) setSize(name string, size int64) {
	f.write(filepath.Join(f.sys, "block", name, "size"), strconv.FormatInt(size/512, 10)+"\n")
}

// mpathMap makes name a multipath map over paths with the given uuid.
func (f *fakeSys) mpathMap(name, uuid string, size int64, paths ...string) {
	dir := filepath.Join(f.sys, "devices", "virtual", "block", name)
	f.write(filepath.Join(dir, "dm", "uuid"), uuid+"\n")
	f.write(filepath.Join(dir, "dm", "name"), strings.TrimPrefix(uuid, "mpath-")+"\n")
	f.write(filepath.Join(dir, "size"), strconv.FormatInt(size/512, 10)+"\n")
	f.mkdir(filepath.Join(dir, "slaves"))
	f.link(dir, filepath.Join(f.sys, "block", name))
	f.write(filepath.Join(f.dev, name), "")
	for _, p := range paths {
		f.link(filepath.Join(f.sys, "block", p), filepath.Join(dir, "slaves", p))
		f.link(dir, filepath.Join(f.sys, "block", p, "holders", name))
	}
}

// removeMap is a flushed map: gone from sysfs and its paths' holders.
func (f *fakeSys) removeMap(name string, paths ...string) {
	os.RemoveAll(filepath.Join(f.sys, "devices", "virtual", "block", name))
	os.Remove(filepath.Join(f.sys, "block", name))
	for _, p := range paths {
		os.Remove(filepath.Join(f.sys, "block", p, "holders", name))
	}
}

// flushMapNamed is "multipath -f <mapName>": the one of maps with that
// name goes, as removeMap.
func (f *fakeSys) flushMapNamed(mapName string, maps []string, paths ...string) {
	for _, n := range maps {
		if b, _ := os.ReadFile(filepath.Join(f.sys, "block", n, "dm", "name")); strings.TrimSpace(string(b)) == mapName {
			f.removeMap(n, paths...)
			return
		}
	}
}

// fakeKernel answers scan and delete writes: a scan creates the next device
// of serials for that session (the last one repeats), a delete removes it.
type fakeKernel struct {
	sys     *fakeSys
	serials map[int][]string // per session
	size    int64
	stop    chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	scans   []string
	deletes int
}

func (f *fakeSys) kernel(t *testing.T, sessions []int, serials ...string) *fakeKernel {
	k := &fakeKernel{sys: f, serials: map[int][]string{}, size: 1 << 30, stop: make(chan struct{}), done: make(chan struct{})}
	for _, s := range sessions {
		k.serials[s] = append([]string(nil), serials...)
	}
	go k.run()
	t.Cleanup(func() { close(k.stop); <-k.done })
	return k
}

func (k *fakeKernel) run() {
	defer close(k.done)
	for {
		select {
		case <-k.stop:
			return
		case <-time.After(2 * time.Millisecond):
		}
		scans, _ := filepath.Glob(filepath.Join(k.sys.sys, "class", "scsi_host", "host*", "scan"))
		for _, scan := range scans {
			b, _ := os.ReadFile(scan)
			if len(b) == 0 {
				continue
			}
			os.WriteFile(scan, nil, 0o644)
			sid, _ := strconv.Atoi(strings.TrimPrefix(filepath.Base(filepath.Dir(scan)), "host"))
			var c, tg, lun int
			fmt.Sscanf(string(b), "%d %d %d", &c, &tg, &lun)
			k.mu.Lock()
			k.scans = append(k.scans, fmt.Sprintf("host%d: %s", sid, b))
			serial := k.serials[sid][0]
			if len(k.serials[sid]) > 1 {
				k.serials[sid] = k.serials[sid][1:]
			}
			k.mu.Unlock()
			if _, err := os.Stat(k.sys.deviceDir(sid, lun)); err != nil {
				k.sys.device(sid, lun, fmt.Sprintf("sd%c", 'a'+sid), serial, k.size)
			}
		}
		deletes, _ := filepath.Glob(filepath.Join(k.sys.sys, "devices", "platform", "host*", "session*", "target*", "*", "delete"))
		for _, del := range deletes {
			if b, _ := os.ReadFile(del); strings.TrimSpace(string(b)) == "1" {
				var sid, c, tg, lun int
				fmt.Sscanf(filepath.Base(filepath.Dir(del)), "%d:%d:%d:%d", &sid, &c, &tg, &lun)
				k.sys.removeDevice(sid, lun)
				k.mu.Lock()
				k.deletes++
				k.mu.Unlock()
			}
		}
	}
}

func (k *fakeKernel) counts() (scans []string, deletes int) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.scans...), k.deletes
}

func sessionLines(sids ...int) []byte {
	var b strings.Builder
	for _, sid := range sids {
		fmt.Fprintf(&b, "tcp: [%d] 10.0.0.%d:3260,1029 %s (non-flash)\n", sid, sid, testIQN)
	}
	return []byte(b.String())
}

func testTarget(portals ...string) Target {
	if len(portals) == 0 {
		portals = []string{"10.0.0.1"}
	}
	return Target{IQN: testIQN, Portals: portals, LUN: 3, Serial: testSerial}
}

func newTestClient(t *testing.T, f *fakeSys, ex *fakeExec, mode MultipathMode) *Client {
	t.Helper()
	c, err := New(Config{Exec: ex, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeviceTimeout: 5 * time.Second, Multipath: mode})
	if err != nil {
		t.Fatal(err)
	}
	return c
}
