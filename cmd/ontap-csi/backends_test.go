package main

import (
	"encoding/base64"
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/ontap-csi/ontap-csi/controller/inventory"
)

var restAddrRE = regexp.MustCompile(`msg="serving GET /trident/v1/version[^\n]*address="?(127\.0\.0\.1:\d+)`)

// TestBackendHealthAtStart: the controller checks every backend when it
// starts, without holding up serving; the log, `ontap-csi backends` and the
// metrics say which works and, for the one whose ONTAP certificate is not
// trusted, both fixes with the backend named once.
func TestBackendHealthAtStart(t *testing.T) {
	sim, base := tlsSim(t)
	lif := strings.TrimPrefix(base, "https://")
	dir := t.TempDir()
	write := func(name string, extra string) string {
		p := filepath.Join(dir, name+".json")
		body := `{"version":1,"storageDriverName":"ontap-nas","backendName":"` + name + `","managementLIF":"` + lif +
			`","svm":"svm0","username":"admin","password":"password"` + extra + `}`
		if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := write("trusted", `,"trustedCACertificate":"`+base64.StdEncoding.EncodeToString(sim.CACertificatePEM())+`"`)
	bad := write("carried-over", "") // as from Trident: no trustedCACertificate
	p := start(t, []string{"--csi_role=controller", "--csi_endpoint=unix://" + filepath.Join(dir, "csi.sock"),
		"--backend-config=" + good, "--backend-config=" + bad, "--metrics-address=127.0.0.1:0", "--port=0"}, nil, false)
	dial(t, p, filepath.Join(dir, "csi.sock"))

	waitLog(t, p, `msg="backend is online" backend=trusted`)
	warning := waitLog(t, p, `msg="backend carried-over: the TLS certificate ONTAP presents at `+lif+` is not trusted`)
	for _, want := range []string{"set trustedCACertificate", "ontap-csi certificate " + lif, "insecureSkipTLSVerify: true"} {
		if !strings.Contains(warning, want) {
			t.Errorf("the warning lacks %q: %s", want, warning)
		}
	}
	if strings.Count(warning, "carried-over") != 1 {
		t.Errorf("the warning names the backend more than once: %s", warning)
	}

	addr := restAddrRE.FindStringSubmatch(p.logs())
	if addr == nil {
		t.Fatalf("no REST address in the log")
	}
	out, code := runToExit(t, "backends", "--server", addr[1])
	if code != 1 || !regexp.MustCompile(`(?m)^trusted\s+ontap-nas\s+online\s+svm0\s`).MatchString(out) ||
		!regexp.MustCompile(`(?m)^carried-over\s+ontap-nas\s+failed\s`).MatchString(out) || !strings.Contains(out, "failed: backend carried-over: the TLS certificate") {
		t.Fatalf("ontap-csi backends: exit %d:\n%s", code, out)
	}
	out, _ = runToExit(t, "backends", "--server", addr[1], "--json")
	var l inventory.Listing
	if err := json.Unmarshal([]byte(out), &l); err != nil || len(l.Backends) != 2 || l.Refreshed.IsZero() {
		t.Fatalf("--json: %v\n%s", err, out)
	}

	metrics := httpGet(t, "http://"+metricsAddr(t, p)+"/metrics")
	for _, want := range []string{
		`trident_backend_count{backend_state="failed",backend_type="ontap-nas"} 1`,
		`trident_backend_count{backend_state="online",backend_type="ontap-nas"} 1`,
		`trident_build_info{build_type="custom",trident_revision="`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// waitLog waits for a log line containing s and returns it.
func waitLog(t *testing.T, p *proc, s string) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		for _, line := range strings.Split(p.logs(), "\n") {
			if strings.Contains(line, s) {
				return line
			}
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("no log line with %q", s)
	return ""
}
