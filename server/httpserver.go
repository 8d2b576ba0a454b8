package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"

	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// ListenTCP binds addr ("host:port"; port 0 picks a free one). With shared,
// the port is bound with SO_REUSEPORT: the node DaemonSet runs on the host
// network, so during a surge rollout the old and the new pod bind the same
// ports. Without sharing, the new pod could not start until the old one
// stopped, and the old one stops only once the new one is ready. A request
// may then be answered by either process; both answer for the node.
func ListenTCP(addr string, shared bool) (net.Listener, error) {
	var lc net.ListenConfig
	if shared {
		lc.Control = func(_, _ string, c syscall.RawConn) error {
			var serr error
			if err := c.Control(func(fd uintptr) {
				serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_REUSEPORT, 1)
			}); err != nil {
				return err
			}
			return serr
		}
	}
	l, err := lc.Listen(context.Background(), "tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("address %q: %w", addr, err)
	}
	return l, nil
}

// HTTPServer is an http.Server serving one listener in the background.
type HTTPServer struct {
	srv *http.Server
	l   net.Listener
}

// ServeHTTP serves srv on l until Shutdown; what names it in the log line
// written if it stops on its own.
func ServeHTTP(srv *http.Server, l net.Listener, what string) *HTTPServer {
	go func() {
		if err := srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logrus.WithError(err).WithField("address", l.Addr().String()).Errorf("%s stopped", what)
		}
	}()
	return &HTTPServer{srv: srv, l: l}
}

// Addr is the address actually bound.
func (s *HTTPServer) Addr() net.Addr { return s.l.Addr() }

// Shutdown stops serving, waiting at most until ctx ends for requests in
// flight. The port is released when it returns: http.Server.Shutdown closes
// only the listeners Serve already tracks, and a listener left open in a
// SO_REUSEPORT group would take its share of the next generation's
// connections and reset them.
func (s *HTTPServer) Shutdown(ctx context.Context) error {
	err := s.srv.Shutdown(ctx)
	if cerr := s.l.Close(); cerr != nil && !errors.Is(cerr, net.ErrClosed) && err == nil {
		err = cerr
	}
	return err
}
