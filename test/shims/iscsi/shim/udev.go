package shim

import (
	"errors"
	"os"
	"path/filepath"
	"time"
)

// What follows a new SCSI device on a real host comes later, not with the
// device (a real kernel showed it: the device is there when the scan
// returns, its /dev node and by-path link when udev gets to it, its
// multipath map when multipathd does), and the node plugin must wait for
// each: the kernel daemon runs these steps when they are due.
//
//	udev        /dev/<loop> and the by-path link, UdevDelay after the scan
//	multipathd  the path joins its map, MapDelay after udev; never when
//	            multipathd ignores the LUN (ISCSI_SHIM_MAP_DELAY=never)

// Pending is a step due at Due for the device Loop of session SID.
type Pending struct {
	Kind string    `json:"kind"` // "udev" or "multipathd"
	SID  int       `json:"sid"`
	LUN  int       `json:"lun"`
	Loop string    `json:"loop"`
	Due  time.Time `json:"due"`
}

const (
	pendingUdev      = "udev"
	pendingMultipath = "multipathd"
)

// schedule adds a step for device d of session s, delay from now.
func (st *State) schedule(kind string, s *Session, d *Device, delay time.Duration) {
	st.Pending = append(st.Pending, &Pending{Kind: kind, SID: s.SID, LUN: d.LUN, Loop: d.Loop, Due: time.Now().Add(delay)})
}

// unschedule drops the steps of a device that goes.
func (st *State) unschedule(s *Session, d *Device) {
	kept := st.Pending[:0]
	for _, p := range st.Pending {
		if p.SID != s.SID || p.LUN != d.LUN || p.Loop != d.Loop {
			kept = append(kept, p)
		}
	}
	st.Pending = kept
}

// runDue runs the steps that are due; a step whose device went is dropped.
func (e *Env) runDue(st *State, now time.Time) error {
	var due []*Pending
	kept := st.Pending[:0]
	for _, p := range st.Pending {
		if p.Due.After(now) {
			kept = append(kept, p)
		} else {
			due = append(due, p)
		}
	}
	st.Pending = kept
	var errs []error
	for _, p := range due {
		s := st.session(p.SID)
		if s == nil {
			continue
		}
		d := s.device(p.LUN)
		if d == nil || d.Loop != p.Loop {
			continue
		}
		switch p.Kind {
		case pendingUdev:
			errs = append(errs, e.udevAdd(st, s, d))
		case pendingMultipath:
			errs = append(errs, e.addToMap(st, d))
		}
	}
	return errors.Join(errs...)
}

// udevAdd is udev's part of a new path: its device node and by-path link;
// then multipathd's turn comes.
func (e *Env) udevAdd(st *State, s *Session, d *Device) error {
	if err := os.Symlink("/dev/"+d.Loop, filepath.Join(e.DevDir, d.Loop)); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	if err := relLink(filepath.Join(e.DevDir, d.Loop), e.byPath(s, d.LUN)); err != nil {
		return err
	}
	if e.Multipathd && e.MapDelay >= 0 {
		st.schedule(pendingMultipath, s, d, e.MapDelay)
	}
	return nil
}

// nextDue is when the earliest step is due; zero when none is pending.
func (st *State) nextDue() time.Time {
	var next time.Time
	for _, p := range st.Pending {
		if next.IsZero() || p.Due.Before(next) {
			next = p.Due
		}
	}
	return next
}
