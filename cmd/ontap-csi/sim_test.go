package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestSimSubcommand(t *testing.T) {
	dataDir := t.TempDir()
	startSim := func() (*exec.Cmd, string) {
		cmd := exec.Command(binary, "sim", "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--password", "s3cret")
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		cmd.Stderr = os.Stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
		line, err := bufio.NewReader(out).ReadString('\n')
		if err != nil {
			t.Fatalf("reading the first line: %v", err)
		}
		url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening on ")
		if !ok || !strings.HasPrefix(url, "https://127.0.0.1:") {
			t.Fatalf("first line %q, want \"listening on https://127.0.0.1:<port>\"", line)
		}
		return cmd, url
	}
	client := func() *http.Client {
		pem, err := os.ReadFile(filepath.Join(dataDir, "tls", "ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		pool := x509.NewCertPool()
		pool.AppendCertsFromPEM(pem)
		return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	}
	get := func(url, user, pass string) (int, map[string]any) {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		req.SetBasicAuth(user, pass)
		resp, err := client().Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		var body map[string]any
		_ = json.NewDecoder(resp.Body).Decode(&body)
		return resp.StatusCode, body
	}

	cmd, url := startSim()
	if code, _ := get(url+"/api/cluster", "admin", "wrong"); code != http.StatusUnauthorized {
		t.Fatalf("wrong password: HTTP %d", code)
	}
	code, body := get(url+"/api/svm/svms?name=svm0", "admin", "s3cret")
	if code != http.StatusOK || body["num_records"] != float64(1) {
		t.Fatalf("svm lookup: HTTP %d %v", code, body)
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("exit after SIGTERM: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dataDir, "state.json")); err != nil {
		t.Fatalf("state not saved: %v", err)
	}

	// A restart on the same data dir keeps the certificate authority.
	_, url = startSim()
	if code, _ := get(url+"/api/cluster", "admin", "s3cret"); code != http.StatusOK {
		t.Fatalf("after restart: HTTP %d", code)
	}

	out, code2 := runToExit(t, "sim", "--latency", "slow")
	if code2 != 2 || !strings.Contains(out, "--latency") {
		t.Fatalf("bad --latency: exit %d, %q", code2, out)
	}
}
