package ontap

import (
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/ontap-csi/ontap-csi/backends/ontap/config"
	"github.com/ontap-csi/ontap-csi/backends/ontap/rest"
	"github.com/ontap-csi/ontap-csi/test/ontapsim"
)

// A backend config's credentials, CA and address reach the REST client:
// end to end against the simulator over TLS, with a password and with a
// client certificate, and printing the client settings shows no secret.
func TestClientConfigOfBackend(t *testing.T) {
	s, err := ontapsim.New(ontapsim.Config{SVM: "svm0", Username: "admin", Password: "pa55-word-xyz"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	rawURL, err := s.Start("127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	host := strings.TrimPrefix(rawURL, "https://")
	b64 := base64.StdEncoding.EncodeToString
	certPEM, keyPEM, err := s.IssueClientCertificate("admin")
	if err != nil {
		t.Fatal(err)
	}
	for name, creds := range map[string]string{
		"password":    `"username":"admin","password":"pa55-word-xyz"`,
		"certificate": fmt.Sprintf(`"clientCertificate":%q,"clientPrivateKey":%q`, b64(certPEM), b64(keyPEM)),
	} {
		t.Run(name, func(t *testing.T) {
			data := fmt.Sprintf(`{"version":1,"storageDriverName":"ontap-nas","managementLIF":%q,"svm":"svm0","trustedCACertificate":%q,%s}`,
				host, b64(s.CACertificatePEM()), creds)
			cfg, err := config.Parse("t.json", []byte(data), "")
			if err != nil {
				t.Fatal(err)
			}
			cc := clientConfig(cfg)
			if cc.ManagementLIF != host || cc.SVM != "svm0" || cc.Password != string(cfg.Password) || cc.InsecureSkipTLSVerify ||
				string(cc.TrustedCACertificate) != string(s.CACertificatePEM()) ||
				string(cc.ClientCertificate) != string(cfg.ClientCertificate) || string(cc.ClientPrivateKey) != string(cfg.ClientPrivateKey) {
				t.Errorf("client config %v", cc)
			}
			out := fmt.Sprintf("%v %+v %#v %s", cc, cc, cc, cc)
			if strings.Contains(out, "pa55-word-xyz") || strings.Contains(out, "PRIVATE KEY") {
				t.Fatalf("secret shown in %s", out)
			}
			c, err := rest.NewClient(cc)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := c.SVM(context.Background()); err != nil {
				t.Fatalf("client from backend config: %v", err)
			}
		})
	}
}
