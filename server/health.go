package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
	"golang.org/x/sys/unix"
)

// HealthServer serves /healthz, /readyz and /metrics.
type HealthServer struct {
	srv *http.Server
	l   net.Listener
}

// ServeHealth starts the HTTP endpoints on addr ("host:port"; port 0 picks a
// free one). /healthz answers 200 while the process serves; /readyz answers
// 200 only while ready() holds.
//
// With shared, the port is bound with SO_REUSEPORT. The node DaemonSet runs
// on the host network, so during a surge rollout the old and the new pod bind
// the same port; without sharing, the new pod could not start until the old
// one stopped, and the old one stops only once the new one is ready. A probe
// may then be answered by either process; both answer for the node.
func ServeHealth(addr string, ready func() bool, shared bool) (*HealthServer, error) {
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
		return nil, fmt.Errorf("metrics address %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/readyz", func(w http.ResponseWriter, _ *http.Request) {
		if ready != nil && !ready() {
			http.Error(w, "not ready", http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.Handle("/metrics", promhttp.Handler())
	h := &HealthServer{
		srv: &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second},
		l:   l,
	}
	go func() {
		if err := h.srv.Serve(l); err != nil && !errors.Is(err, http.ErrServerClosed) {
			logrus.WithError(err).Error("health/metrics server stopped")
		}
	}()
	return h, nil
}

// Addr is the address actually bound.
func (h *HealthServer) Addr() net.Addr { return h.l.Addr() }

// Shutdown stops the HTTP server, waiting at most until ctx ends.
func (h *HealthServer) Shutdown(ctx context.Context) error { return h.srv.Shutdown(ctx) }
