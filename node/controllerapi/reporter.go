// Package controllerapi reports the node to the controller the way
// Trident's node plugin does: PUT /trident/v1/node/<name> with Trident's
// node JSON (nodeinfo.TridentNode), over mutual TLS with the client
// certificate of the trident-csi Secret (/certs), to
// https://$TRIDENT_CSI_SERVICE_HOST:$TRIDENT_CSI_SERVICE_PORT.
// Our controller (package controller/tridentrest) and Trident's both
// accept it.
package controllerapi

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	neturl "net/url"
	"os"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"
	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/node"
	"github.com/ontap-csi/ontap-csi/nodeinfo"
)

// Trident's defaults when the trident-csi Service's variables are absent.
const (
	DefaultServiceHost = "trident-csi"
	DefaultServicePort = "34571"
	// ServerName is the name in the controller's certificate (Trident's
	// config.ServerCertName); the Service's address is an IP.
	ServerName = "trident-csi"
	// DefaultTimeout bounds one request (Trident's HTTPClientTimeout).
	DefaultTimeout = 30 * time.Second
)

var reportsTotal = promauto.NewCounterVec(prometheus.CounterOpts{
	Namespace: "ontap_csi",
	Subsystem: "node",
	Name:      "controller_reports_total",
	Help:      "Node registrations with the controller (PUT /trident/v1/node) by result.",
}, []string{"result"})

// URLFromEnv returns the controller's URL from the trident-csi Service's
// environment variables, as Trident's node plugin builds it.
func URLFromEnv(getenv func(string) string) string {
	host, port := getenv("TRIDENT_CSI_SERVICE_HOST"), getenv("TRIDENT_CSI_SERVICE_PORT")
	if host == "" {
		host = DefaultServiceHost
	}
	if port == "" {
		port = DefaultServicePort
	}
	return "https://" + net.JoinHostPort(host, port)
}

// Config configures a Reporter.
type Config struct {
	// URL is the controller's base URL (URLFromEnv).
	URL string
	// CACert verifies the controller; ClientCert and ClientKey identify
	// this node. PEM files (Trident's --https_ca_cert, --https_client_cert,
	// --https_client_key). They are read for every attempt, so a Secret
	// mounted or rotated late is picked up by the next retry.
	CACert, ClientCert, ClientKey string
	// Topology is what this node's NodeGetInfo reports (--node-topology,
	// or the Node's topology labels read at start).
	// The controller's answer carries the node's topology labels; they are
	// compared with it and never applied (see ReportNode).
	Topology map[string]string
	// Timeout bounds one request (DefaultTimeout).
	Timeout time.Duration
}

// Reporter implements node.Reporter against a Trident-style controller.
type Reporter struct {
	cfg Config

	mu     sync.Mutex
	warned map[string]bool // topology mismatches already logged
}

var _ node.Reporter = (*Reporter)(nil)

// New returns a Reporter. It does no I/O.
func New(cfg Config) *Reporter {
	if cfg.Timeout <= 0 {
		cfg.Timeout = DefaultTimeout
	}
	return &Reporter{cfg: cfg, warned: map[string]bool{}}
}

// ReportNode registers the node with the controller once. The node service
// calls it in the background and retries with backoff until it succeeds.
//
// The answer's topology labels are what Trident's NodeGetInfo would report.
// Ours answers from local state only, identical in every generation (I6;
// K5: kubelet rewrites CSINode and the node's labels when a registration
// brings other topology, and fails the registration on a label clash), so
// a controller that answers differently is logged, never followed.
func (r *Reporter) ReportNode(ctx context.Context, info backends.Node) error {
	err := r.report(ctx, info)
	if err != nil {
		reportsTotal.WithLabelValues("error").Inc()
		return err
	}
	reportsTotal.WithLabelValues("ok").Inc()
	return nil
}

func (r *Reporter) report(ctx context.Context, info backends.Node) error {
	client, err := r.client()
	if err != nil {
		return err
	}
	body, err := json.MarshalIndent(nodeinfo.TridentNode{Name: info.Name, IQN: info.IQN, IPs: info.IPs, PublicationState: "clean"}, "", " ")
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, r.cfg.Timeout)
	defer cancel()
	url := r.cfg.URL + "/trident/v1/node/" + neturl.PathEscape(info.Name)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, url, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("controller at %s: %w", r.cfg.URL, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return fmt.Errorf("controller at %s: reading the answer: %w", r.cfg.URL, err)
	}
	var answer nodeinfo.AddNodeResponse
	jsonErr := json.Unmarshal(data, &answer)
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusOK {
		msg := answer.Error
		if jsonErr != nil || msg == "" {
			msg = string(bytes.TrimSpace(data))
		}
		return fmt.Errorf("controller at %s answered %s: %s", r.cfg.URL, resp.Status, msg)
	}
	if jsonErr != nil {
		return fmt.Errorf("controller at %s: answer is not JSON: %w", r.cfg.URL, jsonErr)
	}
	r.compareTopology(answer.TopologyLabels)
	return nil
}

func (r *Reporter) compareTopology(labels map[string]string) {
	if maps.Equal(labels, r.cfg.Topology) {
		return
	}
	key := fmt.Sprint(labels)
	r.mu.Lock()
	seen := r.warned[key]
	r.warned[key] = true
	r.mu.Unlock()
	if !seen {
		logrus.WithFields(logrus.Fields{"controllerTopology": labels, "nodeGetInfoTopology": r.cfg.Topology}).
			Warn("the controller reports topology labels for this node that NodeGetInfo does not: NodeGetInfo keeps " +
				"what it took at start (--node-topology, or the Node's labels as read then), so that every plugin " +
				"generation registers the same node info with kubelet")
	}
}

// client builds an HTTP client from the certificate files, as Trident's
// node plugin does: with a CA, the server must prove the name trident-csi;
// without one, it is not verified.
func (r *Reporter) client() (*http.Client, error) {
	conf := &tls.Config{MinVersion: tls.VersionTLS12}
	if r.cfg.CACert != "" {
		ca, err := os.ReadFile(r.cfg.CACert)
		if err != nil {
			return nil, fmt.Errorf("controller CA certificate: %w", err)
		}
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, fmt.Errorf("controller CA certificate %s holds no PEM certificate", r.cfg.CACert)
		}
		conf.RootCAs, conf.ServerName = pool, ServerName
	} else {
		conf.InsecureSkipVerify = true //nolint:gosec // Trident's behaviour without --https_ca_cert
	}
	if r.cfg.ClientCert != "" && r.cfg.ClientKey != "" {
		pair, err := tls.LoadX509KeyPair(r.cfg.ClientCert, r.cfg.ClientKey)
		if err != nil {
			return nil, fmt.Errorf("node client certificate: %w", err)
		}
		conf.Certificates = []tls.Certificate{pair}
	}
	return &http.Client{Transport: &http.Transport{
		TLSClientConfig:   conf,
		DisableKeepAlives: true, // one request until success; nothing to keep
		// Proxy stays nil: the Service is in-cluster, never behind a proxy.
	}}, nil
}
