package server

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// ServeHealth starts /healthz, /readyz and /metrics on addr (see ListenTCP
// for shared). /healthz answers 200 while the process serves; /readyz
// answers 200 only while ready() holds.
func ServeHealth(addr string, ready func() bool, shared bool) (*HTTPServer, error) {
	l, err := ListenTCP(addr, shared)
	if err != nil {
		return nil, fmt.Errorf("metrics %w", err)
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
	return ServeHTTP(&http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}, l, "health/metrics server"), nil
}
