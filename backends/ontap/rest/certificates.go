package rest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"time"

	"github.com/ontap-csi/ontap-csi/backends/ontap/internal/lif"
)

// PresentedCertificates returns the certificate chain ONTAP's management
// LIF presents in the TLS handshake, leaf first, and the host:port it
// dialled. It verifies nothing and sends no request and no credentials: it
// is how an operator finds the CA to trust (trustedCACertificate) before
// any backend can connect.
func PresentedCertificates(ctx context.Context, managementLIF string) ([]*x509.Certificate, string, error) {
	hostPort, err := lif.HostPort(managementLIF)
	if err != nil {
		return nil, "", err
	}
	host, _, _ := net.SplitHostPort(hostPort)
	d := tls.Dialer{
		NetDialer: &net.Dialer{Timeout: 10 * time.Second},
		Config: &tls.Config{
			MinVersion: tls.VersionTLS12,
			ServerName: host,
			// Reading the chain is the point: it is not trusted here,
			// only shown.
			InsecureSkipVerify: true, //nolint:gosec // nothing is sent over this connection
		},
	}
	conn, err := d.DialContext(ctx, "tcp", hostPort)
	if err != nil {
		return nil, hostPort, fmt.Errorf("TLS handshake with %s: %w", hostPort, err)
	}
	defer conn.Close()
	tc, ok := conn.(*tls.Conn)
	if !ok {
		return nil, hostPort, errors.New("not a TLS connection")
	}
	certs := tc.ConnectionState().PeerCertificates
	if len(certs) == 0 {
		return nil, hostPort, fmt.Errorf("%s presented no certificate", hostPort)
	}
	return certs, hostPort, nil
}
