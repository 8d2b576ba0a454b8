package shim

import (
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"
)

// The kernel daemon stands in for what writes to sysfs attributes do in the
// kernel. It watches (inotify) every host's scan file and every device's
// rescan and delete files, and acts when one is written:
//
//	scan   "C T L" (or "- - -") probes that LUN (all LUNs) of the session:
//	       the simulator is asked which LUNs the initiator sees through the
//	       session's portal *now*, and each one found gets a loop device.
//	rescan "1" re-reads the capacity (losetup -c).
//	delete "1" removes the device (losetup -d).
//
// Unlike the kernel, it acts after the write returned, so the node plugin
// must poll for results, which it has to do for udev anyway.

type kernel struct {
	env     *Env
	w       *fsnotify.Watcher
	watched map[string]bool
	log     *log.Logger
	due     *time.Timer    // fires when the next pending step is due
	work    sync.WaitGroup // scans, rescans and deletes under way
}

// RunKernel runs the daemon until stop is closed or receives. It writes
// $ISCSI_SHIM_STATE/kernel.pid once it watches everything.
func (e *Env) RunKernel(stop <-chan os.Signal) error {
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return err
	}
	defer w.Close()
	if err := os.MkdirAll(e.State, 0o700); err != nil {
		return err
	}
	if err := w.Add(e.State); err != nil {
		return err
	}
	k := &kernel{env: e, w: w, watched: map[string]bool{}, log: log.New(os.Stderr, "kernel: ", log.Lmicroseconds), due: time.NewTimer(time.Hour)}
	defer k.due.Stop()
	// What is under way finishes before the daemon goes: teardown follows.
	defer k.work.Wait()
	if err := k.resync(); err != nil {
		return err
	}
	pidFile := filepath.Join(e.State, "kernel.pid")
	if err := os.WriteFile(pidFile+".tmp", []byte(strconv.Itoa(os.Getpid())), 0o600); err != nil {
		return err
	}
	if err := os.Rename(pidFile+".tmp", pidFile); err != nil {
		return err
	}
	defer os.Remove(pidFile)
	k.log.Printf("running, pid %d", os.Getpid())

	// Events can be missed (a watch added just after a write): a periodic
	// resync also looks at every pending attribute.
	tick := time.NewTicker(500 * time.Millisecond)
	defer tick.Stop()
	// A change of state.json is followed by a resync soon, not at once:
	// under concurrent scans the state changes hundreds of times a
	// second, and a resync per change kept the loop from reading the
	// attributes written meanwhile (issue 18).
	changed := time.NewTimer(time.Hour)
	changed.Stop()
	pending := false
	for {
		select {
		case <-stop:
			k.log.Print("stopping")
			return nil
		case ev := <-w.Events:
			switch filepath.Base(ev.Name) {
			case "state.json":
				if !pending {
					pending = true
					changed.Reset(2 * time.Millisecond)
				}
			case "scan", "rescan", "delete":
				if ev.Has(fsnotify.Write) {
					k.handle(ev.Name)
				}
			}
		case err := <-w.Errors:
			k.log.Printf("inotify: %v", err)
		case <-k.due.C:
			if err := e.update(func(st *State) error { return e.runDue(st, time.Now()) }); err != nil {
				k.log.Printf("udev, multipathd: %v", err)
			}
			if err := k.resync(); err != nil {
				return err
			}
		case <-changed.C:
			pending = false
			if err := k.resync(); err != nil {
				return err
			}
		case <-tick.C:
			if err := k.resync(); err != nil {
				return err
			}
		}
	}
}

// resync watches the attribute directories of every session and device in
// the state and handles writes that happened before their watch existed.
func (k *kernel) resync() error {
	if _, err := os.Stat(k.env.State); err != nil {
		// The test removed its roots: nothing left to emulate.
		return fmt.Errorf("state dir: %w", err)
	}
	st, err := loadState(k.env.State)
	if err != nil {
		return err
	}
	if next := st.nextDue(); !next.IsZero() {
		k.due.Reset(max(time.Until(next), time.Millisecond))
	}
	want := map[string]bool{}
	for _, s := range st.Sessions {
		want[k.env.scsiHostDir(s.Host)] = true
		for _, d := range s.Devices {
			want[k.env.deviceDir(s, d.LUN)] = true
		}
	}
	for dir := range k.watched {
		if !want[dir] {
			k.w.Remove(dir) // gone with its directory, usually
			delete(k.watched, dir)
		}
	}
	for dir := range want {
		if k.watched[dir] {
			continue
		}
		if err := k.w.Add(dir); err != nil {
			continue // not created yet, or removed meanwhile
		}
		k.watched[dir] = true
	}
	for dir := range k.watched {
		for _, attr := range []string{"scan", "rescan", "delete"} {
			p := filepath.Join(dir, attr)
			if fi, err := os.Stat(p); err == nil && fi.Size() > 0 {
				k.handle(p)
			}
		}
	}
	return nil
}

// handle consumes what was written to a scan, rescan or delete attribute
// and acts on it in a goroutine of its own: the kernel runs scans of
// different hosts and devices at once, and one scan at a time capped what
// a node could attach (issue 18). The attribute is consumed here, in the
// event loop, so that the next write to it is seen.
func (k *kernel) handle(path string) {
	// Our own truncation of the attribute is an event too: skip empty
	// attributes.
	if fi, err := os.Stat(path); err != nil || fi.Size() == 0 {
		return
	}
	data, err := os.ReadFile(path)
	cmd := strings.TrimSpace(string(data))
	if err != nil || cmd == "" {
		return // consumed already, or the device went away
	}
	// Truncate, not WriteFile: a device gone meanwhile must not get its
	// attribute back.
	if err := os.Truncate(path, 0); err != nil {
		k.log.Printf("%s: %v", path, err)
		return
	}
	k.work.Add(1)
	go func() {
		defer k.work.Done()
		if err := k.act(path, cmd); err != nil {
			k.log.Printf("%s: %v", path, err)
		}
	}()
}

// act does what cmd, written to the attribute at path, asks.
func (k *kernel) act(path, cmd string) error {
	dir := filepath.Dir(path)
	if filepath.Base(path) == "scan" {
		host, err := strconv.Atoi(strings.TrimPrefix(filepath.Base(dir), "host"))
		if err != nil {
			return err
		}
		return k.scan(host, cmd)
	}
	var h, c, t, l int
	if _, err := fmt.Sscanf(filepath.Base(dir), "%d:%d:%d:%d", &h, &c, &t, &l); err != nil {
		return err
	}
	e := k.env
	return e.update(func(st *State) error {
		s := st.sessionByHost(h)
		if s == nil || s.device(l) == nil || cmd != "1" {
			return nil
		}
		d := s.device(l)
		if filepath.Base(path) == "rescan" {
			k.log.Printf("rescan %s (%s)", filepath.Base(dir), d.Loop)
			return e.rescanDevice(s, d)
		}
		k.log.Printf("delete %s (%s)", filepath.Base(dir), d.Loop)
		return e.removeDevice(st, s, d)
	})
}

// scan handles "C T L" lines written to a host's scan attribute; "-" is a
// wildcard, as in the kernel. The target is asked without the state's
// lock (the answer takes a round trip), and only what it found is added
// under it: the session may have gone, or a concurrent scan may have added
// the LUN meanwhile.
func (k *kernel) scan(host int, cmd string) error {
	st, err := loadState(k.env.State)
	if err != nil {
		return err
	}
	s := st.sessionByHost(host)
	if s == nil {
		return nil
	}
	sim, err := k.env.sim()
	if err != nil {
		return err
	}
	resp, err := sim.luns(s.Initiator, s.Portal, s.Target)
	if err != nil {
		k.log.Printf("scan host%d: no answer from the target: %v", s.Host, err)
		return nil // a scan that reaches nothing finds nothing
	}
	var found []simLUN
	for _, line := range strings.Split(cmd, "\n") {
		f := strings.Fields(line)
		if len(f) != 3 || !matches(f[0], 0) || !matches(f[1], 0) {
			continue
		}
		for _, l := range resp.LUNs {
			if matches(f[2], l.LUN) {
				found = append(found, l)
			}
		}
	}
	if len(found) == 0 {
		return nil
	}
	return k.env.update(func(st *State) error {
		s := st.session(s.SID)
		if s == nil || s.Host != host {
			return nil // logged out meanwhile
		}
		for _, l := range found {
			if s.device(l.LUN) != nil {
				continue
			}
			if err := k.env.addDevice(st, s, l); err != nil {
				return err
			}
			k.log.Printf("scan host%d %q: LUN %d (%s) is %s", s.Host, cmd, l.LUN, l.Serial, s.device(l.LUN).Loop)
		}
		return nil
	})
}

func matches(field string, v int) bool {
	if field == "-" {
		return true
	}
	n, err := strconv.Atoi(field)
	return err == nil && n == v
}

// Teardown removes every map, session and device of the shim (forcibly:
// this is the end of a test) and forgets all node records.
func (e *Env) Teardown() error {
	return e.update(func(st *State) error {
		var errs []error
		for _, m := range append([]*Map(nil), st.Maps...) {
			if err := e.flushMap(st, m, true); err != nil {
				errs = append(errs, err)
			}
		}
		for _, s := range append([]*Session(nil), st.Sessions...) {
			if err := e.logoutSession(st, s, io.Discard); err != nil {
				errs = append(errs, err)
			}
		}
		st.Nodes, st.Pending = nil, nil
		return errors.Join(errs...)
	})
}

func syscallKill0(pid int) error { return unix.Kill(pid, 0) }
