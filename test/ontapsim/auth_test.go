package ontapsim

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"testing"
)

func TestBasicAuth(t *testing.T) {
	a := newTestSim(t, Config{Username: "vsadmin", Password: "s3cret"})
	tests := []struct {
		name       string
		user, pass string
		set        bool
		status     int
	}{
		{"missing", "", "", false, 401},
		{"wrong password", "vsadmin", "nope", true, 401},
		{"wrong user", "admin", "s3cret", true, 401},
		{"right", "vsadmin", "s3cret", true, 200},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, _ := http.NewRequest("GET", a.base+"/api/cluster", nil)
			if tt.set {
				req.SetBasicAuth(tt.user, tt.pass)
			}
			res, err := a.hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, res.Body)
			res.Body.Close()
			if res.StatusCode != tt.status {
				t.Fatalf("status %d, want %d", res.StatusCode, tt.status)
			}
			if tt.status == 401 && res.Header.Get("WWW-Authenticate") == "" {
				t.Fatal("401 without WWW-Authenticate")
			}
		})
	}
	// Unauthenticated requests are not counted as API requests.
	if n := a.sim.Stats().Count("GET", "/api/cluster"); n != 1 {
		t.Fatalf("counted %d", n)
	}
}

func TestTLSAndClientCertificates(t *testing.T) {
	s, err := New(Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	base, err := s.Start("127.0.0.1:0", true)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(s.CACertificatePEM()) {
		t.Fatal("CA PEM")
	}
	get := func(conf *tls.Config, basic bool) (int, error) {
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: conf}}
		defer hc.CloseIdleConnections()
		req, _ := http.NewRequest("GET", base+"/api/cluster", nil)
		if basic {
			req.SetBasicAuth("admin", "password")
		}
		res, err := hc.Do(req)
		if err != nil {
			return 0, err
		}
		res.Body.Close()
		return res.StatusCode, nil
	}
	if st, err := get(&tls.Config{RootCAs: pool}, true); err != nil || st != 200 {
		t.Fatalf("trusted CA + basic auth: %d %v", st, err)
	}
	var uae x509.UnknownAuthorityError
	if _, err := get(&tls.Config{}, true); !errors.As(err, &uae) {
		t.Fatalf("without the CA: %v", err)
	}
	cert := func(user string) tls.Certificate {
		c, k, err := s.IssueClientCertificate(user)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(c, k)
		if err != nil {
			t.Fatal(err)
		}
		return pair
	}
	if st, err := get(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert("admin")}}, false); err != nil || st != 200 {
		t.Fatalf("client certificate for admin: %d %v", st, err)
	}
	if st, err := get(&tls.Config{RootCAs: pool, Certificates: []tls.Certificate{cert("mallory")}}, false); err != nil || st != 401 {
		t.Fatalf("client certificate for another user: %d %v", st, err)
	}
}

func TestPlainHTTPStart(t *testing.T) {
	s, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	base, err := s.Start("127.0.0.1:0", false)
	if err != nil {
		t.Fatal(err)
	}
	res, err := http.Get(base + "/sim/info")
	if err != nil {
		t.Fatal(err)
	}
	res.Body.Close()
	dir := s.DataDir()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/sim/info"); err == nil {
		t.Fatal("still serving after Close")
	}
	// Without a data dir the temporary directory goes away.
	if _, err := statDir(dir); err == nil {
		t.Fatalf("temporary data dir %s left behind", dir)
	}
}
