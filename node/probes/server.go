// Package probes serves the node plugin's HTTPS probe endpoints of
// Trident's node DaemonSet (21.04+): /liveness and /readiness on
// --https_port, which its startupProbe, livenessProbe and readinessProbe
// call with scheme HTTPS.
//
// /liveness answers 200 whenever the process serves. /readiness answers 200
// while the node plugin is registered with kubelet (or stands by behind a
// live holder): kubelet's view decides whether volumes can be mounted here,
// so it is what a rollout should wait for. Trident instead waited for its
// registration with the controller; ours never gates the node (Trident
// #1061), and a node whose controller is away is still ready.
package probes

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ontap-csi/ontap-csi/server"
)

// Config configures the probe server.
type Config struct {
	// Address is host:port (Trident: --https_address, --https_port).
	Address string
	// CertFile and KeyFile are the server certificate (Trident's
	// --https_server_cert and --https_server_key, /certs/serverCert and
	// /certs/serverKey). Without them a self-signed certificate is made:
	// kubelet's HTTPS probes do not verify certificates.
	CertFile, KeyFile string
	// Ready answers /readiness.
	Ready func() bool
	// Shared binds the port with SO_REUSEPORT (see server.ListenTCP).
	Shared bool
}

// Listen binds cfg.Address and serves the probes in the background.
func Listen(cfg Config) (*server.HTTPServer, error) {
	cert, err := certificate(cfg.CertFile, cfg.KeyFile)
	if err != nil {
		return nil, err
	}
	l, err := server.ListenTCP(cfg.Address, cfg.Shared)
	if err != nil {
		return nil, fmt.Errorf("probe %w", err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /liveness", func(w http.ResponseWriter, _ *http.Request) {
		_, _ = io.WriteString(w, "ok")
	})
	mux.HandleFunc("GET /readiness", func(w http.ResponseWriter, _ *http.Request) {
		if cfg.Ready != nil && !cfg.Ready() {
			http.Error(w, "not registered with kubelet", http.StatusServiceUnavailable)
			return
		}
		_, _ = io.WriteString(w, "ok")
	})
	srv := &http.Server{
		Handler:           mux,
		ReadHeaderTimeout: 5 * time.Second,
		// Probes that drop the connection mid-handshake are not news.
		ErrorLog: log.New(logrus.StandardLogger().WriterLevel(logrus.DebugLevel), "probes: ", 0),
	}
	tl := tls.NewListener(l, &tls.Config{MinVersion: tls.VersionTLS12, Certificates: []tls.Certificate{*cert}})
	return server.ServeHTTP(srv, tl, "probe server"), nil
}

// certificate loads the server certificate, or makes a self-signed one
// when it cannot: a probe must not fail, or keep the node plugin from
// starting, for want of a certificate that kubelet does not check.
func certificate(certFile, keyFile string) (*tls.Certificate, error) {
	if certFile != "" && keyFile != "" {
		pair, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err == nil {
			return &pair, nil
		}
		logrus.WithError(err).Warn("probe server: no usable certificate in --https_server_cert/--https_server_key; " +
			"serving a self-signed one (kubelet's HTTPS probes do not verify it)")
	}
	return selfSigned()
}

func selfSigned() (*tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: "ontap-csi-node-probes"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	return &tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
