package registration

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"
)

// fileID identifies a file independently of its name, so that a process can
// tell whether a path still names the socket it bound.
type fileID struct{ dev, ino uint64 }

func statID(path string) (fileID, error) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return fileID{}, &os.PathError{Op: "lstat", Path: path, Err: err}
	}
	return fileID{dev: uint64(st.Dev), ino: st.Ino}, nil
}

// servedSocket is a unix listener plus the identity of the socket file it
// bound. The file may be renamed (temp name → E) without changing identity.
type servedSocket struct {
	path   string // where the file is now, as far as this process moved it
	lis    *net.UnixListener
	id     fileID
	closed atomic.Bool
}

// listenSocket binds path. The listener never unlinks its path on Close
// (I7, K9): an unlink in REG_DIR is a deregistration (K4), and a path we
// bound may since have been taken over by a successor.
func listenSocket(path string) (*servedSocket, error) {
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, err
	}
	lis.SetUnlinkOnClose(false)
	id, err := statID(path)
	if err != nil {
		lis.Close()
		return nil, err
	}
	return &servedSocket{path: path, lis: lis, id: id}, nil
}

// owned reports whether s.path still names the file this process bound;
// never for no socket (nil).
func (s *servedSocket) owned() bool {
	if s == nil {
		return false
	}
	id, err := statID(s.path)
	return err == nil && id == s.id
}

// moveTo renames the socket file onto target, atomically replacing whatever
// was there (I3): connections made from now on reach this listener, while
// calls in flight finish on the previous one.
func (s *servedSocket) moveTo(target string) error {
	// Renaming over a socket is how a successor takes a path over (I2);
	// anything else there was put by someone, and is not ours to destroy.
	if fi, err := os.Lstat(target); err == nil && fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; refusing to replace it", target)
	}
	if err := os.Rename(s.path, target); err != nil {
		return err
	}
	s.path = target
	return nil
}

// close stops accepting connections; the file stays where it is.
func (s *servedSocket) close() {
	if s.closed.CompareAndSwap(false, true) {
		s.lis.Close()
	}
}

// discard closes s and removes its file if it is still ours. Only used for
// temp sockets that never became E or csi.sock.
func (s *servedSocket) discard() {
	s.close()
	if s.owned() {
		os.Remove(s.path)
	}
}

// isListening reports whether something accepts connections on the unix
// socket at path. Connecting has no side effect for kubelet: it never watches
// connections, only file events (K1).
func isListening(path string) bool {
	conn, err := net.DialTimeout("unix", path, 500*time.Millisecond)
	if err != nil {
		return false
	}
	conn.Close()
	return true
}

func isSocket(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.Mode()&os.ModeSocket != 0
}

// changedAgo returns how long ago path's inode last changed (rename
// included), or false if it cannot be read.
func changedAgo(path string, now time.Time) (time.Duration, bool) {
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		return 0, false
	}
	return now.Sub(time.Unix(st.Ctim.Unix())), true
}

// tempPathFor returns a fresh temp socket path next to target.
func tempPathFor(target string) string {
	return filepath.Join(filepath.Dir(target), tempSocketName())
}
