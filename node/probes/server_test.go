package probes

import (
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net/http"
	"os"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/server"
	"github.com/ontap-csi/ontap-csi/test/tridentcerts"
)

// kubelet probes HTTPS without verifying the certificate.
var kubelet = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, //nolint:gosec // as kubelet's prober
}}

func probe(t *testing.T, s *server.HTTPServer, path string) (int, string, *tls.ConnectionState) {
	t.Helper()
	resp, err := kubelet.Get("https://" + s.Addr().String() + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body), resp.TLS
}

func TestProbes(t *testing.T) {
	certs, err := tridentcerts.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	var ready atomic.Bool
	var logs bytes.Buffer
	logrus.SetOutput(&logs)
	t.Cleanup(func() { logrus.SetOutput(os.Stderr) })

	for _, tc := range []struct {
		name     string
		cert     string
		key      string
		wantCN   string
		wantWarn bool
	}{
		{"certificates from /certs", certs.Path(tridentcerts.ServerCert), certs.Path(tridentcerts.ServerKey), "trident-csi", false},
		{"no certificates", "/nonexistent/serverCert", "/nonexistent/serverKey", "ontap-csi-node-probes", true},
		{"certificate without its key", certs.Path(tridentcerts.ServerCert), certs.Path(tridentcerts.ClientKey), "ontap-csi-node-probes", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			logs.Reset()
			ready.Store(false)
			s, err := Listen(Config{Address: "127.0.0.1:0", CertFile: tc.cert, KeyFile: tc.key, Ready: ready.Load})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Shutdown(context.Background())

			code, body, conn := probe(t, s, "/liveness")
			if code != http.StatusOK || body != "ok" {
				t.Errorf("/liveness = %d %q", code, body)
			}
			if cn := conn.PeerCertificates[0].Subject.CommonName; cn != tc.wantCN {
				t.Errorf("served certificate CN = %q, want %q", cn, tc.wantCN)
			}
			if warned := strings.Contains(logs.String(), "self-signed"); warned != tc.wantWarn {
				t.Errorf("self-signed warning logged = %v, want %v:\n%s", warned, tc.wantWarn, logs.String())
			}
			if code, _, _ := probe(t, s, "/readiness"); code != http.StatusServiceUnavailable {
				t.Errorf("/readiness before registration = %d, want 503", code)
			}
			ready.Store(true)
			if code, body, _ := probe(t, s, "/readiness"); code != http.StatusOK || body != "ok" {
				t.Errorf("/readiness when registered = %d %q", code, body)
			}
			ready.Store(false)
			if code, _, _ := probe(t, s, "/readiness"); code != http.StatusServiceUnavailable {
				t.Errorf("/readiness after losing the registration = %d, want 503", code)
			}
			if code, _, _ := probe(t, s, "/liveness"); code != http.StatusOK {
				t.Errorf("/liveness while not ready = %d, want 200", code)
			}
			if code, _, _ := probe(t, s, "/other"); code != http.StatusNotFound {
				t.Errorf("/other = %d, want 404", code)
			}
		})
	}
}

// Two generations of the node plugin on the host network share the port.
func TestSharedPort(t *testing.T) {
	var oldReady, newReady atomic.Bool
	oldReady.Store(true)
	s1, err := Listen(Config{Address: "127.0.0.1:0", Ready: oldReady.Load, Shared: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s1.Shutdown(context.Background())
	s2, err := Listen(Config{Address: s1.Addr().String(), Ready: newReady.Load, Shared: true})
	if err != nil {
		t.Fatalf("the second generation could not bind the shared probe port: %v", err)
	}
	newReady.Store(true)
	s1.Shutdown(context.Background())
	defer s2.Shutdown(context.Background())
	if code, _, _ := probe(t, s2, "/readiness"); code != http.StatusOK {
		t.Fatalf("/readiness after the old generation stopped = %d", code)
	}
}

// A generation that stops right after it started must not keep the port:
// its listener would take a share of the next generation's probes.
func TestShutdownReleasesPort(t *testing.T) {
	for i := range 50 {
		s, err := Listen(Config{Address: "127.0.0.1:0", Shared: true})
		if err != nil {
			t.Fatal(err)
		}
		addr := s.Addr().String()
		if err := s.Shutdown(context.Background()); err != nil {
			t.Fatalf("round %d: Shutdown: %v", i, err)
		}
		// Not shared: the bind fails while any listener holds the port.
		s2, err := Listen(Config{Address: addr})
		if err != nil {
			t.Fatalf("round %d: port still held after Shutdown: %v", i, err)
		}
		if err := s2.Shutdown(context.Background()); err != nil {
			t.Fatalf("round %d: Shutdown: %v", i, err)
		}
	}
}

func TestListenBusyPort(t *testing.T) {
	s, err := Listen(Config{Address: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Shutdown(context.Background())
	if s2, err := Listen(Config{Address: s.Addr().String()}); err == nil {
		s2.Shutdown(context.Background())
		t.Fatal("a second server bound the same port")
	} else if !strings.Contains(err.Error(), s.Addr().String()) {
		t.Errorf("error does not name the address: %v", err)
	}
}
