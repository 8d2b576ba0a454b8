// Package tridentcerts writes test certificates laid out like Trident's
// trident-csi Secret, which Trident's installer mounts at /certs: a CA, a
// server certificate for the trident-csi Service and a client certificate
// for the node plugins (CN trident-node), each as a PEM file named after
// its Secret key. Tests only.
package tridentcerts

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"
)

// File names: the keys of the trident-csi Secret.
const (
	CACert     = "caCert"
	CAKey      = "caKey"
	ServerCert = "serverCert"
	ServerKey  = "serverKey"
	ClientCert = "clientCert"
	ClientKey  = "clientKey"
)

// Names in the certificates, as Trident's installer issues them.
const (
	ServerName = "trident-csi"
	ClientName = "trident-node"
)

// Dir is a directory of certificate files.
type Dir string

// Path returns the path of one of the files.
func (d Dir) Path(name string) string { return filepath.Join(string(d), name) }

// Write creates dir and writes a fresh CA, server and client certificate
// into it. The server certificate is valid for trident-csi, localhost and
// 127.0.0.1/::1.
func Write(dir string) (Dir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", err
	}
	caKey, caCert, caDER, err := newCA("trident-ca")
	if err != nil {
		return "", err
	}
	files := map[string][]byte{CACert: pemBlock("CERTIFICATE", caDER)}
	if files[CAKey], err = keyPEM(caKey); err != nil {
		return "", err
	}
	for _, c := range []struct {
		cn        string
		usage     x509.ExtKeyUsage
		cert, key string
	}{
		{ServerName, x509.ExtKeyUsageServerAuth, ServerCert, ServerKey},
		{ClientName, x509.ExtKeyUsageClientAuth, ClientCert, ClientKey},
	} {
		certPEM, kPEM, err := issue(caCert, caKey, c.cn, c.usage)
		if err != nil {
			return "", err
		}
		files[c.cert], files[c.key] = certPEM, kPEM
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			return "", err
		}
	}
	return Dir(dir), nil
}

// Issue signs a certificate for cn with the CA in d, e.g. a client
// certificate with the wrong name, and returns its PEM files' contents.
func (d Dir) Issue(cn string, usage x509.ExtKeyUsage) (certPEM, keyPEM []byte, err error) {
	pair, err := tls.LoadX509KeyPair(d.Path(CACert), d.Path(CAKey))
	if err != nil {
		return nil, nil, err
	}
	caCert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, nil, err
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, nil, fmt.Errorf("CA key is %T", pair.PrivateKey)
	}
	return issue(caCert, key, cn, usage)
}

func newCA(cn string) (*ecdsa.PrivateKey, *x509.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: cn},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, nil, nil, err
	}
	cert, err := x509.ParseCertificate(der)
	return key, cert, der, err
}

func issue(ca *x509.Certificate, caKey *ecdsa.PrivateKey, cn string, usage x509.ExtKeyUsage) ([]byte, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{usage},
	}
	if usage == x509.ExtKeyUsageServerAuth {
		tmpl.DNSNames = []string{cn, "localhost"}
		tmpl.IPAddresses = []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca, &key.PublicKey, caKey)
	if err != nil {
		return nil, nil, err
	}
	kPEM, err := keyPEM(key)
	return pemBlock("CERTIFICATE", der), kPEM, err
}

func keyPEM(key *ecdsa.PrivateKey) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, err
	}
	return pemBlock("PRIVATE KEY", der), nil
}

func pemBlock(typ string, der []byte) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
}

func serial() *big.Int {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		panic(err)
	}
	return n
}
