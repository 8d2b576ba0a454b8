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
			c, err := New(Config{Exec: ex, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeadPathGrace: 2 * time.Second})
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
			if waited := took >= 2*time.Second; waited != tc.waits {
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

// hangingPaths is an executor whose multipathd never answers "show paths"
// until the command is killed, as multipathd once did while its checker
// failed and reinstated an unmapped LUN's paths.
type hangingPaths struct{ *fakeExec }

func (h hangingPaths) Run(ctx context.Context, name string, args ...string) ([]byte, error) {
	if name == "multipathd" && len(args) > 0 && args[0] == "show" && args[1] == "paths" {
		h.fakeExec.Run(ctx, name, args...)
		<-ctx.Done()
		return nil, ctx.Err()
	}
	return h.fakeExec.Run(ctx, name, args...)
}

// TestReleaseDeadMapsWhenMultipathdDoesNotAnswer: the release fails within
// its bound with an error that names multipathd and the command, and
// stops nothing queueing, instead of hanging until the caller's deadline.
func TestReleaseDeadMapsWhenMultipathdDoesNotAnswer(t *testing.T) {
	defer func(d time.Duration) { multipathdTimeout = d }(multipathdTimeout)
	multipathdTimeout = 200 * time.Millisecond
	mapName := "3600a0980" + hexSerial(testSerial)
	f := newFakeSys(t)
	f.session(1)
	f.device(1, 3, "sdb", testSerial, 1<<30)
	f.mpathMap("dm-1", "mpath-"+mapName, 1<<30, "sdb")
	ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
		switch cmd := strings.Join(argv, " "); cmd {
		case "multipathd show daemon":
			return []byte("pid 42 idle\n"), nil
		case "iscsiadm -m session":
			return sessionLines(1), nil
		}
		return nil, nil
	}}
	c, err := New(Config{Exec: hangingPaths{ex}, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeadPathGrace: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	start := time.Now()
	err = c.ReleaseDeadMaps(ctx, testTarget())
	if err == nil || !strings.Contains(err.Error(), `multipathd did not answer "show paths raw format %m %t" within 200ms`) {
		t.Fatalf("ReleaseDeadMaps: %v, want multipathd's silence named\n%s", err, ex.log())
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("took %s: the caller's deadline, not multipathd's bound", took)
	}
	if ex.called("multipathd disablequeueing") != 0 {
		t.Errorf("queueing disabled without multipathd's answer\n%s", ex.log())
	}
	t.Log(err)
}
