// Package volumelock serializes operations on one volume across goroutines
// and across processes (I8): during a handover two node-plugin generations
// serve kubelet at the same time, so an in-process mutex is not enough.
// node/iscsi locks its targets through it too, under keys of their own.
//
// Each key has a lock file in a directory shared by all generations (the
// plugin dir on the host). Goroutines of one process queue on a key mutex,
// so that only one of them at a time waits for the file lock, which the
// kernel releases when the holding process dies, SIGKILL included.
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

	"github.com/ontap-csi/ontap-csi/internal/filelock"
	"github.com/ontap-csi/ontap-csi/internal/keymutex"
)

// Locker hands out per-key locks backed by files in its directory.
type Locker struct {
	dir  string
	keys keymutex.Mutex
}

// New returns a Locker whose lock files live in dir (created if missing).
func New(dir string) (*Locker, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("volume lock dir: %w", err)
	}
	return &Locker{dir: dir}, nil
}

// Lock blocks until this caller holds the lock for key (a volume id, or
// another caller's key) or ctx ends. The returned function releases it;
// calling it again does nothing.
func (l *Locker) Lock(ctx context.Context, key string) (unlock func(), err error) {
	f, unlockKey, err := l.acquire(ctx, key, filelock.Exclusive)
	if err != nil {
		return nil, err
	}
	var once sync.Once
	return func() {
		once.Do(func() {
			// Unlinked while still held, so the directory does not fill up
			// with one file per volume ever seen; a waiter that opened it
			// meanwhile locks the next file instead (filelock.Acquire).
			_ = f.Remove()
			_ = f.Release()
			unlockKey()
		})
	}, nil
}

// LockShared blocks until this caller holds key in shared mode, which
// excludes Lock's holders only, or ctx ends; the returned function
// releases it.
//
// Each shared holder has its own open file, so the kernel's flock makes
// shared holders of this process and of others coexist and conflict with
// an exclusive one. The key mutex is held only while the shared lock is
// taken: a goroutine waiting in Lock holds it, so that shared lockers
// arriving later queue behind it instead of starving it. A shared holder
// never unlinks the file (another may still hold it); the next exclusive
// holder does.
func (l *Locker) LockShared(ctx context.Context, key string) (unlock func(), err error) {
	f, unlockKey, err := l.acquire(ctx, key, filelock.Shared)
	if err != nil {
		return nil, err
	}
	unlockKey()
	return func() { _ = f.Release() }, nil
}

// acquire takes the key's in-process mutex, then its file lock in mode; it
// returns with both held, or neither.
func (l *Locker) acquire(ctx context.Context, key string, mode filelock.Mode) (*filelock.Lock, func(), error) {
	if key == "" {
		return nil, nil, errors.New("volume lock: empty volume id")
	}
	name := fileName(key)
	unlockKey, err := l.keys.Lock(ctx, name)
	if err != nil {
		return nil, nil, fmt.Errorf("volume lock %s: %w", key, err)
	}
	f, err := filelock.Acquire(ctx, filepath.Join(l.dir, name), mode, 0o600)
	if err != nil {
		unlockKey()
		return nil, nil, fmt.Errorf("volume lock %s: %w", key, err)
	}
	return f, unlockKey, nil
}

var safeName = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$`)

// fileName maps an untrusted key to a file name that cannot escape the lock
// directory.
func fileName(key string) string {
	if safeName.MatchString(key) {
		return key + ".lock"
	}
	sum := sha256.Sum256([]byte(key))
	return "sha256-" + hex.EncodeToString(sum[:16]) + ".lock"
}
