package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// binary is ontap-sim, built once for the package's tests.
var binary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "ontap-sim-bin-")
	if err != nil {
		panic(err)
	}
	binary = filepath.Join(dir, "ontap-sim")
	build := exec.Command("go", "build", "-o", binary, ".")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		panic("building ontap-sim: " + err.Error())
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// runToExit runs the binary to completion and returns its combined output
// and exit code.
func runToExit(t *testing.T, args ...string) (string, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, binary, args...).CombinedOutput()
	var exit *exec.ExitError
	switch {
	case err == nil:
		return string(out), 0
	case errors.As(err, &exit):
		return string(out), exit.ExitCode()
	}
	t.Fatalf("running %v: %v", args, err)
	return "", -1
}

func TestServe(t *testing.T) {
	dataDir := t.TempDir()
	startSim := func() (*exec.Cmd, string) {
		cmd := exec.Command(binary, "--listen", "127.0.0.1:0", "--data-dir", dataDir, "--password", "s3cret")
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

}

func TestBadCommandLines(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--latency", "slow"}, "ontap-sim: --latency: "},
		{[]string{"--bogus"}, "ontap-sim: flag provided but not defined: -bogus"},
		{[]string{"extra"}, `ontap-sim: unexpected argument "extra"`},
		{[]string{"--listen", "nowhere"}, `ontap-sim: --listen "nowhere": `},
		{[]string{"--log-format", "xml"}, `ontap-sim: --log-format "xml": want text or json`},
		{[]string{"--iscsi-lifs", "10.0.0.300"}, `ontap-sim: --iscsi-lifs: "10.0.0.300" is not an IP address`},
		{[]string{"--dataplane", "fuse"}, `ontap-sim: --dataplane "fuse": want file or kernel`},
	} {
		out, code := runToExit(t, tc.args...)
		if code != 2 || !strings.HasPrefix(out, tc.want) || strings.Count(out, "\n") != 1 {
			t.Errorf("ontap-sim %v: exit %d, output %q; want exit 2 and one line starting %q", tc.args, code, out, tc.want)
		}
	}
	if out, code := runToExit(t, "--help"); code != 0 || !strings.HasPrefix(out, "usage: ontap-sim [flags]") {
		t.Errorf("ontap-sim --help: exit %d, output %q", code, out)
	}
}

func TestQtreeQuotaMountsFlag(t *testing.T) {
	var o simOptions
	fs := newSimFlagSet(&o)
	if err := fs.Parse([]string{"--qtree-quota-mounts"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := o.simConfig()
	if err != nil || !cfg.QtreeQuotaMounts {
		t.Errorf("config %+v, %v", cfg, err)
	}
}
