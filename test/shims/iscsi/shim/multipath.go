package shim

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

// Multipath is emulated without device-mapper (the test kernel has none):
// a map is a loop device stacked on its first path's loop device. I/O
// through it reaches the LUN's file for real, its size follows "multipathd
// resize map", and it is claimed (EBUSY) while mounted, like a dm map. What
// it cannot do is fail over: it keeps using its first path even after that
// path was deleted (the kernel keeps that loop alive while the map holds it).

// addToMap is multipathd reacting to a new path: the map of the path's WWID
// is created or gains the path.
func (e *Env) addToMap(st *State, d *Device) error {
	m := st.mapBySerial(d.Serial)
	if m == nil {
		loop, err := st.attachLoop("/dev/" + d.Loop)
		if err != nil {
			return err
		}
		m = &Map{WWID: ontapWWID(d.Serial), Serial: d.Serial, Loop: loop, Backing: d.Loop}
		st.Maps = append(st.Maps, m)
		sectors, err := loopSectors(loop)
		if err != nil {
			return err
		}
		dir := e.mapDir(m)
		if err := writeFiles(filepath.Join(dir, "dm"), map[string]string{
			"uuid": "mpath-" + m.WWID + "\n", "name": m.WWID + "\n", "suspended": "0\n",
		}); err != nil {
			return err
		}
		if err := writeFiles(dir, map[string]string{"size": sectors + "\n", "dev": loopDevNumbers(loop) + "\n"}); err != nil {
			return err
		}
		for _, sub := range []string{"holders", "slaves"} {
			if err := os.MkdirAll(filepath.Join(dir, sub), 0o755); err != nil {
				return err
			}
		}
		if err := os.Symlink("/dev/"+loop, filepath.Join(e.DevDir, loop)); err != nil && !errors.Is(err, os.ErrExist) {
			return err
		}
		if err := relLink(filepath.Join(e.DevDir, loop), filepath.Join(e.DevDir, "mapper", m.WWID)); err != nil {
			return err
		}
		if err := relLink(dir, filepath.Join(e.SysRoot, "block", loop)); err != nil {
			return err
		}
	}
	m.Slaves = append(m.Slaves, d.Loop)
	if err := relLink(filepath.Join(e.SysRoot, "block", d.Loop), filepath.Join(e.mapDir(m), "slaves", d.Loop)); err != nil {
		return err
	}
	return relLink(e.mapDir(m), filepath.Join(e.SysRoot, "block", d.Loop, "holders", m.Loop))
}

// dropFromMap is a path leaving its map (the map stays, possibly empty).
func (e *Env) dropFromMap(m *Map, loop string) {
	for i, s := range m.Slaves {
		if s == loop {
			m.Slaves = append(m.Slaves[:i], m.Slaves[i+1:]...)
			break
		}
	}
	os.Remove(filepath.Join(e.mapDir(m), "slaves", loop))
	os.Remove(filepath.Join(e.SysRoot, "block", loop, "holders", m.Loop))
}

// errMapInUse is multipath's refusal to flush an open map.
var errMapInUse = errors.New("map in use")

// flushMap removes a map; unless force, only when nothing holds it.
func (e *Env) flushMap(st *State, m *Map, force bool) error {
	if !force && deviceBusy(m.Loop) {
		return errMapInUse
	}
	if err := loopDetach(m.Loop, "/dev/"+m.Backing); err != nil {
		return err
	}
	for _, s := range append([]string(nil), m.Slaves...) {
		e.dropFromMap(m, s)
	}
	for _, p := range []string{
		filepath.Join(e.DevDir, "mapper", m.WWID), filepath.Join(e.DevDir, m.Loop), filepath.Join(e.SysRoot, "block", m.Loop),
	} {
		if err := os.Remove(p); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	if err := os.RemoveAll(e.mapDir(m)); err != nil {
		return err
	}
	for i, x := range st.Maps {
		if x == m {
			st.Maps = append(st.Maps[:i], st.Maps[i+1:]...)
			break
		}
	}
	return nil
}

func (e *Env) resizeMap(m *Map) error {
	if err := loopCapacity(m.Loop); err != nil {
		return err
	}
	sectors, err := loopSectors(m.Loop)
	if err != nil {
		return err
	}
	return replaceAttr(filepath.Join(e.mapDir(m), "size"), sectors+"\n")
}

// multipathMain emulates `multipath -f <map>`, the only form the node uses.
func (e *Env) multipathMain(args []string, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[0] != "-f" {
		fmt.Fprintf(stderr, "multipath (ontap-csi test shim): unsupported arguments %q\n", args)
		return 1
	}
	err := e.update(func(st *State) error {
		m := st.mapByName(args[1])
		if m == nil {
			return fmt.Errorf("%s: map not present", args[1])
		}
		return e.flushMap(st, m, false)
	})
	if errors.Is(err, errMapInUse) {
		fmt.Fprintf(stderr, "%s: map in use\n", args[1])
		return 1
	}
	if err != nil {
		fmt.Fprintln(stderr, err)
		return 1
	}
	return 0
}

// multipathdMain emulates `multipathd show daemon`, `multipathd show paths
// raw format <format>` and `multipathd resize map <map>`.
func (e *Env) multipathdMain(args []string, stdout, stderr io.Writer) int {
	running := e.Multipathd && kernelPID(e.State) > 0
	switch {
	case len(args) == 2 && args[0] == "show" && args[1] == "daemon":
		if !running {
			fmt.Fprintln(stderr, "error -111 receiving packet")
			return 1
		}
		fmt.Fprintf(stdout, "pid %d idle\n", kernelPID(e.State))
		return 0
	case len(args) == 5 && args[0] == "show" && args[1] == "paths" && args[2] == "raw" && args[3] == "format":
		if !running {
			fmt.Fprintln(stderr, "error -111 receiving packet")
			return 1
		}
		st, err := loadState(e.State)
		if err != nil {
			fmt.Fprintln(stderr, err)
			return 1
		}
		showPaths(st, args[4], stdout)
		return 0
	case len(args) == 3 && args[0] == "resize" && args[1] == "map":
		if !running {
			fmt.Fprintln(stderr, "error -111 receiving packet")
			return 1
		}
		err := e.update(func(st *State) error {
			m := st.mapByName(args[2])
			if m == nil {
				return fmt.Errorf("%s: no such map", args[2])
			}
			return e.resizeMap(m)
		})
		if err != nil {
			fmt.Fprintln(stderr, err)
			fmt.Fprintln(stdout, "fail")
			return 1
		}
		fmt.Fprintln(stdout, "ok")
		return 0
	}
	fmt.Fprintf(stderr, "multipathd (ontap-csi test shim): unsupported command %q\n", args)
	return 1
}

// showPaths prints a line per path in format, with %d (device), %m (its
// map, "[orphan]" for none), %t (its state in the map: "active", or
// "undef" outside one: the emulated maps never fail a path) and %T (the
// path checker's, "ready").
func showPaths(st *State, format string, out io.Writer) {
	for _, s := range st.Sessions {
		for _, d := range s.Devices {
			m, dm := "[orphan]", "undef"
			if mp := st.mapBySerial(d.Serial); mp != nil && slices.Contains(mp.Slaves, d.Loop) {
				m, dm = mp.WWID, "active"
			}
			fmt.Fprintln(out, strings.NewReplacer("%d", d.Loop, "%m", m, "%t", dm, "%T", "ready").Replace(format))
		}
	}
}

// kernelPID returns the pid of the running kernel daemon, or 0.
func kernelPID(stateDir string) int {
	b, err := os.ReadFile(filepath.Join(stateDir, "kernel.pid"))
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(string(b))
	if err != nil || pid <= 0 {
		return 0
	}
	if err := syscallKill0(pid); err != nil {
		return 0
	}
	return pid
}
