// Package filelock takes flock(2) locks on files, exclusive or shared,
// waiting or not. The kernel drops a lock when the file holding it is
// closed, also when its process dies (SIGKILL included), so a lock never
// outlives its holder: it is how processes of one node that do not talk to
// each other exclude one another (two plugin generations during a
// handover, I8; `ontap-csi status`). Within a process, goroutines should
// queue on an internal/keymutex first: every open file is a holder of its
// own, and polling holders are served in no order.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Mode is the kind of lock.
type Mode int

const (
	// Exclusive excludes every other lock on the file.
	Exclusive Mode = iota
	// Shared excludes only exclusive locks.
	Shared
)

func (m Mode) how() int {
	if m == Shared {
		return unix.LOCK_SH
	}
	return unix.LOCK_EX
}

// ErrLocked is TryAcquire's answer when another holder's lock conflicts.
var ErrLocked = errors.New("file is locked by another holder")

// pollInterval paces Acquire's attempts while its context can end. Holders
// keep these locks for the length of one call or one state transition, so
// a few ms more on a contended lock do not matter.
const pollInterval = 5 * time.Millisecond

// Lock is a held lock on the file at Path.
type Lock struct {
	f    *os.File
	path string
	once sync.Once
	err  error
}

// Acquire waits until it holds a lock of mode on the file at path, creating
// the file with perm (before umask) if it is missing, or until ctx ends: then
// it returns ctx.Err(). With a context that can never end
// (context.Background()) it waits in the kernel, which serves waiters in
// order; otherwise it polls. A file unlinked (or replaced) at path between
// the open and the lock is no lock at all, as whoever locks path next opens
// the new file: Acquire then starts over with the file now at path.
func Acquire(ctx context.Context, path string, mode Mode, perm os.FileMode) (*Lock, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDONLY|os.O_CREATE, perm)
		if err != nil {
			return nil, err
		}
		if err := wait(ctx, f, mode.how()); err != nil {
			f.Close()
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		if l := (&Lock{f: f, path: path}); l.Linked() {
			return l, nil
		}
		f.Close()
	}
}

// wait applies how to f, blocking in the kernel when ctx cannot end and
// polling with LOCK_NB otherwise.
func wait(ctx context.Context, f *os.File, how int) error {
	if ctx.Done() == nil {
		return flock(f, how)
	}
	for {
		err := flock(f, how|unix.LOCK_NB)
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return err
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

// TryAcquire takes a lock of mode on the existing file at path if no other
// holder's lock conflicts, and returns ErrLocked (wrapped) if one does. It
// never creates the file: a missing one is an error satisfying
// errors.Is(err, fs.ErrNotExist). Like Acquire, it never returns a lock on
// a file that is no longer at path.
func TryAcquire(path string, mode Mode) (*Lock, error) {
	for {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		if err := flock(f, mode.how()|unix.LOCK_NB); err != nil {
			f.Close()
			if errors.Is(err, unix.EWOULDBLOCK) {
				return nil, fmt.Errorf("%s: %w", path, ErrLocked)
			}
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		if l := (&Lock{f: f, path: path}); l.Linked() {
			return l, nil
		}
		f.Close()
	}
}

// Locked reports whether some holder has an exclusive lock on the file at
// path; a missing file is not locked. It probes with a shared lock for an
// instant, which never disturbs an exclusive holder (nor another prober).
func Locked(path string) (bool, error) {
	l, err := TryAcquire(path, Shared)
	switch {
	case errors.Is(err, ErrLocked):
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	}
	return false, l.Release()
}

// flock applies how to f, retrying when a signal interrupts it.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// Path is the path the lock was taken on.
func (l *Lock) Path() string { return l.path }

// Linked reports whether the locked file is still the one at Path: false
// once it was unlinked or replaced there, by Remove or by anyone else.
func (l *Lock) Linked() bool {
	a, err := l.f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(l.path)
	return err == nil && os.SameFile(a, b)
}

// Remove unlinks the locked file from Path, while the lock is still held so
// that nobody is between opening and locking it; everyone who locks Path
// through this package then locks a new file. A file no longer at Path is
// left alone. Only an exclusive holder should remove.
func (l *Lock) Remove() error {
	if !l.Linked() {
		return nil
	}
	if err := os.Remove(l.path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// Release drops the lock by closing its file. Later calls return the first
// call's result and do nothing.
func (l *Lock) Release() error {
	l.once.Do(func() { l.err = l.f.Close() })
	return l.err
}
