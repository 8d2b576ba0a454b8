package ontap_test

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends"
	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// TestUntrustedCertificateNamesBothFixes: a backend carried over from
// Trident (which never verified ONTAP's certificate) fails its first call
// with the backend named once and both ways out.
func TestUntrustedCertificateNamesBothFixes(t *testing.T) {
	other, err := ontapsim.New(ontapsim.Config{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { other.Close() })
	otherCA := base64.StdEncoding.EncodeToString(other.CACertificatePEM())
	for _, tc := range []struct {
		name  string
		extra map[string]any
		want  string
	}{
		{"no trustedCACertificate", map[string]any{"trustedCACertificate": nil}, "is not trusted (x509: certificate signed by unknown authority)"},
		{"another CA", map[string]any{"trustedCACertificate": otherCA}, "does not verify against trustedCACertificate (x509: certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, _ := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, tc.extra)
			_, err := b.Pools(ctxT(t))
			if !errors.Is(err, backends.ErrUnavailable) {
				t.Fatalf("err = %v, want unavailable", err)
			}
			msg := err.Error()
			for _, want := range []string{tc.want, "set trustedCACertificate to the base64 PEM of the CA that signed it",
				"`ontap-csi certificate 127.0.0.1:", "or set insecureSkipTLSVerify: true for a first test only"} {
				if !strings.Contains(msg, want) {
					t.Errorf("%q\nlacks %q", msg, want)
				}
			}
			if n := strings.Count(msg, "b1"); n != 1 || !strings.HasPrefix(msg, "backend b1: ") {
				t.Errorf("%q names the backend %d times, want once at the start", msg, n)
			}
			// Named again by a caller, it still names it once.
			if again := backends.Named("b1", err).Error(); again != msg {
				t.Errorf("named again: %q", again)
			}
		})
	}
}

// TestInsecureSkipTLSVerify is the first-test way out the message names.
func TestInsecureSkipTLSVerify(t *testing.T) {
	b, _ := simBackend(t, config.DriverONTAPNAS, ontapsim.Config{}, map[string]any{"trustedCACertificate": nil, "insecureSkipTLSVerify": true})
	if _, err := b.Pools(ctxT(t)); err != nil {
		t.Fatal(err)
	}
}
