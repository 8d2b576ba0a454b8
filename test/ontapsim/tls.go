package ontapsim

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// tlsMaterial is the simulator's private CA. It signs the server
// certificate and, for certificate-authentication tests, client
// certificates. With a data dir it is kept in <data-dir>/tls so clients
// that trust it keep working across restarts.
type tlsMaterial struct {
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	pem  []byte
}

func loadOrCreateCA(dataDir string, persistent bool) (*tlsMaterial, error) {
	dir := filepath.Join(dataDir, "tls")
	certPath, keyPath := filepath.Join(dir, "ca.pem"), filepath.Join(dir, "ca-key.pem")
	if persistent {
		certPEM, err1 := os.ReadFile(certPath)
		keyPEM, err2 := os.ReadFile(keyPath)
		if err1 == nil && err2 == nil {
			return parseCA(certPEM, keyPEM)
		}
		if !errors.Is(err1, os.ErrNotExist) && err1 != nil {
			return nil, err1
		}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          randomSerial(),
		Subject:               pkix.Name{CommonName: "ONTAP simulator CA", Organization: []string{"ontap-csi"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(10 * 365 * 24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, err
	}
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	if persistent {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(keyPath, keyPEM, 0o600); err != nil {
			return nil, err
		}
		if err := writeFileAtomic(certPath, certPEM, 0o644); err != nil {
			return nil, err
		}
	}
	return parseCA(certPEM, keyPEM)
}

func parseCA(certPEM, keyPEM []byte) (*tlsMaterial, error) {
	cb, _ := pem.Decode(certPEM)
	kb, _ := pem.Decode(keyPEM)
	if cb == nil || kb == nil {
		return nil, errors.New("simulator CA: bad PEM")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, err
	}
	key, err := x509.ParseECPrivateKey(kb.Bytes)
	if err != nil {
		return nil, err
	}
	return &tlsMaterial{cert: cert, key: key, pem: certPEM}, nil
}

func randomSerial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		panic(fmt.Sprintf("crypto/rand: %v", err))
	}
	return n
}

// issue signs a leaf certificate with the CA.
func (t *tlsMaterial) issue(cn string, hosts []string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: randomSerial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if h != "" {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, t.cert, &key.PublicKey, t.key)
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER}), nil
}

func (s *Simulator) serverTLSConfig(hosts []string) (*tls.Config, error) {
	all := append([]string{"localhost", "127.0.0.1", "::1"}, hosts...)
	if h, err := os.Hostname(); err == nil {
		all = append(all, h)
	}
	certPEM, keyPEM, err := s.tls.issue("ontap-sim", all, x509.ExtKeyUsageServerAuth)
	if err != nil {
		return nil, err
	}
	pair, err := tls.X509KeyPair(append(certPEM, s.tls.pem...), keyPEM)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(s.tls.cert)
	if len(s.cfg.ClientCAPEM) > 0 && !pool.AppendCertsFromPEM(s.cfg.ClientCAPEM) {
		return nil, errors.New("client CA PEM: no certificates")
	}
	return &tls.Config{
		Certificates: []tls.Certificate{pair},
		ClientAuth:   tls.VerifyClientCertIfGiven,
		ClientCAs:    pool,
		MinVersion:   tls.VersionTLS12,
	}, nil
}

// CACertificatePEM is the PEM of the CA that signs the server certificate:
// what a backend config's trustedCACertificate must hold.
func (s *Simulator) CACertificatePEM() []byte { return append([]byte(nil), s.tls.pem...) }

// IssueClientCertificate returns a client certificate (and key) for user,
// signed by the simulator CA, for certificate authentication: the CN is the
// ONTAP user name, and only the configured Username is accepted.
func (s *Simulator) IssueClientCertificate(user string) (certPEM, keyPEM []byte, err error) {
	return s.tls.issue(user, nil, x509.ExtKeyUsageClientAuth)
}
