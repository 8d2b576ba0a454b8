package registration

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// flock applies how to f, retrying on EINTR.
func flock(f *os.File, how int) error {
	for {
		err := unix.Flock(int(f.Fd()), how)
		if !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// lockFile opens (creating) path and takes an exclusive flock on it,
// waiting for it. The lock lives as long as the returned file is open.
func lockFile(path string) (*os.File, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := flock(f, unix.LOCK_EX); err != nil {
		f.Close()
		return nil, fmt.Errorf("flock %s: %w", path, err)
	}
	return f, nil
}

// isLocked reports whether some process holds an exclusive flock on path,
// i.e. whether the generation that owns this g<G>.alive is alive. A missing
// file is not held. The check takes a shared lock for an instant, which
// never disturbs the owner's exclusive one.
func isLocked(path string) (bool, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	defer f.Close()
	err = flock(f, unix.LOCK_SH|unix.LOCK_NB)
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("flock %s: %w", path, err)
	}
	return false, nil // closing f drops the check's lock
}

func sameFile(f *os.File, path string) bool {
	a, err := f.Stat()
	if err != nil {
		return false
	}
	b, err := os.Stat(path)
	return err == nil && os.SameFile(a, b)
}
