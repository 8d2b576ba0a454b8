package iscsi

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestDetachDecisions(t *testing.T) {
	logout := "iscsiadm -m node -T " + testIQN + " -p 10.0.0.1:3260 -u"
	deleteRec := "iscsiadm -m node -T " + testIQN + " -p 10.0.0.1:3260 -o delete"
	for _, tc := range []struct {
		name       string
		setup      func(f *fakeSys)
		records    string
		wantGone   bool // no device at LUN 3 afterwards
		wantLogout bool
		wantRecDel int
	}{
		{
			name:     "last LUN of the target",
			setup:    func(f *fakeSys) { f.device(1, 3, "sdb", testSerial, 1<<30) },
			records:  "10.0.0.1:3260,-1 " + testIQN + "\n",
			wantGone: true, wantLogout: true, wantRecDel: 1,
		},
		{
			name: "another LUN of the target still attached",
			setup: func(f *fakeSys) {
				f.device(1, 3, "sdb", testSerial, 1<<30)
				f.device(1, 4, "sdc", otherSer, 1<<30)
			},
			records:  "10.0.0.1:3260,-1 " + testIQN + "\n",
			wantGone: true,
		},
		{
			name:    "device at the address is another LUN's",
			setup:   func(f *fakeSys) { f.device(1, 3, "sdb", otherSer, 1<<30) },
			records: "10.0.0.1:3260,-1 " + testIQN + "\n",
		},
		{
			name:     "not attached, idle session and records left by a failed stage",
			setup:    func(f *fakeSys) {},
			records:  "10.0.0.1:3260,-1 " + testIQN + "\n10.0.0.9:3260,-1 " + testIQN + "\n10.0.0.1:3260,-1 iqn.2000-01.com.example:other\n",
			wantGone: true, wantLogout: true, wantRecDel: 1,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			tc.setup(f)
			f.kernel(t, []int{1}, testSerial)
			ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
				switch strings.Join(argv, " ") {
				case "iscsiadm -m session":
					return sessionLines(1), nil
				case "iscsiadm -m node":
					return []byte(tc.records), nil
				}
				return nil, nil
			}}
			c := newTestClient(t, f, ex, MultipathAuto)
			if err := c.Detach(context.Background(), testTarget()); err != nil {
				t.Fatalf("%v\n%s", err, ex.log())
			}
			_, err := os.Stat(f.deviceDir(1, 3))
			if gone := errors.Is(err, os.ErrNotExist); gone != tc.wantGone {
				t.Fatalf("device at LUN 3 gone: %v, want %v", gone, tc.wantGone)
			}
			if got := ex.called(logout) == 1; got != tc.wantLogout {
				t.Fatalf("logout: %v, want %v\n%s", got, tc.wantLogout, ex.log())
			}
			if got := ex.called(deleteRec); got != tc.wantRecDel {
				t.Fatalf("%d record deletes of the portal, want %d\n%s", got, tc.wantRecDel, ex.log())
			}
			if ex.called("iscsiadm -m node -T iqn.2000-01.com.example:other") != 0 {
				t.Fatal("touched another target's record")
			}
			// The records are listed only once the target is idle here
			// (issue 18: not on every detach).
			if got := strings.Count(ex.log()+"\n", "iscsiadm -m node\n"); (got > 0) != tc.wantLogout {
				t.Fatalf("records listed: %v, want %v\n%s", got > 0, tc.wantLogout, ex.log())
			}
			// A path under no map is flushed before it is deleted.
			if tc.wantGone && strings.Contains(tc.name, "LUN") && ex.called("blockdev --flushbufs "+filepath.Join(f.dev, "sdb")) != 1 {
				t.Fatalf("the path's buffers were not flushed\n%s", ex.log())
			}
			if strings.Contains(tc.name, "failed stage") && ex.called("iscsiadm -m node -T "+testIQN+" -p 10.0.0.9:3260 -o delete") != 1 {
				t.Fatalf("the orphan record without a session was not deleted\n%s", ex.log())
			}
		})
	}
}

func TestDetachFlushesMapsIncludingGhosts(t *testing.T) {
	f := newFakeSys(t)
	f.session(1)
	f.device(1, 3, "sdb", testSerial, 1<<30)
	uuid := "mpath-3600a0980" + hexSerial(testSerial)
	f.mpathMap("dm-1", uuid, 1<<30, "sdb")
	// A map of the same LUN with no path left (Trident #812) and one of
	// another LUN, which must stay.
	f.mpathMap("dm-9", uuid, 1<<30)
	f.mpathMap("dm-5", "mpath-3600a0980"+hexSerial(otherSer), 1<<30)
	f.kernel(t, []int{1}, testSerial)
	ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
		switch {
		case strings.Join(argv, " ") == "iscsiadm -m session":
			return sessionLines(1), nil
		case argv[0] == "multipath" && argv[1] == "-f":
			f.flushMapNamed(argv[2], []string{"dm-1", "dm-9"}, "sdb")
		case argv[0] == "iscsiadm" && argv[len(argv)-1] == "-u":
			os.RemoveAll(f.sessionDir(1))
		}
		return nil, nil
	}}
	c := newTestClient(t, f, ex, MultipathAuto)
	if err := c.Detach(context.Background(), testTarget()); err != nil {
		t.Fatalf("%v\n%s", err, ex.log())
	}
	if n := ex.called("multipath -f 3600a0980" + hexSerial(testSerial)); n != 2 {
		t.Fatalf("%d flushes of the LUN's maps, want 2\n%s", n, ex.log())
	}
	if ex.called("multipath -f 3600a0980"+hexSerial(otherSer)) != 0 {
		t.Fatal("flushed another LUN's map")
	}
	// No device of a map runs blockdev --flushbufs (issue 18): the map
	// was written out at its last close and multipath -f turns its
	// queueing off, and its path was written through the map only.
	for _, dev := range []string{"dm-1", "dm-9", "sdb"} {
		if n := ex.called("blockdev --flushbufs " + filepath.Join(f.dev, dev)); n != 0 {
			t.Errorf("%d blockdev --flushbufs of %s, want none:\n%s", n, dev, ex.log())
		}
	}
}

func TestResizeRescansPathsThenMap(t *testing.T) {
	f := newFakeSys(t)
	f.session(1)
	f.session(2)
	f.device(1, 3, "sdb", testSerial, 1<<30)
	f.device(2, 3, "sdc", testSerial, 1<<30)
	f.mpathMap("dm-1", "mpath-3600a0980"+hexSerial(testSerial), 1<<30, "sdb", "sdc")
	const grown = 3 << 30
	ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
		switch {
		case strings.Join(argv, " ") == "iscsiadm -m session":
			return sessionLines(1, 2), nil
		case argv[0] == "multipathd" && argv[1] == "resize":
			f.setSize("dm-1", grown)
			return []byte("ok\n"), nil
		}
		return nil, nil
	}}
	c := newTestClient(t, f, ex, MultipathAuto)
	// Rescans land asynchronously, as with the shims.
	for _, p := range []struct {
		sid  int
		name string
	}{{1, "sdb"}, {2, "sdc"}} {
		whenWritten(t, filepath.Join(f.deviceDir(p.sid, 3), "rescan"), func() { f.setSize(p.name, grown) })
	}
	size, err := c.Resize(context.Background(), testTarget("10.0.0.1", "10.0.0.2"), grown)
	if err != nil {
		t.Fatalf("%v\n%s", err, ex.log())
	}
	if size != grown {
		t.Fatalf("size %d, want %d", size, grown)
	}
	if ex.called("multipathd resize map 3600a0980"+hexSerial(testSerial)) != 1 {
		t.Fatalf("map not resized:\n%s", ex.log())
	}
}

// A resize multipathd refuses (seen on the real kernel right after the
// paths' rescans) is asked again; a map that grew meanwhile by itself is
// done without another; one refused every time fails after refusedAttempts.
func TestResizeRetriesARefusedMapResize(t *testing.T) {
	const grown = 3 << 30
	for _, tc := range []struct {
		name       string
		refuse     int  // resizes refused before one succeeds
		growsAlone bool // multipathd grows the map at the first refusal
		wantCalls  int
		wantErr    bool
	}{
		{"refused twice", 2, false, 3, false},
		{"grew while refusing", refusedAttempts, true, 1, false},
		{"refused always", refusedAttempts, false, refusedAttempts, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			f.device(1, 3, "sdb", testSerial, grown) // already rescanned
			f.mpathMap("dm-1", "mpath-3600a0980"+hexSerial(testSerial), 1<<30, "sdb")
			refused := 0
			ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
				switch {
				case strings.Join(argv, " ") == "iscsiadm -m session":
					return sessionLines(1), nil
				case argv[0] == "multipathd" && argv[1] == "resize":
					if refused < tc.refuse {
						refused++
						if tc.growsAlone {
							f.setSize("dm-1", grown)
						}
						return nil, exitErr("multipathd", 1)
					}
					f.setSize("dm-1", grown)
					return []byte("ok\n"), nil
				}
				return nil, nil
			}}
			c := newTestClient(t, f, ex, MultipathAuto)
			size, err := c.Resize(context.Background(), testTarget("10.0.0.1"), grown)
			if (err != nil) != tc.wantErr {
				t.Fatalf("Resize = %d, %v; want error %v\n%s", size, err, tc.wantErr, ex.log())
			}
			if !tc.wantErr && size != grown {
				t.Fatalf("size %d, want %d", size, grown)
			}
			if n := ex.called("multipathd resize map 3600a0980" + hexSerial(testSerial)); n != tc.wantCalls {
				t.Fatalf("%d resizes, want %d\n%s", n, tc.wantCalls, ex.log())
			}
		})
	}
}

// whenWritten runs fn once path holds "1".
func whenWritten(t *testing.T, path string, fn func()) {
	done := make(chan struct{})
	t.Cleanup(func() { <-done })
	go func() {
		defer close(done)
		for {
			if b, _ := os.ReadFile(path); string(b) == "1" {
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

// Not attached: Resize cannot do its job and fails; Find answers.
func TestResizeAndFindNotAttached(t *testing.T) {
	f := newFakeSys(t)
	ex := &fakeExec{fn: func(argv []string) ([]byte, error) { return nil, exitErr("iscsiadm", errNoObjsFound) }}
	c := newTestClient(t, f, ex, MultipathAuto)
	if _, err := c.Resize(context.Background(), testTarget(), 0); !errors.Is(err, ErrNotAttached) {
		t.Fatalf("Resize: %v, want ErrNotAttached", err)
	}
	if dev, err := c.Find(context.Background(), testTarget()); dev != nil || err != nil {
		t.Fatalf("Find: %+v, %v; want no device and no error", dev, err)
	}
}

// TestDetachFindsMapsOfAnyWWIDForm: besides a map holding a located path,
// Detach flushes the LUN's maps found otherwise, on any WWID form (here
// LIO's, 36001405…): one with a path of the LUN's serial that locate does
// not see (on a session to another target), and one without paths named
// by the WWID of a located path. Another LUN's map stays.
func TestDetachFindsMapsOfAnyWWIDForm(t *testing.T) {
	f := newFakeSys(t)
	f.session(1)
	f.device(1, 3, "sdb", testSerial, 1<<30)
	f.write(filepath.Join(f.deviceDir(1, 3), "wwid"), "naa.60014058abcdef0000000000000000\n")
	f.session(2) // to another target: not the LUN's session
	f.device(2, 7, "sdx", testSerial, 1<<30)
	f.device(2, 8, "sdy", otherSer, 1<<30)
	f.mpathMap("dm-1", "mpath-36001405aaaa0000000000000000000", 1<<30, "sdx")
	f.mpathMap("dm-2", "mpath-360014058abcdef0000000000000000", 1<<30)
	f.mpathMap("dm-3", "mpath-36001405bbbb0000000000000000000", 1<<30, "sdy")
	f.kernel(t, []int{1}, testSerial)
	ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
		switch cmd := strings.Join(argv, " "); {
		case cmd == "iscsiadm -m session":
			return append(sessionLines(1), []byte("tcp: [2] 10.0.0.9:3260,1 iqn.2003-01.org.linux-iscsi.other:t (non-flash)\n")...), nil
		case argv[0] == "multipath" && argv[1] == "-f":
			f.flushMapNamed(argv[2], []string{"dm-1", "dm-2", "dm-3"}, "sdx", "sdy")
		case argv[0] == "iscsiadm" && argv[len(argv)-1] == "-u":
			os.RemoveAll(f.sessionDir(1))
		}
		return nil, nil
	}}
	c := newTestClient(t, f, ex, MultipathAuto)
	if err := c.Detach(context.Background(), testTarget()); err != nil {
		t.Fatalf("%v\n%s", err, ex.log())
	}
	for _, m := range []string{"36001405aaaa0000000000000000000", "360014058abcdef0000000000000000"} {
		if ex.called("multipath -f "+m) != 1 {
			t.Errorf("the LUN's map %s was not flushed\n%s", m, ex.log())
		}
	}
	if ex.called("multipath -f 36001405bbbb0000000000000000000") != 0 {
		t.Error("flushed another LUN's map")
	}
}

// A map refused as in use while nothing holds it (udev probing a map
// multipathd just made, seen on the real kernel) is flushed on a later
// try; one refused every time fails the detach after refusedAttempts.
func TestDetachRetriesAFlushRefusedWithNothingHolding(t *testing.T) {
	for _, tc := range []struct {
		name    string
		refuse  int // flushes refused before one succeeds
		wantErr bool
	}{
		{"refused twice", 2, false},
		{"refused always", refusedAttempts, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			f.device(1, 3, "sdb", testSerial, 1<<30)
			f.mpathMap("dm-1", "mpath-3600a0980"+hexSerial(testSerial), 1<<30, "sdb")
			f.kernel(t, []int{1}, testSerial)
			refused := 0
			ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
				switch {
				case strings.Join(argv, " ") == "iscsiadm -m session":
					return sessionLines(1), nil
				case argv[0] == "multipath" && argv[1] == "-f":
					if refused < tc.refuse {
						refused++
						return nil, exitErr("multipath", 1)
					}
					f.flushMapNamed(argv[2], []string{"dm-1"}, "sdb")
				case argv[0] == "iscsiadm" && argv[len(argv)-1] == "-u":
					os.RemoveAll(f.sessionDir(1))
				}
				return nil, nil
			}}
			c := newTestClient(t, f, ex, MultipathAuto)
			err := c.Detach(context.Background(), testTarget())
			if (err != nil) != tc.wantErr {
				t.Fatalf("Detach = %v, want error %v\n%s", err, tc.wantErr, ex.log())
			}
			want := tc.refuse + 1
			if tc.wantErr {
				want = refusedAttempts
			}
			if n := ex.called("multipath -f 3600a0980" + hexSerial(testSerial)); n != want {
				t.Fatalf("%d flushes, want %d\n%s", n, want, ex.log())
			}
		})
	}
}

// A multipath map that claims the LUN's paths after Detach listed the maps
// (multipathd building it late, after a stage gave up waiting: seen on the
// real kernel) is found on a later look and flushed; a path that stays in
// use (mounted on the path itself) fails the detach after lateMapAttempts.
func TestDetachFlushesAMapThatCameLate(t *testing.T) {
	mapName := "3600a0980" + hexSerial(testSerial)
	for _, tc := range []struct {
		name    string
		mapLate bool // else a holder that is no map of the LUN stays
		wantErr bool
	}{
		{"map came late", true, false},
		{"path stays in use", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFakeSys(t)
			f.session(1)
			f.device(1, 3, "sdb", testSerial, 1<<30)
			f.kernel(t, []int{1}, testSerial)
			// What the first look sees: the path held, by no map it lists.
			f.link(filepath.Join(f.sys, "block", "sdb"), filepath.Join(f.sys, "block", "sdb", "holders", "dm-1"))
			ex := &fakeExec{fn: func(argv []string) ([]byte, error) {
				switch cmd := strings.Join(argv, " "); {
				case cmd == "iscsiadm -m session":
					return sessionLines(1), nil
				case cmd == "multipathd show daemon":
					return []byte("pid 42 idle\n"), nil
				case cmd == "multipathd show paths raw format %m %t":
					return []byte(mapName + " active\n"), nil
				case cmd == "multipath -f "+mapName:
					f.removeMap("dm-1", "sdb")
				case argv[0] == "iscsiadm" && argv[len(argv)-1] == "-u":
					os.RemoveAll(f.sessionDir(1))
				}
				return nil, nil
			}}
			c := newTestClient(t, f, ex, MultipathAuto)
			if tc.mapLate {
				time.AfterFunc(100*time.Millisecond, func() {
					os.Remove(filepath.Join(f.sys, "block", "sdb", "holders", "dm-1"))
					f.mpathMap("dm-1", "mpath-"+mapName, 1<<30, "sdb")
				})
			}
			err := c.Detach(context.Background(), testTarget())
			if (err != nil) != tc.wantErr || tc.wantErr && !errors.Is(err, ErrDeviceInUse) {
				t.Fatalf("Detach = %v, want error %v\n%s", err, tc.wantErr, ex.log())
			}
			if flushed := ex.called("multipath -f "+mapName) == 1; flushed != tc.mapLate {
				t.Fatalf("late map flushed: %v, want %v\n%s", flushed, tc.mapLate, ex.log())
			}
		})
	}
}
