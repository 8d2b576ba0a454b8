package iscsi

import (
	"context"
	"errors"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestReleaseDeadMapsDuring: while the unmount of a LUN's file system
// runs, a map whose every path failed stops queueing once it has had no
// usable path for the grace, even when multipathd's checker reinstates the
// paths in between (an unmapped LUN); one with a usable path, or whose
// path comes back and lets the unmount end, keeps queueing; one without
// any path stops at once, as waiting cannot bring a path back to it; and
// an unmount that ends at once asks multipathd nothing. The fake unmount
// is the kernel's: it ends when its writes can go somewhere (a path is
// usable, or queueing stopped and they fail), and in the "unmount ends by
// itself" cases after a moment.
func TestReleaseDeadMapsDuring(t *testing.T) {
	mapName := "3600a0980" + hexSerial(testSerial)
	active, failed := mapName+" active\n", mapName+" failed\n"
	for _, tc := range []struct {
		name       string
		paths      []string // "show paths" answers in turn, the last repeats
		cycle      bool     // the answers repeat from the first instead
		slaves     bool     // the map still has its (failed) paths
		endsOnPath bool     // a usable path lets the unmount's writes through
		endsAfter  time.Duration
		release    bool
		waits      bool // for the grace
		asks       bool // multipathd is asked about paths at all
	}{
		{"unmount ends at once", []string{failed}, false, true, false, time.Millisecond, false, false, false},
		{"a path is up", []string{active + failed}, false, true, true, 0, false, false, true},
		{"every path failed", []string{failed + failed}, false, true, false, 0, true, true, true},
		{"a path comes back", []string{failed, failed, active}, false, true, true, 0, false, false, true},
		{"paths failed and reinstated in turn", []string{failed, failed, active}, true, true, false, 0, true, true, true},
		{"no path left", []string{""}, false, false, false, 0, true, false, true},
		{"multipathd says nothing usable", []string{"garbage line here\n"}, false, true, false, time.Second, false, false, true},
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
			answers := append([]string(nil), tc.paths...)
			writesGo := make(chan struct{})
			var once sync.Once
			ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
				cmd := strings.Join(argv, " ")
				switch {
				case cmd == "multipathd show daemon":
					return []byte("pid 42 idle\n"), nil
				case cmd == "multipathd show paths raw format %m %t":
					mu.Lock()
					defer mu.Unlock()
					out := answers[0]
					switch {
					case tc.cycle:
						answers = append(answers[1:], out)
					case len(answers) > 1:
						answers = answers[1:]
					}
					if tc.endsOnPath && strings.Contains(out, "active") {
						once.Do(func() { close(writesGo) })
					}
					return []byte(out), nil
				case cmd == "multipathd disablequeueing map "+mapName:
					once.Do(func() { close(writesGo) })
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
			unmount := func() error {
				ends := time.After(10 * time.Second) // the kernel would wait for ever
				if tc.endsAfter > 0 {
					ends = time.After(tc.endsAfter)
				} else if tc.endsAfter < 0 {
					return nil
				}
				select {
				case <-writesGo:
					return nil
				case <-ends:
					if tc.endsAfter > 0 {
						return nil
					}
					return errors.New("unmount still waiting on the map")
				}
			}
			start := time.Now()
			if err := c.ReleaseDeadMapsDuring(context.Background(), testTarget(), unmount); err != nil {
				t.Fatalf("%v\n%s", err, ex.log())
			}
			took := time.Since(start)
			if got := ex.called("multipathd disablequeueing") == 1; got != tc.release {
				t.Fatalf("queueing disabled: %v, want %v\n%s", got, tc.release, ex.log())
			}
			if waited := took >= 2*time.Second; waited != tc.waits {
				t.Fatalf("took %s: waited for the grace %v, want %v", took, waited, tc.waits)
			}
			if asked := ex.called("multipathd show paths") > 0; asked != tc.asks {
				t.Fatalf("multipathd asked about paths: %v, want %v\n%s", asked, tc.asks, ex.log())
			}
		})
	}
}

// deadMapExec is multipathd and iscsiadm as the dead-map tests need them:
// "show paths" answers paths(), "disablequeueing" of mapName calls
// disable, and more, if set, answers any other command.
func deadMapExec(mapName string, paths func() string, disable func(), more func(argv []string) ([]byte, error)) *fakeExec {
	return &fakeExec{fn: func(argv []string) ([]byte, error) {
		switch cmd := strings.Join(argv, " "); cmd {
		case "multipathd show daemon":
			return []byte("pid 42 idle\n"), nil
		case "multipathd show paths raw format %m %t":
			return []byte(paths()), nil
		case "multipathd disablequeueing map " + mapName:
			disable()
			return []byte("ok\n"), nil
		case "iscsiadm -m session":
			return sessionLines(1), nil
		}
		if more != nil {
			return more(argv)
		}
		return nil, nil
	}}
}

// TestReleaseDeadMapsDuringAfterABusyUnmount: an unmount refused as busy
// because the fenced pod's process is stuck writing to a map without a
// path is run again once the map's grace ran out and its queueing stopped
// (which fails the stuck writes); one refused on a map whose paths are
// up returns its error at once, after one look.
func TestReleaseDeadMapsDuringAfterABusyUnmount(t *testing.T) {
	mapName := "3600a0980" + hexSerial(testSerial)
	for _, tc := range []struct {
		name    string
		paths   string
		release bool
		wantErr bool
	}{
		{"every path failed", mapName + " failed\n" + mapName + " failed\n", true, false},
		{"the paths are up", mapName + " active\n" + mapName + " active\n", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			f.device(1, 3, "sdb", testSerial, 1<<30)
			f.mpathMap("dm-1", "mpath-"+mapName, 1<<30, "sdb")
			var mu sync.Mutex
			released := false
			ex := deadMapExec(mapName, func() string { return tc.paths }, func() {
				mu.Lock()
				released = true
				mu.Unlock()
			}, nil)
			c, err := New(Config{Exec: ex, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeadPathGrace: time.Second})
			if err != nil {
				t.Fatal(err)
			}
			unmounts := 0
			start := time.Now()
			err = c.ReleaseDeadMapsDuring(context.Background(), testTarget(), func() error {
				unmounts++
				mu.Lock()
				defer mu.Unlock()
				if !released {
					return errors.New("umount: target is busy")
				}
				return nil
			})
			took := time.Since(start)
			if (err != nil) != tc.wantErr || released != tc.release {
				t.Fatalf("err %v, released %v; want error %v, released %v\n%s", err, released, tc.wantErr, tc.release, ex.log())
			}
			if tc.release && (unmounts != 2 || took < time.Second) {
				t.Fatalf("%d unmounts in %s, want the second after the grace", unmounts, took)
			}
			if !tc.release && (unmounts != 1 || took > 500*time.Millisecond || ex.called("multipathd show paths") != 1) {
				t.Fatalf("%d unmounts in %s, want one and one look\n%s", unmounts, took, ex.log())
			}
		})
	}
}

// TestReleaseDeadMapsDuringOutlivesTheCaller: an unmount stuck on a dead
// map cannot be killed, so the watch goes on after the caller's context
// ended and stops the queueing after the grace, which lets the unmount,
// and with it the call, end.
func TestReleaseDeadMapsDuringOutlivesTheCaller(t *testing.T) {
	mapName := "3600a0980" + hexSerial(testSerial)
	f := newFakeSys(t)
	f.session(1)
	f.device(1, 3, "sdb", testSerial, 1<<30)
	f.mpathMap("dm-1", "mpath-"+mapName, 1<<30, "sdb")
	released := make(chan struct{})
	ex := deadMapExec(mapName, func() string { return mapName + " failed\n" }, func() { close(released) }, nil)
	c, err := New(Config{Exec: ex, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeadPathGrace: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err = c.ReleaseDeadMapsDuring(ctx, testTarget(), func() error {
		select {
		case <-released:
			return nil
		case <-time.After(10 * time.Second):
			return errors.New("unmount still waiting on the map")
		}
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, ex.log())
	}
}

// TestDetachLeavesQueueingToMultipath: Detach does not ask multipathd
// about the map's paths, whether they are usable or not: its caller's
// unmount ran under the watch of ReleaseDeadMapsDuring, and multipath -f
// turns queueing off itself (docs/design/architecture.md §7.3).
func TestDetachLeavesQueueingToMultipath(t *testing.T) {
	mapName := "3600a0980" + hexSerial(testSerial)
	for _, state := range []string{"active", "failed"} {
		t.Run(state, func(t *testing.T) {
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
					return []byte(mapName + " " + state + "\n"), nil
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
			if n := ex.called("multipathd"); n != 0 {
				t.Errorf("%d multipathd runs, want none:\n%s", n, ex.log())
			}
			if n := ex.called("multipath -f " + mapName); n != 1 {
				t.Errorf("%d flushes of the map, want 1:\n%s", n, ex.log())
			}
		})
	}
}

// TestDetachStopsQueueingOfAMapHeldOpenWithoutAPath: a flush refused
// because a process holds the map open, stuck on I/O the map queues with
// no usable path (a raw block volume's writer on a LUN unmapped on ONTAP),
// turns the map's queueing off, which fails the stuck I/O and lets the
// process close the map, and the next flush removes it; a map refused
// while its paths are up keeps queueing.
func TestDetachStopsQueueingOfAMapHeldOpenWithoutAPath(t *testing.T) {
	mapName := "3600a0980" + hexSerial(testSerial)
	for _, tc := range []struct {
		state   string
		release bool
	}{{"failed", true}, {"active", false}} {
		t.Run(tc.state, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			f.device(1, 3, "sdb", testSerial, 1<<30)
			f.mpathMap("dm-1", "mpath-"+mapName, 1<<30, "sdb")
			f.kernel(t, []int{1}, testSerial)
			held := true // until queueing stops: the writer's I/O then fails and it exits
			ex := deadMapExec(mapName, func() string { return mapName + " " + tc.state + "\n" }, func() { held = false }, func(argv []string) ([]byte, error) {
				switch cmd := strings.Join(argv, " "); {
				case cmd == "multipath -f "+mapName:
					if held {
						return nil, exitErr("multipath", 1)
					}
					f.removeMap("dm-1", "sdb")
				case argv[0] == "iscsiadm" && argv[len(argv)-1] == "-u":
					os.RemoveAll(f.sessionDir(1))
				}
				return nil, nil
			})
			c, err := New(Config{Exec: ex, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeadPathGrace: time.Hour})
			if err != nil {
				t.Fatal(err)
			}
			err = c.Detach(context.Background(), testTarget())
			if (err == nil) != tc.release {
				t.Fatalf("Detach = %v, want success %v\n%s", err, tc.release, ex.log())
			}
			if n := ex.called("multipathd show paths"); n != 1 {
				t.Errorf("%d looks at the paths, want one, at the first refusal:\n%s", n, ex.log())
			}
			if got := ex.called("multipathd disablequeueing") == 1; got != tc.release {
				t.Errorf("queueing stopped: %v, want %v\n%s", got, tc.release, ex.log())
			}
		})
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

// TestReleaseDeadMapsDuringWhenMultipathdDoesNotAnswer: a multipathd that
// does not answer neither holds up an unmount that ends (the call returns
// when the unmount does) nor gets a map's queueing stopped.
func TestReleaseDeadMapsDuringWhenMultipathdDoesNotAnswer(t *testing.T) {
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
	c, err := New(Config{Exec: hangingPaths{ex}, DevDir: f.dev, SysRoot: f.sys, LockDir: t.TempDir(), DeadPathGrace: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	err = c.ReleaseDeadMapsDuring(context.Background(), testTarget(), func() error {
		time.Sleep(time.Second)
		return nil
	})
	if err != nil {
		t.Fatalf("ReleaseDeadMapsDuring: %v\n%s", err, ex.log())
	}
	if took := time.Since(start); took > 3*time.Second {
		t.Errorf("took %s after an unmount of 1s: the watch held the call", took)
	}
	if ex.called("multipathd show paths") == 0 || ex.called("multipathd disablequeueing") != 0 {
		t.Errorf("want multipathd asked and no queueing stopped without its answer\n%s", ex.log())
	}
}
