package iscsi

import (
	"context"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReleaseDeadMaps: a LUN's map whose every path failed stops queueing
// once none has come back within the grace; one with a usable path, or
// whose path comes back, keeps queueing; one without any path stops at
// once, as waiting cannot bring a path back to it.
func TestReleaseDeadMaps(t *testing.T) {
	mapName := "3600a0980" + hexSerial(testSerial)
	for _, tc := range []struct {
		name    string
		paths   []string // "show paths" answers in turn, the last repeats
		slaves  bool     // the map still has its (failed) paths
		release bool
		waits   bool // for the grace
	}{
		{"a path is up", []string{mapName + " active\n" + mapName + " failed\n"}, true, false, false},
		{"every path failed", []string{mapName + " failed\n" + mapName + " failed\n"}, true, true, true},
		{"a path comes back", []string{mapName + " failed\n", mapName + " failed\n", mapName + " active\n"}, true, false, false},
		{"no path left", []string{""}, false, true, false},
		{"multipathd says nothing usable", []string{"garbage line here\n"}, true, false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			f.device(1, 3, "sdb", testSerial, 1<<30)
			if tc.slaves {
				f.mpathMap("dm-1", "mpath-"+mapName, 1<<30, "sdb")
			} else {
				f.mpathMap("dm-1", "mpath-"+mapName, 1<<30)
			}
			var mu sync.Mutex
			answers := tc.paths
			ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
				cmd := strings.Join(argv, " ")
				switch {
				case cmd == "multipathd show daemon":
					return []byte("pid 42 idle\n"), nil
				case cmd == "multipathd show paths raw format %m %t":
					mu.Lock()
					defer mu.Unlock()
					out := answers[0]
					if len(answers) > 1 {
						answers = answers[1:]
					}
					return []byte(out), nil
				case cmd == "multipathd disablequeueing map "+mapName:
					return []byte("ok\n"), nil
				case cmd == "iscsiadm -m session":
					return sessionLines(1), nil
				}
				return nil, nil
			}}
			c, err := New(Config{Exec: ex, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeadPathGrace: 300 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			start := time.Now()
			if err := c.ReleaseDeadMaps(context.Background(), testTarget()); err != nil {
				t.Fatalf("%v\n%s", err, ex.log())
			}
			took := time.Since(start)
			if got := ex.called("multipathd disablequeueing") == 1; got != tc.release {
				t.Fatalf("queueing disabled: %v, want %v\n%s", got, tc.release, ex.log())
			}
			if waited := took >= 300*time.Millisecond; waited != tc.waits {
				t.Fatalf("took %s: waited for the grace %v, want %v", took, waited, tc.waits)
			}
		})
	}
}

// TestDetachReleasesDeadMapsAtOnce: Detach stops a dead map queueing
// before it flushes it, without the grace its caller already gave.
func TestDetachReleasesDeadMapsAtOnce(t *testing.T) {
	mapName := "3600a0980" + hexSerial(testSerial)
	f := newFakeSys(t)
	f.session(1)
	f.device(1, 3, "sdb", testSerial, 1<<30)
	f.mpathMap("dm-1", "mpath-"+mapName, 1<<30, "sdb")
	f.kernel(t, []int{1}, testSerial)
	ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
		switch cmd := strings.Join(argv, " "); {
		case cmd == "multipathd show daemon":
			return []byte("pid 42 idle\n"), nil
		case cmd == "multipathd show paths raw format %m %t":
			return []byte(mapName + " failed\n"), nil
		case cmd == "multipathd disablequeueing map "+mapName:
			return []byte("ok\n"), nil
		case cmd == "iscsiadm -m session":
			return sessionLines(1), nil
		case cmd == "multipath -f "+mapName:
			f.removeMap("dm-1", "sdb")
		case argv[0] == "iscsiadm" && argv[len(argv)-1] == "-u":
			os.RemoveAll(f.sessionDir(1))
		}
		return nil, nil
	}}
	c, err := New(Config{Exec: ex, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeadPathGrace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Detach(context.Background(), testTarget()); err != nil {
		t.Fatalf("%v\n%s", err, ex.log())
	}
	log := ex.log()
	if i, j := strings.Index(log, "multipathd disablequeueing"), strings.Index(log, "multipath -f"); i < 0 || j < i {
		t.Fatalf("queueing not stopped before the flush:\n%s", log)
	}
}
