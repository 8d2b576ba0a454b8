package main

import (
	"context"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"strings"
	"time"

	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
)

func init() { subcommands["certificate"] = runCertificate }

// runCertificate prints the certificate chain an ONTAP management LIF
// presents, with SHA-256 fingerprints, and the base64 to paste as the
// backend's trustedCACertificate. ontap-csi verifies ONTAP's certificate
// (Trident did not), so this is the first step of carrying a Trident
// backend over.
func runCertificate(args []string) int {
	fs := flag.NewFlagSet("certificate", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 10*time.Second, "how long the TLS handshake may take")
	only := fs.Bool("base64", false, "print only the base64 to paste as trustedCACertificate")
	// The LIF is the one argument: parse flags around it.
	var lifArg string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		lifArg, args = args[0], args[1:]
	}
	if code, done := parseSubcommand(fs, args); done {
		return code
	}
	if lifArg == "" {
		fmt.Fprintln(os.Stderr, "usage: ontap-csi certificate <managementLIF> [--base64] [--timeout 10s]")
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), *timeout)
	defer cancel()
	chain, hostPort, err := rest.PresentedCertificates(ctx, lifArg)
	if err != nil {
		fmt.Fprintf(os.Stderr, "ontap-csi certificate: %v\n", err)
		return 1
	}
	anchor := trustAnchor(chain)
	if *only {
		fmt.Println(pemBase64(chain[anchor]))
		return 0
	}
	writeChain(os.Stdout, hostPort, chain, anchor)
	return 0
}

// trustAnchor picks the certificate to trust: the topmost one presented
// when it is a CA or self-signed (ONTAP's default certificate is a
// self-signed one), else the leaf itself, the only one we have.
func trustAnchor(chain []*x509.Certificate) int {
	top := chain[len(chain)-1]
	if top.IsCA || selfSigned(top) {
		return len(chain) - 1
	}
	return 0
}

func selfSigned(c *x509.Certificate) bool {
	return c.CheckSignatureFrom(c) == nil
}

// pemBase64 is Trident's trustedCACertificate form: PEM, base64-encoded.
func pemBase64(c *x509.Certificate) string {
	return base64.StdEncoding.EncodeToString(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: c.Raw}))
}

// fingerprint is the SHA-256 of the DER, as `openssl x509 -fingerprint
// -sha256` prints it.
func fingerprint(c *x509.Certificate) string {
	sum := sha256.Sum256(c.Raw)
	hexes := make([]string, len(sum))
	for i, b := range sum {
		hexes[i] = fmt.Sprintf("%02X", b)
	}
	return strings.Join(hexes, ":")
}

func writeChain(w io.Writer, hostPort string, chain []*x509.Certificate, anchor int) {
	fmt.Fprintf(w, "%s presents %d certificate(s), leaf first:\n", hostPort, len(chain))
	for i, c := range chain {
		fmt.Fprintf(w, "\n[%d] subject:  %s\n", i, c.Subject)
		fmt.Fprintf(w, "    issuer:   %s\n", c.Issuer)
		fmt.Fprintf(w, "    valid:    %s to %s\n", c.NotBefore.UTC().Format(time.RFC3339), c.NotAfter.UTC().Format(time.RFC3339))
		fmt.Fprintf(w, "    names:    %s\n", orDash(strings.Join(certNames(c), ", ")))
		fmt.Fprintf(w, "    CA:       %s\n", yesNo(c.IsCA))
		fmt.Fprintf(w, "    SHA-256:  %s\n", fingerprint(c))
	}
	host, _, _ := net.SplitHostPort(hostPort)
	fmt.Fprintf(w, "\n%s\n", verdict(chain, anchor, host))
	fmt.Fprintf(w, "\ntrustedCACertificate (certificate [%d], SHA-256 %s):\n%s\n", anchor, fingerprint(chain[anchor]), pemBase64(chain[anchor]))
}

func certNames(c *x509.Certificate) []string {
	names := append([]string(nil), c.DNSNames...)
	for _, ip := range c.IPAddresses {
		names = append(names, ip.String())
	}
	return names
}

// verdict says whether the chain verifies for host with the anchor as the
// only trusted CA, as the driver will check it, and what to do if not.
func verdict(chain []*x509.Certificate, anchor int, host string) string {
	roots := x509.NewCertPool()
	roots.AddCert(chain[anchor])
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	_, err := chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, DNSName: host})
	switch {
	case err == nil:
		return fmt.Sprintf("With certificate [%d] as trustedCACertificate, ONTAP's certificate verifies for %s.", anchor, host)
	case anchor == 0 && !selfSigned(chain[0]):
		return fmt.Sprintf("ONTAP does not present the CA that signed its certificate (issuer %s): take it from your PKI, "+
			"or paste the leaf below to trust exactly this certificate (a renewed certificate will need it again). Check: %v", chain[0].Issuer, err)
	}
	if hostErr := (x509.HostnameError{}); errors.As(err, &hostErr) {
		return fmt.Sprintf("Warning: ONTAP's certificate does not name %s (%v). Set managementLIF to a name the certificate holds, "+
			"or give ONTAP a certificate that names this address (security certificate create ... -subject-alternative-names).", host, err)
	}
	return fmt.Sprintf("Warning: with certificate [%d] as trustedCACertificate, ONTAP's certificate does not verify: %v", anchor, err)
}
