package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/sirupsen/logrus"
)

// HealthServer serves /healthz, /readyz and /metrics.
type HealthServer struct {
	srv *http.Server
	l   net.Listener
}

// ServeHealth starts the HTTP endpoints on addr ("host:port"; port 0 picks a
// free one). /healthz answers 200 while the process serves; /readyz answers
// 200 only while ready() holds.
func ServeHealth(addr string, ready func() bool) (*HealthServer, error) {
	l, err := net.Listen("tcp", addr)
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
