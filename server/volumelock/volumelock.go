// Package volumelock serializes operations on one volume across goroutines
// and across processes (I8): during a handover two node-plugin generations
// serve kubelet at the same time, so an in-process mutex is not enough.
//
// Each volume has a lock file in a directory shared by all generations (the
// plugin dir on the host). Ownership is an exclusive flock on that file,
// which the kernel releases when the holder dies, SIGKILL included.
package volumelock

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Locker hands out per-volume locks backed by files in Dir.
type Locker struct {
	dir string

	mu    sync.Mutex
	local map[string]chan struct{} // one token per key held by this process
}

// New returns a Locker whose lock files live in dir (created if missing).
func New(dir string) (*Locker, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("volume lock dir: %w", err)
	}
	return &Locker{dir: dir, local: map[string]chan struct{}{}}, nil
}

// pollInterval bounds how long a waiter sleeps between flock attempts. The
// other process holds the lock for the length of one CSI call, so a few ms of
// extra latency on a contended lock is irrelevant next to that.
const pollInterval = 5 * time.Millisecond

// Lock blocks until this caller holds the lock for volumeID or ctx ends. The
// returned function releases it and must be called exactly once.
func (l *Locker) Lock(ctx context.Context, volumeID string) (unlock func(), err error) {
	if volumeID == "" {
		return nil, errors.New("volume lock: empty volume id")
	}
	name := fileName(volumeID)

	// Goroutines of this process queue on a channel first, so only one of
	// them polls the file lock at a time.
	tok := l.token(name)
	select {
	case tok <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("volume lock %s: %w", volumeID, ctx.Err())
	}
	f, err := l.lockFile(ctx, filepath.Join(l.dir, name))
	if err != nil {
		<-tok
		return nil, fmt.Errorf("volume lock %s: %w", volumeID, err)
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// Unlink while still holding the lock so the directory does not
			// fill up with one file per volume ever seen; lockFile detects a
			// lock taken on an unlinked file and retries.
			_ = os.Remove(f.Name())
			_ = f.Close()
			<-tok
		})
	}, nil
}

func (l *Locker) token(name string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	tok, ok := l.local[name]
	if !ok {
		tok = make(chan struct{}, 1)
		l.local[name] = tok
	}
	return tok
}

func (l *Locker) lockFile(ctx context.Context, path string) (*os.File, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return nil, err
		}
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			if sameFile(f, path) {
				return f, nil
			}
			// The previous holder unlinked the file between our open and
			// our flock: this lock guards nothing. Start over.
			f.Close()
			continue
		}
		f.Close()
		if !errors.Is(err, unix.EWOULDBLOCK) {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-time.After(pollInterval):
		}
	}
}

func sameFile(f *os.File, path string) bool {
	var a, b unix.Stat_t
	if unix.Fstat(int(f.Fd()), &a) != nil || unix.Stat(path, &b) != nil {
		return false
	}
	return a.Dev == b.Dev && a.Ino == b.Ino
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// fileName maps an untrusted volume id to a file name that cannot escape the
// lock directory.
func fileName(volumeID string) string {
	if safeName.MatchString(volumeID) {
		return volumeID + ".lock"
	}
	sum := sha256.Sum256([]byte(volumeID))
	return "sha256-" + hex.EncodeToString(sum[:16]) + ".lock"
}
