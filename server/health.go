package server

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
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
	return serveHealth(l, ready, "health/metrics server"), nil
}

// ServePodHealth serves the same endpoints on the pod's own health socket
// (PodHealthSocket). Node pods share the host's network, so during a surge
// rollout a TCP port reaches either pod's process; a readiness probe over
// it could find the old pod ready on the new pod's behalf. The socket is
// the pod's alone, and `ontap-csi probe` (an exec probe) asks through it.
func ServePodHealth(podUID string, ready func() bool) (*HTTPServer, error) {
	l, err := net.Listen("unix", PodHealthSocket(podUID))
	if err != nil {
		return nil, fmt.Errorf("pod health socket: %w", err)
	}
	return serveHealth(l, ready, "pod health server"), nil
}

// PodHealthSocket names a pod's health socket: abstract (no file, so a
// read-only root file system is fine), and so scoped to the network
// namespace, which a pod's containers and its exec probes share.
func PodHealthSocket(podUID string) string { return "@ontap-csi/health/" + podUID }

// ProbePodHealth asks the process of pod podUID for path (/healthz or
// /readyz) over its health socket and returns nil on 200.
func ProbePodHealth(ctx context.Context, podUID, path string) error {
	c := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", PodHealthSocket(podUID))
		},
	}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://pod"+path, nil)
	if err != nil {
		return err
	}
	resp, err := c.Do(req)
	if err != nil {
		return fmt.Errorf("no ontap-csi process of pod %s answers: %w", podUID, err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %d %s", path, resp.StatusCode, strings.TrimSpace(string(body)))
	}
	return nil
}

// serveHealth serves /healthz, /readyz and /metrics on l.
func serveHealth(l net.Listener, ready func() bool, what string) *HTTPServer {
	return ServeHTTP(&http.Server{Handler: healthMux(ready), ReadHeaderTimeout: 5 * time.Second}, l, what)
}

func healthMux(ready func() bool) *http.ServeMux {
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
	return mux
}
