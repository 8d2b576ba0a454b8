package shim

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/sys/unix"
)

// State is everything the emulated initiator and kernel know: iscsid's node
// records and sessions, the SCSI devices the "kernel" created and the
// multipath maps "multipathd" built. It lives in $ISCSI_SHIM_STATE/state.json
// and is changed only under an exclusive flock of $ISCSI_SHIM_STATE/lock, by
// iscsiadm, multipath(d) and the kernel daemon alike. History, which only
// grows, lives in history.jsonl beside it, appended to line by line under
// the same lock: rewriting it with every change made each update cost more
// than the last (issue 18).
type State struct {
	NextSID  int           `json:"nextSID"`
	NextHost int           `json:"nextHost"`
	Nodes    []*NodeRecord `json:"nodes"`
	Sessions []*Session    `json:"sessions"`
	Maps     []*Map        `json:"maps"`
	// History records every loop device the shim ever attached, so the
	// harness can prove none is left bound after teardown. Not part of
	// state.json: history.jsonl.
	History []LoopRecord `json:"history,omitempty"`
	// Pending are udev's and multipathd's steps still to come (udev.go).
	Pending []*Pending `json:"pending,omitempty"`

	// dir is where the state was read from: attachLoop appends there.
	dir string
}

// LoopRecord is one loop device attach: the loop and what it was bound to.
type LoopRecord struct {
	Loop    string `json:"loop"`
	Backing string `json:"backing"`
}

// NodeRecord is an iscsiadm node record (/etc/iscsi/nodes/<iqn>/<portal>).
type NodeRecord struct {
	Target   string            `json:"target"`
	Portal   string            `json:"portal"` // "ip:port"
	Iface    string            `json:"iface"`
	Settings map[string]string `json:"settings"`
}

// Session is a logged-in session; each has its own SCSI host, as with
// iscsi_tcp.
type Session struct {
	SID       int       `json:"sid"`
	Host      int       `json:"host"`
	Target    string    `json:"target"`
	Portal    string    `json:"portal"`
	Iface     string    `json:"iface"`
	Initiator string    `json:"initiator"`
	Devices   []*Device `json:"devices"`
}

// Device is a SCSI device H:0:0:LUN of a session, backed by a real loop
// device over the LUN's file.
type Device struct {
	LUN    int    `json:"lun"`
	Loop   string `json:"loop"` // "loop7"
	File   string `json:"file"`
	Serial string `json:"serial"`
}

// Map is a multipath map, emulated by a loop device stacked on the first
// path's loop device.
type Map struct {
	WWID    string   `json:"wwid"`
	Serial  string   `json:"serial"`
	Loop    string   `json:"loop"`    // the map's device
	Backing string   `json:"backing"` // the path loop it is stacked on
	Slaves  []string `json:"slaves"`  // path loops under it
}

func (st *State) session(sid int) *Session {
	for _, s := range st.Sessions {
		if s.SID == sid {
			return s
		}
	}
	return nil
}

func (st *State) sessionByHost(host int) *Session {
	for _, s := range st.Sessions {
		if s.Host == host {
			return s
		}
	}
	return nil
}

func (st *State) mapBySerial(serial string) *Map {
	for _, m := range st.Maps {
		if m.Serial == serial {
			return m
		}
	}
	return nil
}

func (st *State) mapByName(name string) *Map {
	name = strings.TrimPrefix(name, "/dev/mapper/")
	name = strings.TrimPrefix(name, "/dev/")
	for _, m := range st.Maps {
		if m.WWID == name || m.Loop == name {
			return m
		}
	}
	return nil
}

func (s *Session) device(lun int) *Device {
	for _, d := range s.Devices {
		if d.LUN == lun {
			return d
		}
	}
	return nil
}

// Loops lists every loop device the state holds (paths and maps).
func (st *State) Loops() []string {
	var out []string
	for _, s := range st.Sessions {
		for _, d := range s.Devices {
			out = append(out, d.Loop)
		}
	}
	for _, m := range st.Maps {
		out = append(out, m.Loop)
	}
	return out
}

// attachLoop attaches a loop device over file and records it in the
// history file at once, before anything else can fail.
func (st *State) attachLoop(file string) (string, error) {
	loop, err := loopAttach(file)
	if err != nil {
		return "", err
	}
	rec := LoopRecord{Loop: loop, Backing: file}
	st.History = append(st.History, rec)
	return loop, appendHistory(st.dir, rec)
}

// appendHistory appends one record to history.jsonl (under the state's
// exclusive lock: one writer at a time). A line is one write(2) to a file
// opened O_APPEND, so a reader sees whole lines only, but for a line cut
// short by a crash mid-write, which readHistory skips.
func appendHistory(dir string, rec LoopRecord) error {
	line, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, historyFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(line, '\n'))
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

const historyFile = "history.jsonl"

// readHistory reads history.jsonl; none is an empty history.
func readHistory(dir string) ([]LoopRecord, error) {
	data, err := os.ReadFile(filepath.Join(dir, historyFile))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []LoopRecord
	for _, line := range bytes.Split(data, []byte("\n")) {
		var rec LoopRecord
		if len(line) > 0 && json.Unmarshal(line, &rec) == nil {
			out = append(out, rec)
		}
	}
	return out, nil
}

// StillBound lists the loop devices of History that are still bound to
// what the shim bound them to.
func (st *State) StillBound() []string {
	var out []string
	for _, r := range st.History {
		b, err := os.ReadFile(filepath.Join("/sys/block", r.Loop, "loop", "backing_file"))
		if err == nil && strings.TrimSpace(string(b)) == r.Backing {
			out = append(out, r.Loop+" ("+r.Backing+")")
		}
	}
	return out
}

// LoadState reads the state and its history under a shared lock (for
// tests and "state").
func LoadState(dir string) (*State, error) {
	unlock, err := lockState(dir, unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	st, err := readState(dir)
	if err != nil {
		return nil, err
	}
	if st.History, err = readHistory(dir); err != nil {
		return nil, err
	}
	return st, nil
}

// loadState reads state.json, without the history, under a shared lock.
func loadState(dir string) (*State, error) {
	unlock, err := lockState(dir, unix.LOCK_SH)
	if err != nil {
		return nil, err
	}
	defer unlock()
	return readState(dir)
}

// readState reads state.json, without the history: what the commands and
// the kernel work on.
func readState(dir string) (*State, error) {
	st := &State{NextSID: 1, NextHost: 1, dir: dir}
	data, err := os.ReadFile(filepath.Join(dir, "state.json"))
	if errors.Is(err, os.ErrNotExist) {
		return st, nil
	}
	if err != nil {
		return nil, err
	}
	if err := json.Unmarshal(data, st); err != nil {
		return nil, fmt.Errorf("state.json: %w", err)
	}
	return st, nil
}

// writeState replaces state.json (compact: it is rewritten on every
// change; "iscsi-shim state" prints it indented).
func writeState(dir string, st *State) error {
	hist := st.History
	st.History = nil
	data, err := json.Marshal(st)
	st.History = hist
	if err != nil {
		return err
	}
	tmp := filepath.Join(dir, ".state.json.tmp")
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, filepath.Join(dir, "state.json"))
}

func lockState(dir string, how int) (func(), error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	f, err := os.OpenFile(filepath.Join(dir, "lock"), os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), how); err != nil {
		f.Close()
		return nil, fmt.Errorf("lock %s: %w", f.Name(), err)
	}
	return func() { f.Close() }, nil
}

// update runs fn on the state under the exclusive lock and saves what fn
// left, also when fn fails halfway: every loop device attached must stay
// recorded so teardown can find it.
func (e *Env) update(fn func(st *State) error) error {
	unlock, err := lockState(e.State, unix.LOCK_EX)
	if err != nil {
		return err
	}
	defer unlock()
	st, err := readState(e.State)
	if err != nil {
		return err
	}
	ferr := fn(st)
	if err := writeState(e.State, st); err != nil {
		return err
	}
	return ferr
}
