package server

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// maxUnixPath is the usable length of sockaddr_un.sun_path on Linux (108 bytes
// including the terminating NUL).
const maxUnixPath = 107

// ParseEndpoint turns a --csi_endpoint value into an absolute socket path.
//
// Trident's DaemonSet passes "unix://plugin/csi.sock" and means /plugin/csi.sock:
// the text after "unix://" is a path relative to the root, not to the working
// directory. "unix:///abs/path.sock" is the usual absolute form. Both map to
// the same cleaned absolute path.
func ParseEndpoint(endpoint string) (string, error) {
	rest, ok := strings.CutPrefix(endpoint, "unix://")
	if !ok {
		if i := strings.Index(endpoint, "://"); i > 0 {
			return "", fmt.Errorf("endpoint %q: scheme %q is not supported, use unix://", endpoint, endpoint[:i])
		}
		return "", fmt.Errorf("endpoint %q: expected unix://<path>", endpoint)
	}
	if strings.TrimLeft(rest, "/") == "" {
		return "", fmt.Errorf("endpoint %q: empty socket path", endpoint)
	}
	if strings.ContainsRune(rest, 0) {
		return "", fmt.Errorf("endpoint %q: path contains a NUL byte", endpoint)
	}
	path := filepath.Clean("/" + rest)
	if len(path) > maxUnixPath {
		return "", fmt.Errorf("endpoint %q: socket path is %d bytes, the limit is %d", endpoint, len(path), maxUnixPath)
	}
	return path, nil
}

// ErrSocketInUse means a live process already serves the socket path.
var ErrSocketInUse = errors.New("socket is in use by a live process")

// Socket is a unix listener together with the identity of the file it bound,
// so that the process can later tell whether the path is still its own.
type Socket struct {
	*net.UnixListener
	Path     string
	dev, ino uint64
}

// Listen binds a unix socket at path, creating its directory.
//
// A socket left behind by a dead process is removed first; a socket that
// still accepts connections belongs to a live process and is never stolen.
// The listener does not unlink its path on Close (I7): the owner removes it
// explicitly, and only while it is still its own (Socket.Remove).
func Listen(path string) (*Socket, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
		return nil, fmt.Errorf("create socket directory: %w", err)
	}
	if err := removeStaleSocket(path); err != nil {
		return nil, err
	}
	l, err := net.ListenUnix("unix", &net.UnixAddr{Name: path, Net: "unix"})
	if err != nil {
		return nil, fmt.Errorf("listen on %s: %w", path, err)
	}
	l.SetUnlinkOnClose(false)
	var st syscall.Stat_t
	if err := syscall.Lstat(path, &st); err != nil {
		l.Close()
		return nil, fmt.Errorf("stat %s after bind: %w", path, err)
	}
	return &Socket{UnixListener: l, Path: path, dev: st.Dev, ino: st.Ino}, nil
}

func removeStaleSocket(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("inspect %s: %w", path, err)
	}
	if fi.Mode()&os.ModeSocket == 0 {
		return fmt.Errorf("%s exists and is not a socket; refusing to replace it", path)
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return fmt.Errorf("%s: %w", path, ErrSocketInUse)
	}
	if !errors.Is(err, syscall.ECONNREFUSED) && !errors.Is(err, os.ErrNotExist) {
		// A timeout means a live but busy process: leave it alone.
		return fmt.Errorf("%s: cannot tell whether its owner is alive: %w", path, err)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove stale socket %s: %w", path, err)
	}
	return nil
}

// Owned reports whether the path still names the socket file this process bound.
func (s *Socket) Owned() bool {
	var st syscall.Stat_t
	if err := syscall.Lstat(s.Path, &st); err != nil {
		return false
	}
	return st.Dev == s.dev && st.Ino == s.ino
}

// Remove unlinks the socket file only if it is still this process's own, so a
// process never removes a socket that a successor has since bound at the same path.
func (s *Socket) Remove() error {
	if !s.Owned() {
		return nil
	}
	if err := os.Remove(s.Path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}
