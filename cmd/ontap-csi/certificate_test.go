package main

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends/ontap"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// TestCertificateAgainstTheSimulator: the chain the simulator's management
// LIF presents (leaf and CA), the CA's fingerprint, and base64 that, pasted
// as trustedCACertificate, lets a backend connect.
func TestCertificateAgainstTheSimulator(t *testing.T) {
	sim, base := tlsSim(t)
	lif := strings.TrimPrefix(base, "https://")
	out, code := runToExit(t, "certificate", lif)
	if code != 0 {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	caPEM := sim.CACertificatePEM()
	want := base64.StdEncoding.EncodeToString(caPEM)
	for _, s := range []string{lif + " presents 2 certificate(s)", "[0] subject:  CN=ontap-sim", "CN=ONTAP simulator CA",
		"SHA-256:  " + caFingerprint(t, caPEM), "ONTAP's certificate verifies for 127.0.0.1", "trustedCACertificate (certificate [1]", want} {
		if !strings.Contains(out, s) {
			t.Errorf("output lacks %q:\n%s", s, out)
		}
	}
	only, code := runToExit(t, "certificate", lif, "--base64")
	if code != 0 || strings.TrimSpace(only) != want {
		t.Fatalf("--base64: exit %d, %q", code, only)
	}
	// Pasted, it is what the driver trusts.
	u, _ := url.Parse(base)
	data, _ := json.Marshal(map[string]any{"version": 1, "storageDriverName": "ontap-nas", "managementLIF": u.Host,
		"svm": sim.Info().SVM, "username": "admin", "password": "password", "trustedCACertificate": strings.TrimSpace(only)})
	cfg, err := config.Parse("pasted", data, "")
	if err != nil {
		t.Fatal(err)
	}
	b, err := ontap.NewBackend(cfg, ontap.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Pools(context.Background()); err != nil {
		t.Fatalf("with the printed trustedCACertificate: %v", err)
	}
}

// TestCertificateSelfSigned: a LIF presenting one self-signed certificate
// (as ONTAP's default certificate is) gets that certificate to paste.
func TestCertificateSelfSigned(t *testing.T) {
	srv := httptest.NewTLSServer(nil)
	t.Cleanup(srv.Close)
	lif := strings.TrimPrefix(srv.URL, "https://")
	out, code := runToExit(t, "certificate", lif)
	leaf := srv.Certificate()
	if code != 0 || !strings.Contains(out, "presents 1 certificate(s)") || !strings.Contains(out, "trustedCACertificate (certificate [0]") ||
		!strings.Contains(out, fingerprintOf(leaf.Raw)) {
		t.Fatalf("exit %d:\n%s", code, out)
	}
	if out, code := runToExit(t, "certificate"); code != 2 || !strings.Contains(out, "usage: ontap-csi certificate") {
		t.Errorf("no LIF: exit %d: %s", code, out)
	}
	if out, code := runToExit(t, "certificate", "127.0.0.1:1"); code != 1 || !strings.Contains(out, "TLS handshake with 127.0.0.1:1") {
		t.Errorf("nothing listening: exit %d: %s", code, out)
	}
}

// tlsSim runs the simulator over HTTPS with its own CA, as an ONTAP
// management LIF with a certificate that is not publicly trusted.
func tlsSim(t *testing.T) (*ontapsim.Simulator, string) {
	t.Helper()
	sim, err := ontapsim.New(ontapsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { sim.Close() })
	base, err := sim.Start("127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	return sim, base
}

func caFingerprint(t *testing.T, pemData []byte) string {
	t.Helper()
	block, _ := pem.Decode(pemData)
	if block == nil {
		t.Fatal("CA: no PEM")
	}
	return fingerprintOf(block.Bytes)
}

func fingerprintOf(der []byte) string {
	sum := sha256.Sum256(der)
	var parts []string
	for _, b := range sum {
		parts = append(parts, fmt.Sprintf("%02X", b))
	}
	return strings.Join(parts, ":")
}
