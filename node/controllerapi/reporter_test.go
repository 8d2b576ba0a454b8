package controllerapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/test/tridentcerts"
)

// controller stands in for Trident's controller: mutual TLS with the
// trident-csi certificates, client CN trident-node, Trident's answers.
type controller struct {
	srv    *httptest.Server
	certs  tridentcerts.Dir
	mu     sync.Mutex
	bodies []map[string]any
	raw    [][]byte
	paths  []string
	status int
	labels map[string]string
}

func newController(t *testing.T) *controller {
	t.Helper()
	certs, err := tridentcerts.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	c := &controller{certs: certs, status: http.StatusCreated, labels: map[string]string{"topology.kubernetes.io/zone": "z1"}}
	c.srv = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "trident-node" {
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		var body map[string]any
		data, _ := io.ReadAll(r.Body)
		if err := json.Unmarshal(data, &body); err != nil {
			w.WriteHeader(http.StatusBadRequest)
			return
		}
		c.mu.Lock()
		c.bodies, c.raw, c.paths = append(c.bodies, body), append(c.raw, data), append(c.paths, r.Method+" "+r.URL.Path)
		status, labels := c.status, c.labels
		c.mu.Unlock()
		w.WriteHeader(status)
		if status >= 300 {
			_ = json.NewEncoder(w).Encode(map[string]string{"error": "orchestrator is not ready"})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"name": body["name"], "topologyLabels": labels})
	}))
	pair, err := tls.LoadX509KeyPair(certs.Path(tridentcerts.ServerCert), certs.Path(tridentcerts.ServerKey))
	if err != nil {
		t.Fatal(err)
	}
	ca, _ := os.ReadFile(certs.Path(tridentcerts.CACert))
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	c.srv.TLS = &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequireAndVerifyClientCert, ClientCAs: pool}
	c.srv.StartTLS()
	t.Cleanup(c.srv.Close)
	return c
}

func (c *controller) config() Config {
	return Config{
		URL:        c.srv.URL,
		CACert:     c.certs.Path(tridentcerts.CACert),
		ClientCert: c.certs.Path(tridentcerts.ClientCert),
		ClientKey:  c.certs.Path(tridentcerts.ClientKey),
	}
}

var worker1 = backends.Node{Name: "worker-1", IQN: "iqn.1993-08.org.debian:01:w1", IPs: []string{"10.0.0.1", "fd00::1"}}

func TestReportNode(t *testing.T) {
	c := newController(t)
	var logs bytes.Buffer
	logrus.SetOutput(&logs)
	t.Cleanup(func() { logrus.SetOutput(os.Stderr) })

	cfg := c.config()
	cfg.Topology = map[string]string{"topology.kubernetes.io/zone": "z1"}
	if err := New(cfg).ReportNode(context.Background(), worker1); err != nil {
		t.Fatal(err)
	}
	if len(c.paths) != 1 || c.paths[0] != "PUT /trident/v1/node/worker-1" {
		t.Fatalf("requests = %v", c.paths)
	}
	// Trident's node JSON: what its controller decodes into models.Node.
	b := c.bodies[0]
	if b["name"] != "worker-1" || b["iqn"] != worker1.IQN || b["deleted"] != false || b["publicationState"] != "clean" {
		t.Errorf("body = %v", b)
	}
	if ips, _ := b["ips"].([]any); len(ips) != 2 || ips[0] != "10.0.0.1" {
		t.Errorf("ips = %v", b["ips"])
	}
	// Byte for byte what ontap-csi's node plugin has always sent.
	const want = "{\n \"name\": \"worker-1\",\n \"iqn\": \"iqn.1993-08.org.debian:01:w1\",\n \"ips\": [\n  \"10.0.0.1\",\n  \"fd00::1\"\n ],\n \"deleted\": false,\n \"publicationState\": \"clean\"\n}"
	if got := string(c.raw[0]); got != want {
		t.Errorf("body bytes changed:\n%s\nwant\n%s", got, want)
	}
	if strings.Contains(logs.String(), "topology") {
		t.Errorf("matching topology was reported as a mismatch:\n%s", logs.String())
	}

	// Other labels from the controller: logged once, NodeGetInfo unchanged.
	c.mu.Lock()
	c.labels = map[string]string{"topology.kubernetes.io/zone": "z2"}
	c.mu.Unlock()
	r := New(cfg)
	for range 3 {
		if err := r.ReportNode(context.Background(), worker1); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "NodeGetInfo does not"); n != 1 {
		t.Errorf("topology mismatch logged %d times, want once:\n%s", n, logs.String())
	}
	if cfg.Topology["topology.kubernetes.io/zone"] != "z1" {
		t.Error("the reporter changed the node's topology")
	}
}

func TestReportNodeFailures(t *testing.T) {
	c := newController(t)
	other, err := tridentcerts.Write(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		edit func(*Config)
		want string
	}{
		{"no client certificate file", func(cfg *Config) { cfg.ClientCert = "/nonexistent/clientCert" }, "node client certificate"},
		{"no CA file", func(cfg *Config) { cfg.CACert = "/nonexistent/caCert" }, "controller CA certificate"},
		{"controller signed by another CA", func(cfg *Config) { cfg.CACert = other.Path(tridentcerts.CACert) }, "certificate"},
		{"client certificate of another CA", func(cfg *Config) {
			cfg.ClientCert, cfg.ClientKey = other.Path(tridentcerts.ClientCert), other.Path(tridentcerts.ClientKey)
		}, "controller at"},
		{"nobody listening", func(cfg *Config) { cfg.URL = "https://127.0.0.1:1" }, "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := c.config()
			tc.edit(&cfg)
			err := New(cfg).ReportNode(context.Background(), worker1)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err = %v, want %q", err, tc.want)
			}
		})
	}
	c.mu.Lock()
	c.status = http.StatusServiceUnavailable
	c.mu.Unlock()
	err = New(c.config()).ReportNode(context.Background(), worker1)
	if err == nil || !strings.Contains(err.Error(), "503") || !strings.Contains(err.Error(), "orchestrator is not ready") {
		t.Fatalf("err = %v, want the controller's status and message", err)
	}
}

func TestURLFromEnv(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want string
	}{
		{nil, "https://trident-csi:34571"},
		{map[string]string{"TRIDENT_CSI_SERVICE_HOST": "10.96.0.12", "TRIDENT_CSI_SERVICE_PORT": "34571"}, "https://10.96.0.12:34571"},
		{map[string]string{"TRIDENT_CSI_SERVICE_HOST": "fd00::12"}, "https://[fd00::12]:34571"},
	} {
		if got := URLFromEnv(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("URLFromEnv(%v) = %q, want %q", tc.env, got, tc.want)
		}
	}
}
