package iscsi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestAttachAlreadyAttachedDoesNothing(t *testing.T) {
	f := newFakeSys(t)
	f.session(1)
	f.device(1, 3, "sdb", testSerial, 1<<30)
	ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
		if strings.Join(argv, " ") == "iscsiadm -m session" {
			return sessionLines(1), nil
		}
		return nil, errors.New("unexpected call")
	}}
	c := newTestClient(t, f, ex, MultipathDisabled)
	dev, err := c.Attach(context.Background(), testTarget())
	if err != nil {
		t.Fatal(err)
	}
	if dev.Path != filepath.Join(f.dev, "sdb") || dev.Multipath || dev.Size != 1<<30 {
		t.Fatalf("device %+v", dev)
	}
	if got := ex.log(); got != "iscsiadm -m session" {
		t.Fatalf("calls:\n%s\nwant only the session list", got)
	}
	if b, _ := os.ReadFile(filepath.Join(f.sys, "class", "scsi_host", "host1", "scan")); len(b) != 0 {
		t.Fatalf("scanned %q", b)
	}
}

// loginExec answers like iscsiadm: no session until "-l", then one per
// portal logged in to; sysfs gets the session on login.
func loginExec(f *fakeSys, loginCode map[string]int) *fakeExec {
	var sessions []int
	portalSID := map[string]int{"10.0.0.1:3260": 1, "10.0.0.2:3260": 2}
	return &fakeExec{fn: func(argv []string) ([]byte, error) {
		cmd := strings.Join(argv, " ")
		switch {
		case argv[0] == "multipathd":
			return []byte("pid 42 idle\n"), nil
		case cmd == "iscsiadm -m session":
			if len(sessions) == 0 {
				return nil, exitErr("iscsiadm", errNoObjsFound)
			}
			return sessionLines(sessions...), nil
		case argv[0] == "iscsiadm" && argv[len(argv)-1] == "-l":
			portal := argv[6]
			if code := loginCode[portal]; code != 0 {
				return nil, exitErr("iscsiadm", code)
			}
			sid := portalSID[portal]
			sessions = append(sessions, sid)
			f.session(sid)
		}
		return nil, nil
	}}
}

func TestAttachLogsInAndScansOnlyItsLUN(t *testing.T) {
	chap := &CHAP{Username: "u", InitiatorSecret: "s3cret-i", TargetUsername: "tu", TargetSecret: "s3cret-t"}
	for _, tc := range []struct {
		name      string
		mode      MultipathMode
		chap      *CHAP
		portals   []string
		settings  []string // -n names after -o new, in order
		sessions  int
		multipath bool
	}{
		{
			name: "single path, no CHAP", mode: MultipathDisabled, portals: []string{"10.0.0.1", "10.0.0.2"},
			settings: []string{"node.session.scan", "node.conn[0].timeo.login_timeout", "node.session.initial_login_retry_max", "node.session.auth.authmethod"}, sessions: 1,
		},
		{
			name: "mutual CHAP", mode: MultipathDisabled, chap: chap, portals: []string{"10.0.0.1"},
			settings: []string{"node.session.scan", "node.conn[0].timeo.login_timeout", "node.session.initial_login_retry_max", "node.session.auth.authmethod", "node.session.auth.username",
				"node.session.auth.password", "node.session.auth.username_in", "node.session.auth.password_in"},
			sessions: 1,
		},
		{
			name: "multipath", mode: MultipathRequired, portals: []string{"10.0.0.1", "10.0.0.2"},
			settings: []string{"node.session.scan", "node.conn[0].timeo.login_timeout", "node.session.initial_login_retry_max", "node.session.timeo.replacement_timeout", "node.session.auth.authmethod"},
			sessions: 2, multipath: true,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			ex := loginExec(f, nil)
			k := f.kernel(t, []int{1, 2}, testSerial)
			if tc.multipath {
				// multipathd builds the map once both paths exist.
				whenPresent(t, []string{filepath.Join(f.sys, "block", "sdb"), filepath.Join(f.sys, "block", "sdc")}, func() {
					f.mpathMap("dm-0", "mpath-3600a0980"+hexSerial(testSerial), 1<<30, "sdb", "sdc")
				})
			}
			tgt := testTarget(tc.portals...)
			tgt.CHAP = tc.chap
			c := newTestClient(t, f, ex, tc.mode)
			dev, err := c.Attach(context.Background(), tgt)
			if err != nil {
				t.Fatalf("%v\ncalls:\n%s", err, ex.log())
			}
			if dev.Multipath != tc.multipath || len(dev.Paths) != tc.sessions {
				t.Fatalf("device %+v", dev)
			}
			scans, _ := k.counts()
			if len(scans) != tc.sessions {
				t.Fatalf("scans %q, want one per session", scans)
			}
			for _, s := range scans {
				if !strings.HasSuffix(s, ": 0 0 3") {
					t.Fatalf("scan %q: want exactly LUN 3 (\"0 0 3\")", s)
				}
			}
			if n := ex.called("iscsiadm -m node -T " + testIQN + " -p 10.0.0.1:3260 -I default -l"); n != 1 {
				t.Fatalf("%d logins to the first portal\n%s", n, ex.log())
			}
			var got []string
			for _, call := range strings.Split(ex.log(), "\n") {
				if strings.Contains(call, "-p 10.0.0.1:3260 -I default -o update -n ") {
					got = append(got, strings.Fields(strings.SplitN(call, " -n ", 2)[1])[0])
				}
			}
			if strings.Join(got, ",") != strings.Join(tc.settings, ",") {
				t.Fatalf("settings %v, want %v", got, tc.settings)
			}
			if !strings.Contains(ex.log(), "-n node.session.scan -v manual") {
				t.Fatal("node.session.scan is not set to manual")
			}
			// A refused login must fail in seconds (docs/vm.md, defect 13).
			if !strings.Contains(ex.log(), "-n node.conn[0].timeo.login_timeout -v 10") ||
				!strings.Contains(ex.log(), "-n node.session.initial_login_retry_max -v 1") {
				t.Fatal("the login's timeout and retries are not bounded")
			}
		})
	}
}

// whenPresent runs fn (as multipathd would) once all paths exist.
func whenPresent(t *testing.T, paths []string, fn func()) {
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		for {
			n := 0
			for _, p := range paths {
				if _, err := os.Stat(p); err == nil {
					n++
				}
			}
			if n == len(paths) {
				fn()
				return
			}
			select {
			case <-t.Context().Done():
				return
			case <-time.After(2 * time.Millisecond):
			}
		}
	}()
}

func hexSerial(s string) string {
	const digits = "0123456789abcdef"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		b.WriteByte(digits[s[i]>>4])
		b.WriteByte(digits[s[i]&15])
	}
	return b.String()
}

func TestAttachSerialMismatch(t *testing.T) {
	for _, tc := range []struct {
		name        string
		serials     []string // what successive scans find
		inUse       bool
		wantErr     error
		wantDeletes int
	}{
		{name: "stale device replaced by the rescan", serials: []string{otherSer, testSerial}, wantDeletes: 1},
		{name: "wrong LUN stays wrong", serials: []string{otherSer}, wantErr: ErrSerialMismatch, wantDeletes: 2},
		{name: "stale device in use is not removed", serials: []string{otherSer}, inUse: true, wantErr: ErrSerialMismatch},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			ex := &fakeExec{fn: func(argv []string) ([]byte, error) { return sessionLines(1), nil }}
			if tc.inUse {
				f.device(1, 3, "sdb", otherSer, 1<<30)
				f.mpathMap("dm-7", "mpath-3600a0980"+hexSerial(otherSer), 1<<30, "sdb")
			}
			k := f.kernel(t, []int{1}, tc.serials...)
			c := newTestClient(t, f, ex, MultipathDisabled)
			_, err := c.Attach(context.Background(), testTarget())
			if !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("Attach: %v, want %v", err, tc.wantErr)
			}
			// The last delete may still be on its way through the fake kernel.
			deletes := 0
			for deadline := time.Now().Add(2 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
				if _, deletes = k.counts(); deletes >= tc.wantDeletes {
					break
				}
			}
			if deletes != tc.wantDeletes {
				t.Fatalf("%d deletes, want %d", deletes, tc.wantDeletes)
			}
			if tc.inUse {
				if _, err := os.Stat(f.deviceDir(1, 3)); err != nil {
					t.Fatal("the device in use was removed")
				}
			}
		})
	}
}

func TestAttachLoginFailures(t *testing.T) {
	for _, tc := range []struct {
		name    string
		codes   map[string]int
		wantErr error
		paths   int
	}{
		{name: "CHAP refused everywhere", codes: map[string]int{"10.0.0.1:3260": 24, "10.0.0.2:3260": 24}, wantErr: ErrAuthFailed},
		{name: "one portal down", codes: map[string]int{"10.0.0.2:3260": 8}, paths: 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			ex := loginExec(f, tc.codes)
			f.kernel(t, []int{1, 2}, testSerial)
			whenPresent(t, []string{filepath.Join(f.sys, "block", "sdb")}, func() {
				f.mpathMap("dm-0", "mpath-3600a0980"+hexSerial(testSerial), 1<<30, "sdb")
			})
			c := newTestClient(t, f, ex, MultipathAuto)
			dev, err := c.Attach(context.Background(), testTarget("10.0.0.1", "10.0.0.2"))
			if tc.wantErr != nil {
				if !errors.Is(err, tc.wantErr) {
					t.Fatalf("Attach: %v, want %v", err, tc.wantErr)
				}
			} else if err != nil || len(dev.Paths) != tc.paths {
				t.Fatalf("Attach: %+v, %v; want %d paths", dev, err, tc.paths)
			}
			for portal := range tc.codes {
				if ex.called("iscsiadm -m node -T "+testIQN+" -p "+portal+" -o delete") != 1 {
					t.Fatalf("the record of %s was not deleted after its failed login\n%s", portal, ex.log())
				}
			}
		})
	}
}

func TestAttachMultipathRequiredWithoutDaemon(t *testing.T) {
	f := newFakeSys(t)
	ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
		if argv[0] == "multipathd" {
			return nil, exitErr("multipathd", 1)
		}
		return nil, errors.New("unexpected")
	}}
	c := newTestClient(t, f, ex, MultipathRequired)
	if _, err := c.Attach(context.Background(), testTarget()); err == nil || !strings.Contains(err.Error(), "multipathd is not running") {
		t.Fatalf("Attach: %v", err)
	}
	if ex.called("iscsiadm") != 0 {
		t.Fatalf("logged in anyway:\n%s", ex.log())
	}
}

// TestAttachWithoutMapIsNoDeadline: multipathd running but building no
// map (a real kernel whose multipath.conf ignores the LUN) fails the
// attach after the device timeout with an error that is not the caller's
// deadline, which the node would report as DeadlineExceeded; the caller's
// own deadline still is one. The error says how long the attach waited,
// which is not the device timeout when the caller's deadline came first.
func TestAttachWithoutMapIsNoDeadline(t *testing.T) {
	for _, tc := range []struct {
		name     string
		deadline time.Duration // of the caller; 0: none
		want     error
	}{
		{"device timeout", 0, errWaitTimedOut},
		{"caller's deadline", 300 * time.Millisecond, context.DeadlineExceeded},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			ex := loginExec(f, nil)
			f.kernel(t, []int{1, 2}, testSerial)
			c, err := New(Config{Exec: ex, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeviceTimeout: time.Second, Multipath: MultipathRequired})
			if err != nil {
				t.Fatal(err)
			}
			ctx := context.Background()
			if tc.deadline > 0 {
				var cancel context.CancelFunc
				ctx, cancel = context.WithTimeout(ctx, tc.deadline)
				defer cancel()
			}
			_, err = c.Attach(ctx, testTarget("10.0.0.1", "10.0.0.2"))
			if !errors.Is(err, tc.want) || (tc.want == errWaitTimedOut && errors.Is(err, context.DeadlineExceeded)) {
				t.Fatalf("Attach without a map: %v, want %v", err, tc.want)
			}
			m := regexp.MustCompile(`within (\S+) `).FindStringSubmatch(err.Error())
			if m == nil {
				t.Fatalf("the error does not say how long it waited: %v", err)
			}
			waited, perr := time.ParseDuration(m[1])
			if perr != nil {
				t.Fatalf("the error's wait %q: %v", m[1], perr)
			}
			if cut := tc.deadline > 0; cut != (waited < time.Second) {
				t.Fatalf("the error says it waited %s (caller's deadline %s, device timeout 1s): %v", waited, tc.deadline, err)
			}
		})
	}
}

// A map that does not come names the daemon that holds it up: udev, while
// the paths are not in its database yet (multipathd adds a path from
// udev's event; a busy udev lagged the kernel by minutes in the VM, issue
// 16), else multipathd's configuration.
func TestAttachWithoutMapSaysWhetherUdevIsBehind(t *testing.T) {
	const config = `(it needs find_multipaths "no"`
	for _, tc := range []struct {
		name      string
		udev      string   // "none": no database configured; "missing": configured, absent; "db": present
		devnos    bool     // the paths have their sysfs "dev"
		processed []string // paths in udev's database
		want      string
	}{
		{"no udev database to read", "none", true, nil, config},
		{"udev database not there", "missing", true, nil, config},
		{"both paths processed", "db", true, []string{"sdb", "sdc"}, config},
		{"one path not processed", "db", true, []string{"sdb"}, "udev has not processed its path devices sdc yet"},
		{"no path processed", "db", true, nil, "udev has not processed its path devices sdb, sdc yet"},
		{"no device numbers", "db", false, nil, config},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			ex := loginExec(f, nil)
			f.kernel(t, []int{1, 2}, testSerial)
			devnos := map[string]string{"sdb": "8:16", "sdc": "8:32"}
			if tc.devnos {
				whenPresent(t, []string{filepath.Join(f.sys, "block", "sdb"), filepath.Join(f.sys, "block", "sdc")}, func() {
					for name, devno := range devnos {
						f.write(filepath.Join(f.sys, "block", name, "dev"), devno+"\n")
					}
				})
			}
			udevDir := ""
			switch tc.udev {
			case "missing":
				udevDir = filepath.Join(t.TempDir(), "run", "udev", "data")
			case "db":
				udevDir = t.TempDir()
				f.write(filepath.Join(udevDir, "b8:0"), "") // another disk
				for _, name := range tc.processed {
					f.write(filepath.Join(udevDir, "b"+devnos[name]), "E:ID_SERIAL=x\n")
				}
			}
			c, err := New(Config{Exec: ex, DevDir: f.dev, SysRoot: f.sys, UdevDataDir: udevDir, LockDir: t.TempDir(), DeviceTimeout: 500 * time.Millisecond, Multipath: MultipathRequired})
			if err != nil {
				t.Fatal(err)
			}
			_, err = c.Attach(context.Background(), testTarget("10.0.0.1", "10.0.0.2"))
			if !errors.Is(err, errWaitTimedOut) || !strings.Contains(err.Error(), "multipathd built no map") {
				t.Fatalf("Attach without a map: %v", err)
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Attach without a map: %v\nwant it to say %q", err, tc.want)
			}
			if tc.want == config && strings.Contains(err.Error(), "udev") {
				t.Fatalf("Attach without a map blames udev: %v", err)
			}
		})
	}
}

func TestFindRefusesAForeignMap(t *testing.T) {
	f := newFakeSys(t)
	f.session(1)
	f.device(1, 3, "sdb", testSerial, 1<<30)
	f.mpathMap("dm-2", "mpath-3600a0980"+hexSerial(otherSer), 1<<30, "sdb")
	ex := &fakeExec{fn: func(argv []string) ([]byte, error) { return sessionLines(1), nil }}
	c := newTestClient(t, f, ex, MultipathAuto)
	if _, err := c.Find(context.Background(), testTarget()); !errors.Is(err, ErrSerialMismatch) {
		t.Fatalf("Find: %v, want ErrSerialMismatch", err)
	}
}

// lioMapUUID is how LIO's LUN with testSerial shows in dm-multipath: LIO
// derives the WWID from the serial's hex digits, not in ONTAP's form.
const lioMapUUID = "mpath-3600140580bbfd000000000000000000"

// A map whose WWID is not in ONTAP's form is the LUN's when every path
// under it has the LUN's serial: a multipath attach to a LIO target.
func TestAttachTakesAMapOfAnotherWWIDFormByItsPaths(t *testing.T) {
	f := newFakeSys(t)
	ex := loginExec(f, nil)
	f.kernel(t, []int{1, 2}, testSerial)
	whenPresent(t, []string{filepath.Join(f.sys, "block", "sdb"), filepath.Join(f.sys, "block", "sdc")}, func() {
		f.mpathMap("dm-0", lioMapUUID, 1<<30, "sdb", "sdc")
	})
	c := newTestClient(t, f, ex, MultipathRequired)
	dev, err := c.Attach(context.Background(), testTarget("10.0.0.1", "10.0.0.2"))
	if err != nil {
		t.Fatalf("%v\ncalls:\n%s", err, ex.log())
	}
	if !dev.Multipath || len(dev.Paths) != 2 {
		t.Fatalf("device %+v", dev)
	}
}

// Such a map with a path of another LUN, or with no path at all, is not
// the LUN's.
func TestVerifyMapRefusesAMapOfAnotherWWIDFormWithoutItsPaths(t *testing.T) {
	for _, tc := range []struct {
		name   string
		serial string // of the path under the map; "" for no path
	}{
		{"path of another LUN", otherSer},
		{"no path", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			c := newTestClient(t, f, &fakeExec{fn: func(argv []string) ([]byte, error) { return sessionLines(1), nil }}, MultipathAuto)
			var paths []string
			if tc.serial != "" {
				f.device(1, 3, "sdc", tc.serial, 1<<30)
				paths = []string{"sdc"}
			}
			f.mpathMap("dm-1", lioMapUUID, 1<<30, paths...)
			if _, err := c.verifyMap(dmMap{name: "dm-1", uuid: lioMapUUID}, testSerial); !errors.Is(err, ErrSerialMismatch) {
				t.Fatalf("verifyMap: %v, want ErrSerialMismatch", err)
			}
		})
	}
}
